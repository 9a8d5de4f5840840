import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  NVML_ERROR_NOT_SUPPORTED,
  NVML_SUCCESS,
  type NvmlApi,
  type NvmlDeviceHandle,
} from '../../src/native/nvml-api.js';

/**
 * A test double of NVML's function table, for this machine has no GPU: it writes the bytes NVML's C structs hold
 * (little-endian `nvmlMemory_t`, `nvmlUtilization_t`, NUL-terminated strings) into the caller's buffers, so the
 * decoding in src/gpu/nvml.ts runs as it would over the real library.
 */
export interface DoubleGpu {
  name: string;
  uuid: string;
  memory?: { total: bigint; free: bigint; used: bigint };
  /** Percent, as NVML reports it. */
  utilization?: { gpu: number; memory: number };
  powerMilliwatts?: number;
  limitMilliwatts?: number;
  energyMillijoules?: bigint;
  /** Return codes forced per function name (e.g. `{ deviceGetPowerUsage: 3 }`). */
  fail?: Partial<Record<keyof NvmlApi, number>>;
}

export interface NvmlDoubleState {
  gpus: DoubleGpu[];
  initCode?: number;
  driverVersion?: string;
  /** 1000 × major + 10 × minor; undefined answers NVML_ERROR_LIBRARY_NOT_FOUND as without libcuda. */
  cudaVersion?: number;
  calls: string[];
  inits: number;
  shutdowns: number;
}

const MESSAGES: Record<number, string> = {
  [NVML_SUCCESS]: 'Success',
  [NVML_ERROR_NOT_SUPPORTED]: 'Not Supported',
  9: 'Driver Not Loaded',
  12: 'NVML Shared Library Not Found',
  15: 'GPU is lost',
};

function writeCString(out: Buffer, length: number, s: string): number {
  const bytes = Buffer.from(s, 'utf8');
  if (bytes.length + 1 > length) return 7; // NVML_ERROR_INSUFFICIENT_SIZE
  bytes.copy(out, 0);
  out[bytes.length] = 0;
  return NVML_SUCCESS;
}

/** A fresh double with `gpus`; the state object is live, so a test may change values between reads. */
export function nvmlDouble(
  gpus: DoubleGpu[],
  extra: Partial<NvmlDoubleState> = {},
): { api: NvmlApi; state: NvmlDoubleState } {
  const state: NvmlDoubleState = {
    gpus,
    calls: [],
    inits: 0,
    shutdowns: 0,
    driverVersion: '580.65.06',
    cudaVersion: 13000,
    ...extra,
  };
  const dev = (h: NvmlDeviceHandle): DoubleGpu => state.gpus[(h as { i: number }).i];
  const on = async (name: keyof NvmlApi, h: NvmlDeviceHandle, body: (g: DoubleGpu) => number): Promise<number> => {
    state.calls.push(name);
    const g = dev(h);
    return g.fail?.[name] ?? body(g);
  };
  const api: NvmlApi = {
    init: async () => {
      state.calls.push('init');
      if (state.initCode !== undefined) return state.initCode;
      state.inits++;
      return NVML_SUCCESS;
    },
    shutdown: async () => {
      state.calls.push('shutdown');
      state.shutdowns++;
      return NVML_SUCCESS;
    },
    errorString: (code) => MESSAGES[code] ?? 'Unknown Error',
    systemGetDriverVersion: async (out, length) => writeCString(out, length, state.driverVersion ?? ''),
    systemGetCudaDriverVersion: async (out) => {
      if (state.cudaVersion === undefined) return 12;
      out[0] = state.cudaVersion;
      return NVML_SUCCESS;
    },
    deviceGetCount: async (out) => {
      out[0] = state.gpus.length;
      return NVML_SUCCESS;
    },
    deviceGetHandleByIndex: async (index, out) => {
      const code = state.gpus[index]?.fail?.deviceGetHandleByIndex;
      if (code !== undefined) return code;
      out[0] = { i: index };
      return NVML_SUCCESS;
    },
    deviceGetName: (h, out, length) => on('deviceGetName', h, (g) => writeCString(out, length, g.name)),
    deviceGetUUID: (h, out, length) => on('deviceGetUUID', h, (g) => writeCString(out, length, g.uuid)),
    deviceGetMemoryInfo: (h, out) =>
      on('deviceGetMemoryInfo', h, (g) => {
        if (!g.memory) return NVML_ERROR_NOT_SUPPORTED;
        out.writeBigUInt64LE(g.memory.total, 0);
        out.writeBigUInt64LE(g.memory.free, 8);
        out.writeBigUInt64LE(g.memory.used, 16);
        return NVML_SUCCESS;
      }),
    deviceGetUtilizationRates: (h, out) =>
      on('deviceGetUtilizationRates', h, (g) => {
        if (!g.utilization) return NVML_ERROR_NOT_SUPPORTED;
        out.writeUInt32LE(g.utilization.gpu, 0);
        out.writeUInt32LE(g.utilization.memory, 4);
        return NVML_SUCCESS;
      }),
    deviceGetPowerUsage: (h, out) =>
      on('deviceGetPowerUsage', h, (g) => {
        if (g.powerMilliwatts === undefined) return NVML_ERROR_NOT_SUPPORTED;
        out[0] = g.powerMilliwatts;
        return NVML_SUCCESS;
      }),
    deviceGetPowerManagementLimit: (h, out) =>
      on('deviceGetPowerManagementLimit', h, (g) => {
        if (g.limitMilliwatts === undefined) return NVML_ERROR_NOT_SUPPORTED;
        out[0] = g.limitMilliwatts;
        return NVML_SUCCESS;
      }),
    deviceGetTotalEnergyConsumption: (h, out) =>
      on('deviceGetTotalEnergyConsumption', h, (g) => {
        if (g.energyMillijoules === undefined) return NVML_ERROR_NOT_SUPPORTED;
        out[0] = g.energyMillijoules;
        return NVML_SUCCESS;
      }),
  };
  return { api, state };
}

/** An H200-like GPU for the double. */
export function h200(i: number, over: Partial<DoubleGpu> = {}): DoubleGpu {
  return {
    name: 'NVIDIA H200',
    uuid: `GPU-0000000${i}-aaaa-bbbb-cccc-dddddddddddd`,
    memory: { total: 150_754_820_096n, free: 150_000_000_000n, used: 754_820_096n },
    utilization: { gpu: 37, memory: 12 },
    powerMilliwatts: 123_456,
    limitMilliwatts: 700_000,
    energyMillijoules: 5_000_000n,
    ...over,
  };
}

/**
 * Builds the C test double of libnvidia-ml.so.1 (test/fixtures/gpu/nvml-double.c) into `dir` with the system C
 * compiler and returns its path, or undefined where no compiler is installed (the FFI tests then skip).
 */
export function buildNvmlLibraryDouble(dir: string): string | undefined {
  const source = fileURLToPath(new URL('../fixtures/gpu/nvml-double.c', import.meta.url));
  const out = join(dir, 'libnvidia-ml.so.1');
  const cc = spawnSync('cc', ['-shared', '-fPIC', '-O1', '-o', out, source], { encoding: 'utf8' });
  if (cc.error || cc.status !== 0) return undefined;
  return out;
}
