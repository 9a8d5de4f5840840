import { promisify } from 'node:util';
import type { NvmlApi } from './nvml-api.js';

/** The driver's NVML library; the soname every NVIDIA driver install provides on Linux. */
export const NVML_LIBRARY = 'libnvidia-ml.so.1';

/**
 * Environment variable naming another NVML library file: for drivers installed outside the loader's path, and for
 * tests, which point it at a test double of NVML built from C.
 */
export const NVML_LIBRARY_ENV = 'NEREID_NVML_LIBRARY';

/** Why NVML could not be bound. */
export interface NvmlLoadFailure {
  /** The library asked for. */
  library: string;
  /** The loader's message (dlerror). */
  reason: string;
}

/**
 * Binds the NvmlApi table to the real library with koffi. koffi is imported here, lazily, so a server that never
 * asks for GPU metrics never loads it. Returns the failure instead of throwing: a missing driver is an ordinary
 * state of a CPU-only machine, not an error.
 */
export async function loadNvmlApi(library?: string): Promise<NvmlApi | NvmlLoadFailure> {
  const path = library ?? process.env[NVML_LIBRARY_ENV] ?? NVML_LIBRARY;
  const { default: koffi } = await import('koffi');
  const { configureKoffi } = await import('./koffi.js');
  let lib: ReturnType<typeof koffi.load>;
  try {
    configureKoffi();
    lib = koffi.load(path);
  } catch (err) {
    return { library: path, reason: err instanceof Error ? err.message : String(err) };
  }
  type Fn = ((...args: unknown[]) => unknown) & { async: (...args: unknown[]) => void };
  const bind = (decl: string): Fn => lib.func(decl) as Fn;
  // Every query runs on libuv's pool (see nvml-api.ts); the pooled call keeps the arguments referenced until done.
  // Out-parameters are declared `void *` and given Buffers or typed arrays: koffi passes their own memory (no copy),
  // so NVML writes straight into the caller's buffer. A device handle comes back through `_Out_ void **` as [null].
  // The library stays mapped for the life of the process; NVML's state is released by nvmlShutdown.
  const pooled = (decl: string): ((...args: unknown[]) => Promise<number>) =>
    promisify(bind(decl).async) as (...args: unknown[]) => Promise<number>;
  const optional = (decl: string): ((...args: unknown[]) => Promise<number>) | undefined => {
    try {
      return pooled(decl);
    } catch {
      return undefined;
    }
  };
  try {
    const errorString = bind('const char *nvmlErrorString(int result)');
    // Older drivers lack the _v2 CUDA version call (which fails cleanly where libcuda is absent); fall back to v1.
    const cudaVersion =
      optional('int nvmlSystemGetCudaDriverVersion_v2(void *version)') ??
      pooled('int nvmlSystemGetCudaDriverVersion(void *version)');
    return {
      init: pooled('int nvmlInit_v2()'),
      shutdown: pooled('int nvmlShutdown()'),
      errorString: (code) => String(errorString(code) ?? `NVML error ${code}`),
      systemGetDriverVersion: pooled('int nvmlSystemGetDriverVersion(void *version, unsigned int length)'),
      systemGetCudaDriverVersion: cudaVersion,
      deviceGetCount: pooled('int nvmlDeviceGetCount_v2(void *count)'),
      deviceGetHandleByIndex: pooled('int nvmlDeviceGetHandleByIndex_v2(unsigned int index, _Out_ void **device)'),
      deviceGetName: pooled('int nvmlDeviceGetName(void *device, void *name, unsigned int length)'),
      deviceGetUUID: pooled('int nvmlDeviceGetUUID(void *device, void *uuid, unsigned int length)'),
      deviceGetMemoryInfo: pooled('int nvmlDeviceGetMemoryInfo(void *device, void *memory)'),
      deviceGetUtilizationRates: pooled('int nvmlDeviceGetUtilizationRates(void *device, void *util)'),
      deviceGetPowerUsage: pooled('int nvmlDeviceGetPowerUsage(void *device, void *milliwatts)'),
      deviceGetPowerManagementLimit: pooled('int nvmlDeviceGetPowerManagementLimit(void *device, void *milliwatts)'),
      deviceGetTotalEnergyConsumption: pooled(
        'int nvmlDeviceGetTotalEnergyConsumption(void *device, void *millijoules)',
      ),
    };
  } catch (err) {
    // A library without one of these symbols is not a usable NVML (a driver far older than CUDA 13 needs).
    lib.unload();
    return { library: path, reason: err instanceof Error ? err.message : String(err) };
  }
}
