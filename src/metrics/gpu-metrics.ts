import type { Registry } from 'prom-client';
import type { Logger } from '../core/logger.js';
import { Nvml, type GpuReading, type NvmlUnavailable } from '../native/nvml.js';
import { ScrapedCounter, ScrapedGauge, type Sample } from './families.js';

/** Stops reading and shuts NVML down. */
export interface GpuMetrics {
  stop(): Promise<void>;
}

/** How NVML is opened; tests pass a double of NVML's function table. */
export type OpenNvml = () => Promise<Nvml | NvmlUnavailable>;

/** Triton's gauge families: name, help, and the field of a reading each one shows. */
const GAUGES: ReadonlyArray<readonly [string, string, (r: GpuReading) => number | undefined]> = [
  ['nv_gpu_utilization', 'Share of the last sample period the GPU was running a kernel, 0 to 1', (r) => r.utilization],
  ['nv_gpu_memory_total_bytes', 'GPU memory, in bytes', (r) => r.memoryTotalBytes],
  ['nv_gpu_memory_used_bytes', 'GPU memory allocated, in bytes', (r) => r.memoryUsedBytes],
  ['nv_gpu_power_usage', 'GPU power draw, in watts', (r) => r.powerWatts],
  ['nv_gpu_power_limit', 'GPU power management limit, in watts', (r) => r.powerLimitWatts],
];
const ENERGY = 'nv_energy_consumption';

/** The readings of every visible GPU: one serves every family of a scrape and any scrape within `intervalMs`. */
class GpuReadings {
  stopped = false;
  readonly #nvml: Nvml;
  readonly #intervalMs: number;
  readonly #logger: Logger;
  /** Each field that fails is reported once per GPU, not once per scrape. */
  readonly #reported = new Set<string>();
  readonly #baseline = new Map<string, number>();
  #latest: { at: number; readings: Promise<Map<string, GpuReading>> } | undefined;

  constructor(nvml: Nvml, intervalMs: number, logger: Logger) {
    this.#nvml = nvml;
    this.#intervalMs = intervalMs;
    this.#logger = logger;
  }

  #note(uuid: string, r: GpuReading): void {
    for (const [field, f] of Object.entries(r.failures)) {
      const key = `${uuid}/${field}`;
      if (this.#reported.has(key)) continue;
      this.#reported.add(key);
      const msg = `GPU ${uuid}: ${field} is not reported: ${f.message}`;
      if (f.notSupported) this.#logger.debug(msg);
      else this.#logger.warn(msg);
    }
  }

  async #readAll(): Promise<Map<string, GpuReading>> {
    const nvml = this.#nvml;
    const readings = await Promise.all(nvml.devices.map(async (d) => [d.uuid, await nvml.read(d)] as const));
    for (const [uuid, r] of readings) this.#note(uuid, r);
    return new Map(readings);
  }

  /**
   * nv_energy_consumption counts from server start (Triton's meaning): NVML's counter since driver load, less the
   * first value read. A GPU whose first read failed takes its baseline from its first successful one.
   */
  async takeBaseline(): Promise<void> {
    try {
      for (const [uuid, r] of await this.#readAll()) {
        if (r.energyJoules !== undefined) this.#baseline.set(uuid, r.energyJoules);
      }
    } catch (err) {
      this.#logger.warn(
        { err },
        'GPU metrics: the first NVML reading failed; energy counts from the first that succeeds',
      );
    }
  }

  current(): Promise<Map<string, GpuReading>> {
    const now = Date.now();
    if (!this.#latest || now - this.#latest.at >= this.#intervalMs) {
      const readings = this.#readAll().catch((err: unknown) => {
        // A failed reading is not cached: the next scrape tries again.
        if (this.#latest?.readings === readings) this.#latest = undefined;
        if (!this.#reported.has('*')) this.#logger.warn({ err }, 'GPU metrics could not be read from NVML');
        this.#reported.add('*');
        return new Map<string, GpuReading>();
      });
      this.#latest = { at: now, readings };
    }
    return this.#latest.readings;
  }

  /** A scrape in flight finishes with the reading it started before NVML goes. */
  async settled(): Promise<void> {
    await this.#latest?.readings;
  }

  readonly energy = (r: GpuReading, uuid: string): number | undefined => {
    if (r.energyJoules === undefined) return undefined;
    if (!this.#baseline.has(uuid)) this.#baseline.set(uuid, r.energyJoules);
    return Math.max(0, r.energyJoules - (this.#baseline.get(uuid) as number));
  };

  /** A family's collect function: one sample per GPU whose reading has the field `pick` takes. */
  series(pick: (r: GpuReading, uuid: string) => number | undefined): () => Promise<readonly Sample[]> {
    return async () => {
      if (this.stopped) return [];
      const out: Sample[] = [];
      for (const [uuid, r] of await this.current()) {
        const value = pick(r, uuid);
        if (value !== undefined) out.push({ labels: { gpu_uuid: uuid }, value });
      }
      return out;
    };
  }
}

/**
 * Registers Triton's GPU families (`nv_gpu_*`, `nv_energy_consumption`, label `gpu_uuid`), one series per
 * CUDA-visible GPU, read from NVML when scraped. One reading serves every family of a scrape and any scrape within
 * `intervalMs` (`--metrics-interval-ms`), so values are at most one interval old, as with Triton's polling, while an
 * idle server makes no NVML calls at all.
 *
 * Returns undefined and registers nothing where there is no NVML or no visible GPU: the families are then absent,
 * never zeros a dashboard would believe, and the only trace is one debug line (a CPU-only machine is not a fault).
 * A field a GPU cannot report (NVML_ERROR_NOT_SUPPORTED, e.g. power on some boards) is left out of its family.
 */
export async function startGpuMetrics(
  registry: Registry,
  intervalMs: number,
  logger: Logger,
  open: OpenNvml = () => Nvml.open(),
): Promise<GpuMetrics | undefined> {
  const opened = await open().catch((err: unknown) => ({ reason: err instanceof Error ? err.message : String(err) }));
  if (!(opened instanceof Nvml)) {
    logger.debug(`GPU metrics are off: ${opened.reason}`);
    return undefined;
  }
  const nvml = opened;
  if (nvml.devices.length === 0) {
    logger.debug(`GPU metrics are off: none of the ${nvml.allDevices.length} GPUs is visible to CUDA`);
    await nvml.close();
    return undefined;
  }
  const readings = new GpuReadings(nvml, intervalMs, logger);
  await readings.takeBaseline();

  const names = [...GAUGES.map(([name]) => name), ENERGY];
  for (const [name, help, pick] of GAUGES) registry.registerMetric(new ScrapedGauge(name, help, readings.series(pick)));
  registry.registerMetric(
    new ScrapedCounter(ENERGY, 'GPU energy used since the server started, in joules', readings.series(readings.energy)),
  );
  logger.info(`Collecting metrics for ${nvml.devices.length} GPU(s): ${nvml.devices.map((d) => d.name).join(', ')}`);

  return {
    async stop() {
      if (readings.stopped) return;
      readings.stopped = true;
      for (const name of names) registry.removeSingleMetric(name);
      await readings.settled();
      await nvml.close();
    },
  };
}
