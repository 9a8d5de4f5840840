/**
 * GPU use during a measurement point, from NVML: the mean utilization and the peak memory used of the GPUs the
 * candidates run on, sampled every 100 ms. Memory is the device's (every process on it), which is what a
 * `--max-gpu-memory-mb` budget is about. On a machine without an NVIDIA driver there is no sampler and the
 * report says why.
 */
import { Nvml, type GpuDevice, type NvmlUnavailable } from '../../native/nvml.js';

export interface GpuUse {
  /** Mean utilization over the samples, 0–100 (the mean over the GPUs). */
  utilPct: number;
  /** Peak memory used, MiB (summed over the GPUs). */
  memUsedMiB: number;
}

export interface GpuSampler {
  /** Starts sampling; the returned function stops and gives what was seen (undefined: no sample came back). */
  start(): () => GpuUse | undefined;
  close(): Promise<void>;
}

const SAMPLE_MS = 100;

/** A sampler of `gpus` (NVML indexes; default every visible GPU), or why there is none. */
export async function openGpuSampler(
  gpus: readonly number[] | undefined,
  open: () => Promise<Nvml | NvmlUnavailable> = () => Nvml.open(),
): Promise<GpuSampler | NvmlUnavailable> {
  const nvml = await open();
  if (!(nvml instanceof Nvml)) return nvml;
  const devices: GpuDevice[] = nvml.devices.filter((d) => gpus === undefined || gpus.includes(d.index));
  if (devices.length === 0) {
    await nvml.close();
    return { reason: `none of GPUs ${gpus?.join(',')} is visible to NVML` };
  }
  return {
    start() {
      const utils: number[] = [];
      let peak = 0;
      let busy = false;
      const sample = async (): Promise<void> => {
        if (busy) return;
        busy = true;
        try {
          const readings = await Promise.all(devices.map((d) => nvml.read(d)));
          const u = readings.map((r) => r.utilization).filter((x): x is number => x !== undefined);
          if (u.length > 0) utils.push((100 * u.reduce((a, b) => a + b, 0)) / u.length);
          peak = Math.max(
            peak,
            readings.reduce((a, r) => a + (r.memoryUsedBytes ?? 0), 0),
          );
        } catch {
          // A failed read is a missing sample, not a failed point.
        } finally {
          busy = false;
        }
      };
      void sample();
      const timer = setInterval(() => void sample(), SAMPLE_MS);
      return () => {
        clearInterval(timer);
        if (utils.length === 0 && peak === 0) return undefined;
        return {
          utilPct: utils.reduce((a, b) => a + b, 0) / Math.max(1, utils.length),
          memUsedMiB: peak / 2 ** 20,
        };
      };
    },
    close: () => nvml.close(),
  };
}
