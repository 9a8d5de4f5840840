import {
  DEVICE_NAME_BUFFER_SIZE,
  DEVICE_UUID_BUFFER_SIZE,
  DRIVER_VERSION_BUFFER_SIZE,
  MEMORY_STRUCT_SIZE,
  NVML_ERROR_NOT_SUPPORTED,
  NVML_SUCCESS,
  UTILIZATION_STRUCT_SIZE,
  decodeCString,
  decodeMemory,
  decodeUtilization,
  formatCudaVersion,
  type NvmlApi,
  type NvmlDeviceHandle,
} from './nvml-api.js';
import { NVML_LIBRARY, loadNvmlApi } from './nvml-koffi.js';
import { visibleDevices } from './visible.js';

/** The driver as NVML reports it. */
export interface DriverInfo {
  /** e.g. "580.65.06". */
  driverVersion: string;
  /** The CUDA version the driver supports, e.g. "13.0"; undefined where libcuda is absent. */
  cudaDriverVersion?: string;
}

/** One GPU, enumerated once at open. */
export interface GpuDevice {
  /** NVML's index (PCI bus order). */
  index: number;
  name: string;
  /** "GPU-…": the `gpu_uuid` label of Triton's GPU metrics. */
  uuid: string;
  handle: NvmlDeviceHandle;
}

/** The readable fields of one device now; a field the device cannot report is absent, with its reason in failures. */
export interface GpuReading {
  memoryTotalBytes?: number;
  memoryUsedBytes?: number;
  /** Share of the last sample period a kernel ran, [0, 1]. */
  utilization?: number;
  powerWatts?: number;
  powerLimitWatts?: number;
  /** Energy since the driver loaded, in joules. */
  energyJoules?: number;
  /** Field name → NVML's message, with `notSupported` telling "this GPU has no such sensor" from a failure. */
  failures: Record<string, { message: string; notSupported: boolean }>;
}

/** NVML cannot be used here, and why (a CPU-only machine, a container without the driver, a driver not loaded). */
export interface NvmlUnavailable {
  reason: string;
}

/** An NVML call that did not return NVML_SUCCESS. */
export class NvmlError extends Error {
  readonly nvmlCode: number;
  constructor(call: string, code: number, message: string) {
    super(`${call}: ${message}`);
    this.name = 'NvmlError';
    this.nvmlCode = code;
  }
}

/**
 * An initialised NVML session. Opened once by its user (the metrics endpoint, `nereid gpu check`), closed once;
 * NVML counts init/shutdown pairs, so sessions in one process do not disturb each other.
 */
export class Nvml {
  readonly #api: NvmlApi;
  /** The CUDA-visible GPUs (CUDA_VISIBLE_DEVICES at open), as Triton reports metrics for those only. */
  readonly devices: readonly GpuDevice[];
  /** Every GPU the driver sees. */
  readonly allDevices: readonly GpuDevice[];
  #closing: Promise<void> | undefined;

  private constructor(api: NvmlApi, all: GpuDevice[], visible: GpuDevice[]) {
    this.#api = api;
    this.allDevices = all;
    this.devices = visible;
  }

  /**
   * Loads NVML (the real library unless `api` is given) and enumerates the GPUs. Never throws for a machine without
   * a driver: that is returned as NvmlUnavailable with a sentence a user can act on.
   */
  static async open(api?: NvmlApi, env: NodeJS.ProcessEnv = process.env): Promise<Nvml | NvmlUnavailable> {
    if (!api) {
      const loaded = await loadNvmlApi();
      if (!('init' in loaded)) {
        const missing = /no such file|not found|cannot open/i.test(loaded.reason);
        return {
          reason: missing
            ? `no NVIDIA driver: ${loaded.library === NVML_LIBRARY ? NVML_LIBRARY : loaded.library} not found`
            : `no usable NVIDIA driver: ${loaded.library} could not be loaded: ${loaded.reason}`,
        };
      }
      api = loaded;
    }
    const code = await api.init();
    if (code !== NVML_SUCCESS) {
      return { reason: `NVIDIA driver present but NVML did not start: ${api.errorString(code)} (nvmlInit_v2 ${code})` };
    }
    try {
      const all = await enumerate(api);
      return new Nvml(api, all, visibleDevices(all, env.CUDA_VISIBLE_DEVICES));
    } catch (err) {
      await api.shutdown();
      return { reason: err instanceof Error ? err.message : String(err) };
    }
  }

