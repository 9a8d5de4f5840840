import { Gauge, type Registry } from 'prom-client';
import type { Logger } from '../core/logger.js';
import { cpuUtilization, readCpuTimes, readMemoryUsage, type CpuTimes } from './proc.js';

/** Stops the per-interval sampling. */
export interface SystemMetrics {
  stop(): void;
}

/**
 * Registers Triton's host gauges (no labels) and samples /proc every `intervalMs` (`--metrics-interval-ms`), as
 * Triton does: CPU utilization is the busy share of the last interval, so it needs two samples and reads 0 until the
 * first interval has passed. Returns undefined, registering nothing, where /proc is missing.
 */
export async function startSystemMetrics(
  registry: Registry,
  intervalMs: number,
  logger: Logger,
): Promise<SystemMetrics | undefined> {
  const first = await readCpuTimes();
  const mem = await readMemoryUsage();
  if (!first || !mem) {
    logger.info('CPU metrics are off: /proc/stat or /proc/meminfo cannot be read on this platform');
    return undefined;
  }
  const gauge = (name: string, help: string): Gauge<string> => {
    const g = new Gauge({ name, help, registers: [registry] });
    g.set(0);
    return g;
  };
  const utilization = gauge('nv_cpu_utilization', 'Share of host CPU time busy over the last interval, 0 to 1');
  const total = gauge('nv_cpu_memory_total_bytes', 'Host memory, in bytes');
  const used = gauge('nv_cpu_memory_used_bytes', 'Host memory in use (total minus available), in bytes');
  total.set(mem.totalBytes);
  used.set(mem.usedBytes);

  let prev: CpuTimes = first;
  let busy = false;
  const sample = async (): Promise<void> => {
    const [cpu, m] = await Promise.all([readCpuTimes(), readMemoryUsage()]);
    if (cpu) {
      utilization.set(cpuUtilization(prev, cpu));
      prev = cpu;
    }
    if (m) {
      total.set(m.totalBytes);
      used.set(m.usedBytes);
    }
  };
  const timer = setInterval(() => {
    // A slow /proc read (a loaded host) skips a tick rather than stacking reads.
    if (busy) return;
    busy = true;
    sample()
      .catch((err: unknown) => logger.debug({ err }, 'CPU metrics sample failed'))
      .finally(() => {
        busy = false;
      });
  }, intervalMs);
  // Sampling must never keep the process alive on its own.
  timer.unref();
  return { stop: () => clearInterval(timer) };
}
