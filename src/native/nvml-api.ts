/**
 * The part of NVML (the driver's `libnvidia-ml.so.1`) Nereid calls, as a table of C functions with C calling
 * conventions kept: every function returns an `nvmlReturn_t` and writes its result into caller-owned memory. The
 * koffi binding (nvml-koffi.ts) implements it over the real library; tests implement it in JavaScript, writing the
 * same bytes the C structs hold, so the decoding in nvml.ts is tested without a GPU.
 *
 * Ownership: every buffer is allocated by the caller (nvml.ts) and only written during the call. Device handles are
 * opaque values owned by NVML, valid from init to shutdown.
 *
 * Threading: NVML is thread-safe; every call returns a promise because the koffi binding runs it on libuv's pool — a
 * query may take milliseconds while the driver is busy, and it must not hold the event loop that serves requests.
 */

/** `nvmlReturn_t` values Nereid tells apart (nvml.h). */
export const NVML_SUCCESS = 0;
export const NVML_ERROR_NOT_SUPPORTED = 3;
export const NVML_ERROR_INSUFFICIENT_SIZE = 7;
export const NVML_ERROR_DRIVER_NOT_LOADED = 9;
export const NVML_ERROR_FUNCTION_NOT_FOUND = 13;

/** Buffer sizes nvml.h asks for (`NVML_SYSTEM_DRIVER_VERSION_BUFFER_SIZE`, `NVML_DEVICE_NAME_V2_BUFFER_SIZE`, …). */
export const DRIVER_VERSION_BUFFER_SIZE = 80;
export const DEVICE_NAME_BUFFER_SIZE = 96;
export const DEVICE_UUID_BUFFER_SIZE = 96;

/** `nvmlMemory_t`: three `unsigned long long` — total, free, used — in bytes. */
export const MEMORY_STRUCT_SIZE = 24;
/** `nvmlUtilization_t`: two `unsigned int` — gpu, memory — in percent over the driver's last sample period. */
export const UTILIZATION_STRUCT_SIZE = 8;

/** An NVML device handle (`nvmlDevice_t`); opaque to JavaScript. */
export type NvmlDeviceHandle = unknown;

/** The NVML functions Nereid uses, one per C symbol named in its TSDoc. */
export interface NvmlApi {
  /** `nvmlInit_v2` */
  init(): Promise<number>;
  /** `nvmlShutdown` */
  shutdown(): Promise<number>;
  /** `nvmlErrorString`: a static string, safe to call without init. */
  errorString(code: number): string;
  /** `nvmlSystemGetDriverVersion(char *version, unsigned int length)` */
  systemGetDriverVersion(out: Buffer, length: number): Promise<number>;
  /** `nvmlSystemGetCudaDriverVersion_v2(int *version)`: 1000 × major + 10 × minor. */
  systemGetCudaDriverVersion(out: Int32Array): Promise<number>;
  /** `nvmlDeviceGetCount_v2(unsigned int *count)` */
  deviceGetCount(out: Uint32Array): Promise<number>;
  /** `nvmlDeviceGetHandleByIndex_v2(unsigned int index, nvmlDevice_t *device)`: the handle lands in `out[0]`. */
  deviceGetHandleByIndex(index: number, out: NvmlDeviceHandle[]): Promise<number>;
  /** `nvmlDeviceGetName(nvmlDevice_t, char *name, unsigned int length)` */
  deviceGetName(device: NvmlDeviceHandle, out: Buffer, length: number): Promise<number>;
  /** `nvmlDeviceGetUUID(nvmlDevice_t, char *uuid, unsigned int length)` */
  deviceGetUUID(device: NvmlDeviceHandle, out: Buffer, length: number): Promise<number>;
  /** `nvmlDeviceGetMemoryInfo(nvmlDevice_t, nvmlMemory_t *)`: MEMORY_STRUCT_SIZE bytes. */
  deviceGetMemoryInfo(device: NvmlDeviceHandle, out: Buffer): Promise<number>;
  /** `nvmlDeviceGetUtilizationRates(nvmlDevice_t, nvmlUtilization_t *)`: UTILIZATION_STRUCT_SIZE bytes. */
  deviceGetUtilizationRates(device: NvmlDeviceHandle, out: Buffer): Promise<number>;
  /** `nvmlDeviceGetPowerUsage(nvmlDevice_t, unsigned int *milliwatts)` */
  deviceGetPowerUsage(device: NvmlDeviceHandle, out: Uint32Array): Promise<number>;
  /** `nvmlDeviceGetPowerManagementLimit(nvmlDevice_t, unsigned int *milliwatts)` */
  deviceGetPowerManagementLimit(device: NvmlDeviceHandle, out: Uint32Array): Promise<number>;
  /** `nvmlDeviceGetTotalEnergyConsumption(nvmlDevice_t, unsigned long long *millijoules)`: since the driver loaded. */
  deviceGetTotalEnergyConsumption(device: NvmlDeviceHandle, out: BigUint64Array): Promise<number>;
}

/** The NUL-terminated UTF-8 string at the start of `buf`. */
export function decodeCString(buf: Buffer): string {
  const end = buf.indexOf(0);
  return buf.toString('utf8', 0, end < 0 ? buf.length : end);
}

/** `nvmlMemory_t` → bytes. Numbers: a GPU's memory is far below 2^53 bytes. */
export function decodeMemory(buf: Buffer): { totalBytes: number; freeBytes: number; usedBytes: number } {
  return {
    totalBytes: Number(buf.readBigUInt64LE(0)),
    freeBytes: Number(buf.readBigUInt64LE(8)),
    usedBytes: Number(buf.readBigUInt64LE(16)),
  };
}

/** `nvmlUtilization_t` → shares in [0, 1], as Triton exports `nv_gpu_utilization`. */
export function decodeUtilization(buf: Buffer): { gpu: number; memory: number } {
  return { gpu: buf.readUInt32LE(0) / 100, memory: buf.readUInt32LE(4) / 100 };
}

/** `nvmlSystemGetCudaDriverVersion` → "13.0". */
export function formatCudaVersion(v: number): string {
  return `${Math.floor(v / 1000)}.${Math.floor((v % 1000) / 10)}`;
}