  /** Driver and CUDA driver versions. */
  async driver(): Promise<DriverInfo> {
    const buf = Buffer.alloc(DRIVER_VERSION_BUFFER_SIZE);
    check(this.#api, 'nvmlSystemGetDriverVersion', await this.#api.systemGetDriverVersion(buf, buf.length));
    const cuda = new Int32Array(1);
    const code = await this.#api.systemGetCudaDriverVersion(cuda);
    return {
      driverVersion: decodeCString(buf),
      cudaDriverVersion: code === NVML_SUCCESS ? formatCudaVersion(cuda[0]) : undefined,
    };
  }

  /** Reads every field of one device; the five queries run side by side on the pool. */
  async read(device: GpuDevice): Promise<GpuReading> {
    const api = this.#api;
    const h = device.handle;
    const reading: GpuReading = { failures: {} };
    const field = async <T>(name: string, call: () => Promise<number>, use: () => T): Promise<T | undefined> => {
      const code = await call();
      if (code === NVML_SUCCESS) return use();
      reading.failures[name] = { message: api.errorString(code), notSupported: code === NVML_ERROR_NOT_SUPPORTED };
      return undefined;
    };
    const mem = Buffer.alloc(MEMORY_STRUCT_SIZE);
    const util = Buffer.alloc(UTILIZATION_STRUCT_SIZE);
    const power = new Uint32Array(1);
    const limit = new Uint32Array(1);
    const energy = new BigUint64Array(1);
    const [m, u, p, l, e] = await Promise.all([
      field(
        'memory',
        () => api.deviceGetMemoryInfo(h, mem),
        () => decodeMemory(mem),
      ),
      field(
        'utilization',
        () => api.deviceGetUtilizationRates(h, util),
        () => decodeUtilization(util).gpu,
      ),
      field(
        'power',
        () => api.deviceGetPowerUsage(h, power),
        () => power[0] / 1000,
      ),
      field(
        'powerLimit',
        () => api.deviceGetPowerManagementLimit(h, limit),
        () => limit[0] / 1000,
      ),
      field(
        'energy',
        () => api.deviceGetTotalEnergyConsumption(h, energy),
        () => Number(energy[0]) / 1000,
      ),
    ]);
    if (m) {
      reading.memoryTotalBytes = m.totalBytes;
      reading.memoryUsedBytes = m.usedBytes;
    }
    reading.utilization = u;
    reading.powerWatts = p;
    reading.powerLimitWatts = l;
    reading.energyJoules = e;
    return reading;
  }

  /** Shuts this session down once; later calls return the same promise. */
  close(): Promise<void> {
    this.#closing ??= this.#api.shutdown().then(() => undefined);
    return this.#closing;
  }
}

function check(api: NvmlApi, call: string, code: number): void {
  if (code !== NVML_SUCCESS) throw new NvmlError(call, code, api.errorString(code));
}

async function enumerate(api: NvmlApi): Promise<GpuDevice[]> {
  const count = new Uint32Array(1);
  check(api, 'nvmlDeviceGetCount_v2', await api.deviceGetCount(count));
  const devices: GpuDevice[] = [];
  for (let index = 0; index < count[0]; index++) {
    const out: NvmlDeviceHandle[] = [null];
    const code = await api.deviceGetHandleByIndex(index, out);
    // A GPU the caller may not open (NO_PERMISSION) or one that fell off the bus is skipped, as nvidia-smi does.
    if (code !== NVML_SUCCESS) continue;
    const handle = out[0];
    const name = Buffer.alloc(DEVICE_NAME_BUFFER_SIZE);
    const uuid = Buffer.alloc(DEVICE_UUID_BUFFER_SIZE);
    check(api, 'nvmlDeviceGetName', await api.deviceGetName(handle, name, name.length));
    check(api, 'nvmlDeviceGetUUID', await api.deviceGetUUID(handle, uuid, uuid.length));
    devices.push({ index, name: decodeCString(name), uuid: decodeCString(uuid), handle });
  }
  return devices;
}
