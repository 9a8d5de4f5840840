import { InvalidArgError } from '../../core/errors.js';
import type { BackendConfig } from '../contract.js';
import type { ModelConfig } from '../../config/model-config.js';

/**
 * `--backend-config=python,<key>=<value>` and the model parameters the python backend reads, resolved once per
 * load. Triton's keys where Triton has one (`shm-default-byte-size`, `shm-growth-byte-size`,
 * `stub-timeout-seconds`, `shm-region-prefix-name`); Nereid's own for what Triton lacks (`python-executable`,
 * `execute-timeout-seconds`, `finalize-timeout-seconds`, `stub-spin-microseconds`). An unknown key is a load error,
 * not silently ignored.
 */
export interface PythonOptions {
  shmDefaultByteSize: number;
  shmGrowthByteSize: number;
  /** Start-up limit of a stub process (until it says `ready`). */
  stubTimeoutMs: number;
  /** Prefix of the /dev/shm files (another server on the same /dev/shm needs another prefix). */
  shmPrefix: string;
  /** Interpreter from backend config, when given. */
  pythonExecutable: string | undefined;
  /** `execute` that does not return within this is killed (0 = never). Model parameter EXECUTE_TIMEOUT_SECONDS wins. */
  executeTimeoutMs: number;
  /** How long finalize may take at unload before the process is killed. */
  finalizeTimeoutMs: number;
  /** How long an idle stub polls its channel before blocking (0 = block at once); see channel.py. */
  stubSpinUs: number;
}

export const DEFAULTS = Object.freeze({
  shmDefaultByteSize: 1 << 20,
  shmGrowthByteSize: 1 << 20,
  stubTimeoutMs: 30_000,
  shmPrefix: 'nereid_python_',
  executeTimeoutMs: 600_000,
  finalizeTimeoutMs: 30_000,
  stubSpinUs: 50,
});

/** The `--backend-config=python,...` keys pythonOptions reads. */
export const PYTHON_SETTING_KEYS: readonly string[] = Object.freeze([
  'shm-default-byte-size',
  'shm-growth-byte-size',
  'stub-timeout-seconds',
  'shm-region-prefix-name',
  'python-executable',
  'execute-timeout-seconds',
  'finalize-timeout-seconds',
  'stub-spin-microseconds',
]);

/** Backend-config keys every backend may receive (Triton passes global ones to all) that the python backend ignores. */
const IGNORED = new Set(['default-max-batch-size', 'auto-complete-config', 'backend-directory']);

function positiveInt(key: string, raw: string, min: number): number {
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < min) {
    throw new InvalidArgError(`--backend-config=python,${key}=${raw}: expected an integer >= ${min}`);
  }
  return n;
}

function seconds(key: string, raw: string): number {
  const n = Number(raw);
  if (!Number.isFinite(n) || n < 0) throw new InvalidArgError(`${key}=${raw}: expected seconds >= 0`);
  return Math.round(n * 1000);
}

export function pythonOptions(cfg: BackendConfig): PythonOptions {
  const o: PythonOptions = { ...DEFAULTS, pythonExecutable: undefined };
  for (const [key, raw] of Object.entries(cfg)) {
    switch (key) {
      case 'shm-default-byte-size':
        o.shmDefaultByteSize = positiveInt(key, raw, 4096);
        break;
      case 'shm-growth-byte-size':
        o.shmGrowthByteSize = positiveInt(key, raw, 4096);
        break;
      case 'stub-timeout-seconds':
        o.stubTimeoutMs = Math.max(1, seconds(key, raw));
        break;
      case 'shm-region-prefix-name':
        if (!/^[A-Za-z0-9_.-]{1,64}$/.test(raw)) {
          throw new InvalidArgError(
            `--backend-config=python,${key}=${raw}: use letters, digits, '_', '-' or '.' (at most 64)`,
          );
        }
        o.shmPrefix = raw.endsWith('_') ? raw : `${raw}_`;
        break;
      case 'python-executable':
        o.pythonExecutable = raw;
        break;
      case 'execute-timeout-seconds':
        o.executeTimeoutMs = seconds(key, raw);
        break;
      case 'finalize-timeout-seconds':
        o.finalizeTimeoutMs = seconds(key, raw);
        break;
      case 'stub-spin-microseconds':
        o.stubSpinUs = Math.min(10_000, positiveInt(key, raw, 0));
        break;
      default:
        if (!IGNORED.has(key)) {
          throw new InvalidArgError(
            `--backend-config=python,${key}: unknown key; the python backend knows ${PYTHON_SETTING_KEYS.join(', ')}`,
          );
        }
    }
  }
  return Object.freeze(o);
}

/** A model parameter's string value, if set. */
export function modelParameter(config: ModelConfig, key: string): string | undefined {
  return config.parameters?.[key]?.string_value;
}

/** The execute deadline of one model: its EXECUTE_TIMEOUT_SECONDS parameter, else the backend's. */
export function executeTimeoutMs(config: ModelConfig, opts: PythonOptions): number {
  const p = modelParameter(config, 'EXECUTE_TIMEOUT_SECONDS');
  return p === undefined
    ? opts.executeTimeoutMs
    : seconds(`parameter EXECUTE_TIMEOUT_SECONDS of model '${config.name}'`, p);
}

/**
 * Triton's FORCE_CPU_ONLY_INPUT_TENSORS model parameter: "yes" (the default) hands the model every input in CPU
 * memory, so `as_numpy()` always works; "no" lets a KIND_GPU instance receive inputs in client CUDA shared memory
 * as GPU tensors (`to_dlpack()`; `as_numpy()` raises, as in Triton). Any other value fails the load.
 */
export function forceCpuOnlyInputs(config: ModelConfig): boolean {
  const p = modelParameter(config, 'FORCE_CPU_ONLY_INPUT_TENSORS');
  if (p === undefined || p.toLowerCase() === 'yes') return true;
  if (p.toLowerCase() === 'no') return false;
  throw new InvalidArgError(
    `model '${config.name}': parameter FORCE_CPU_ONLY_INPUT_TENSORS is '${p}'; expected 'yes' or 'no'`,
  );
}
