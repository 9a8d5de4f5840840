import { Counter, Gauge, type Registry } from 'prom-client';

/** What the pinned-memory metrics read at each scrape: the page-locked output pools' totals. */
export interface PinnedPoolSource {
  /** Bytes of page-locked memory held (free and lent), lent now, and takes that waited since start. */
  (): { bytes: number; lentBytes: number; waits: number };
}

/**
 * Triton's `nv_pinned_memory_pool_total_bytes` / `_used_bytes` (no labels), read from the page-locked output pools
 * at each scrape (backends/onnxruntime/capi/output-pool.ts). Triton allocates its whole pool at start; Nereid's pools
 * grow to their cap as outputs need them, so total is what is held now. Plus how many requests had to wait for a
 * buffer (the pool was all lent: slow readers, or a cap too small for the load).
 */
export function registerPinnedMetrics(registry: Registry, source: PinnedPoolSource): void {
  new Gauge({
    name: 'nv_pinned_memory_pool_total_bytes',
    help: 'Page-locked host memory held by the output pools, in bytes',
    registers: [registry],
    collect() {
      this.set(source().bytes);
    },
  });
  new Gauge({
    name: 'nv_pinned_memory_pool_used_bytes',
    help: 'Page-locked host memory lent to runs and responses now, in bytes',
    registers: [registry],
    collect() {
      this.set(source().lentBytes);
    },
  });
  let seen = 0;
  new Counter({
    name: 'nereid_pinned_memory_pool_waits_total',
    help: 'Requests that waited for a page-locked output buffer because the pool was all lent',
    registers: [registry],
    collect() {
      const waits = source().waits;
      if (waits > seen) this.inc(waits - seen);
      seen = waits;
    },
  });
}
