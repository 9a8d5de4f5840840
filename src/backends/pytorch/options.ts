import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError } from '../../core/errors.js';
import type { BackendConfig } from '../contract.js';

/**
 * The pytorch backend's settings, resolved once per load and frozen:
 * - `--backend-config=pytorch,<key>=<value>`: Nereid's own `python-executable` (the interpreter with torch),
 *   `start-timeout-seconds`, `shm-default-byte-size`, `shm-growth-byte-size` (the engine runs in a Python process).
 * - the model parameters Triton's pytorch backend reads: `DISABLE_OPTIMIZED_EXECUTION`, `INFERENCE_MODE`,
 *   `ENABLE_CACHE_CLEANING`, `ENABLE_WEIGHT_SHARING`, `ENABLE_JIT_EXECUTOR`, `ENABLE_JIT_PROFILING`,
 *   `ENABLE_TENSOR_FUSER`, `ENABLE_NVFUSER` (booleans) and `INTRA_OP_THREAD_COUNT`, `INTER_OP_THREAD_COUNT`
 *   (integers; 0 or unset = torch's default). A bad value is a load error naming it; other parameters are the
 *   model's own business and ignored, as in Triton.
 */

export interface PyTorchBackendOptions {
  pythonExecutable: string | undefined;
  startTimeoutMs: number;
  shmDefaultByteSize: number;
  shmGrowthByteSize: number;
}

/** What the engine process applies (python/nereid_python/engines/pytorch); undefined = torch's default. */
export interface PyTorchModelOptions {
  disable_optimized_execution: boolean;
  inference_mode: boolean;
  cache_cleaning: boolean;
  weight_sharing: boolean;
  jit_executor: boolean | undefined;
  jit_profiling: boolean | undefined;
  tensor_fuser: boolean | undefined;
  nvfuser: boolean | undefined;
  intra_op_threads: number;
  inter_op_threads: number;
}

export const BACKEND_DEFAULTS = Object.freeze({
  // Importing torch takes seconds (more on a first CUDA context).
  startTimeoutMs: 120_000,
  shmDefaultByteSize: 16 << 20,
  shmGrowthByteSize: 16 << 20,
});

/** The `--backend-config=pytorch,...` keys backendOptions reads. */
export const PYTORCH_SETTING_KEYS: readonly string[] = Object.freeze([
  'python-executable',
  'start-timeout-seconds',
  'shm-default-byte-size',
  'shm-growth-byte-size',
]);

/** The model parameters modelOptions reads (Triton's pytorch backend's names). */
export const PYTORCH_PARAMETERS: readonly string[] = Object.freeze([
  'DISABLE_OPTIMIZED_EXECUTION',
  'INFERENCE_MODE',
  'ENABLE_CACHE_CLEANING',
  'ENABLE_WEIGHT_SHARING',
  'ENABLE_JIT_EXECUTOR',
  'ENABLE_JIT_PROFILING',
  'ENABLE_TENSOR_FUSER',
  'ENABLE_NVFUSER',
  'INTRA_OP_THREAD_COUNT',
  'INTER_OP_THREAD_COUNT',
]);

/** Keys Triton hands every backend (global settings) that this one does not use. */
const IGNORED = new Set(['default-max-batch-size', 'auto-complete-config', 'backend-directory']);

function positiveInt(what: string, raw: string, min: number): number {
  const n = Number(raw);
  if (raw.trim() === '' || !Number.isSafeInteger(n) || n < min) {
    throw new InvalidArgError(`${what}=${raw}: expected an integer >= ${min}`);
  }
  return n;
}

export function backendOptions(cfg: BackendConfig): PyTorchBackendOptions {
  const o: PyTorchBackendOptions = { ...BACKEND_DEFAULTS, pythonExecutable: undefined };
  for (const [key, raw] of Object.entries(cfg)) {
    const what = `--backend-config=pytorch,${key}`;
    switch (key) {
      case 'python-executable':
        o.pythonExecutable = raw;
        break;
      case 'start-timeout-seconds':
        o.startTimeoutMs = positiveInt(what, raw, 1) * 1000;
        break;
      case 'shm-default-byte-size':
        o.shmDefaultByteSize = positiveInt(what, raw, 4096);
        break;
      case 'shm-growth-byte-size':
        o.shmGrowthByteSize = positiveInt(what, raw, 4096);
        break;
      default:
        if (!IGNORED.has(key)) {
          throw new InvalidArgError(
            `${what}: unknown key; the pytorch backend knows python-executable, start-timeout-seconds, shm-default-byte-size, shm-growth-byte-size`,
          );
        }
    }
  }
  return Object.freeze(o);
}

const TRUE = new Set(['true', '1', 'yes', 'on']);
const FALSE = new Set(['false', '0', 'no', 'off']);

export function modelOptions(config: ModelConfig): PyTorchModelOptions {
  const name = config.name ?? '';
  const get = (key: string): string | undefined => config.parameters?.[key]?.string_value;
  const bool = (key: string): boolean | undefined => {
    const raw = get(key);
    if (raw === undefined) return undefined;
    const v = raw.trim().toLowerCase();
    if (TRUE.has(v)) return true;
    if (FALSE.has(v)) return false;
    throw new InvalidArgError(`model '${name}': parameter ${key} is "${raw}"; expected "true" or "false"`);
  };
  const count = (key: string): number => {
    const raw = get(key);
    return raw === undefined ? 0 : positiveInt(`model '${name}': parameter ${key}`, raw, 0);
  };
  return Object.freeze({
    disable_optimized_execution: bool('DISABLE_OPTIMIZED_EXECUTION') ?? false,
    inference_mode: bool('INFERENCE_MODE') ?? false,
    cache_cleaning: bool('ENABLE_CACHE_CLEANING') ?? false,
    weight_sharing: bool('ENABLE_WEIGHT_SHARING') ?? false,
    jit_executor: bool('ENABLE_JIT_EXECUTOR'),
    jit_profiling: bool('ENABLE_JIT_PROFILING'),
    tensor_fuser: bool('ENABLE_TENSOR_FUSER'),
    nvfuser: bool('ENABLE_NVFUSER'),
    intra_op_threads: count('INTRA_OP_THREAD_COUNT'),
    inter_op_threads: count('INTER_OP_THREAD_COUNT'),
  });
}
