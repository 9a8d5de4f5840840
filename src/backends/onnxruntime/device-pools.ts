import { loadCudaRuntime } from '../../native/cudart.js';
import type { InstanceSpec } from '../contract.js';
import { OutputPool, type OutputPoolStats, type PinnedMemory } from './capi/output-pool.js';

/** Triton's `--pinned-memory-pool-byte-size` default: 256 MiB. */
export const DEFAULT_PINNED_POOL_BYTES = 256 * 1024 * 1024;

/**
 * The onnxruntime backend's page-locked output pools, one per GPU (capi/output-pool.ts), each bounded by
 * `maxBytes` (`--pinned-memory-pool-byte-size`; 0 turns pooling off). Memory comes from cudaMallocHost
 * (src/native/cudart.ts), or from `memory` (tests: a TEST DOUBLE). A pool is made at the first KIND_GPU instance of
 * its device; without a CUDA runtime there is none (the instance cannot have loaded anyway).
 */
export class DevicePools {
  readonly #maxBytes: number;
  readonly #memory: (() => PinnedMemory | undefined) | undefined;
  readonly #pools = new Map<number, OutputPool>();

  constructor(maxBytes: number, memory?: () => PinnedMemory | undefined) {
    this.#maxBytes = maxBytes;
    this.#memory = memory;
  }

  /** The pool a KIND_GPU instance's outputs are lent from; undefined for other kinds or with pooling off. */
  forInstance(spec: InstanceSpec): OutputPool | undefined {
    if (spec.kind !== 'KIND_GPU' || this.#maxBytes <= 0) return undefined;
    let pool = this.#pools.get(spec.device);
    if (pool === undefined) {
      const memory = this.#memory === undefined ? cudaPinned() : this.#memory();
      if (memory === undefined) return undefined;
      pool = new OutputPool(memory, this.#maxBytes);
      this.#pools.set(spec.device, pool);
    }
    return pool;
  }

  /** The pools' statistics summed (the metrics' `nv_pinned_memory_pool_*`). */
  stats(): OutputPoolStats {
    const sum: OutputPoolStats = { bytes: 0, lentBytes: 0, waits: 0, unpooled: 0 };
    for (const p of this.#pools.values()) {
      const s = p.stats();
      sum.bytes += s.bytes;
      sum.lentBytes += s.lentBytes;
      sum.waits += s.waits;
      sum.unpooled += s.unpooled;
    }
    return sum;
  }

  /** Frees the pools' free buffers now, lent ones as they come back. */
  close(): void {
    for (const p of this.#pools.values()) p.close();
    this.#pools.clear();
  }
}

function cudaPinned(): PinnedMemory | undefined {
  const cuda = loadCudaRuntime();
  if ('reason' in cuda) return undefined;
  return { alloc: (bytes) => cuda.mallocHost(bytes), free: (view) => cuda.freeHost(view) };
}
