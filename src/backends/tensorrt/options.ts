import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError, UnsupportedError } from '../../core/errors.js';
import { resolve } from 'node:path';
import type { BackendConfig } from '../contract.js';
import { parseGraphSpecs, type GraphSpec } from '../../config/graph-spec.js';
import { refuseCachePaths } from './cache-params.js';

/**
 * The TensorRT backend's settings, resolved once per load and frozen:
 * - `--backend-config=tensorrt,<key>=<value>`: Triton's `coalesce-request-input`, `plugins` (`;`-separated
 *   libraries loaded before any engine), `version-compatible`, `execution-policy` (DEVICE_BLOCKING, Triton's
 *   default, or BLOCKING); Nereid's own `python-executable`, `start-timeout-seconds`, `shm-default-byte-size`,
 *   `shm-growth-byte-size` (the engine runs in a Python process), `plan-cache-directory` (plans built from ONNX).
 * - the model config knobs Triton's tensorrt backend reads: parameter `execution_context_allocation_strategy`
 *   (STATIC, ON_PROFILE_CHANGE), `optimization { cuda { graphs, graph_spec, busy_wait_events, output_copy_stream } }`,
 *   `optimization.gather_kernel_buffer_threshold`, `optimization.eager_batching`.
 * An unknown key or a bad value is a load error naming it (Triton ignores some silently; Nereid does not).
 */

export type ExecutionPolicy = 'DEVICE_BLOCKING' | 'BLOCKING';
export type AllocationStrategy = 'STATIC' | 'ON_PROFILE_CHANGE';

export interface TensorRTBackendOptions {
  coalesceRequestInput: boolean;
  plugins: readonly string[];
  versionCompatible: boolean;
  executionPolicy: ExecutionPolicy;
  pythonExecutable: string | undefined;
  startTimeoutMs: number;
  shmDefaultByteSize: number;
  shmGrowthByteSize: number;
  /** Where plans built from ONNX models are kept (undefined: the default, `<NEREID_TENSORRT_HOME>/plans`). */
  planCacheDirectory: string | undefined;
}

export interface TensorRTModelOptions {
  allocation: AllocationStrategy;
  graphs: boolean;
  graphSpecs: readonly GraphSpec[];
  busyWaitEvents: boolean;
  outputCopyStream: boolean;
  gatherKernelBufferThreshold: number;
  eagerBatching: boolean;
  /** What the operator should know: knobs accepted with no effect in Nereid's execution model. */
  notes: readonly string[];
}

export const BACKEND_DEFAULTS = Object.freeze({
  coalesceRequestInput: false,
  versionCompatible: false,
  executionPolicy: 'DEVICE_BLOCKING' as ExecutionPolicy,
  // Importing TensorRT and deserializing a large plan take seconds; a first CUDA context takes more.
  startTimeoutMs: 300_000,
  shmDefaultByteSize: 16 << 20,
  shmGrowthByteSize: 16 << 20,
});

/** Keys Triton hands every backend (global settings) that this one does not use. */
const IGNORED = new Set(['default-max-batch-size', 'auto-complete-config', 'backend-directory']);

export const KNOWN = [
  'coalesce-request-input',
  'plugins',
  'version-compatible',
  'execution-policy',
  'python-executable',
  'start-timeout-seconds',
  'shm-default-byte-size',
  'shm-growth-byte-size',
  'plan-cache-directory',
];

/** Triton's ParseBoolValue: true/on/1 and false/off/0, any case. */
export function parseBool(key: string, raw: string): boolean {
  const v = raw.trim().toLowerCase();
  if (v === 'true' || v === 'on' || v === '1') return true;
  if (v === 'false' || v === 'off' || v === '0') return false;
  throw new InvalidArgError(`--backend-config=tensorrt,${key}=${raw}: expected true or false`);
}

function intAtLeast(key: string, raw: string, min: number): number {
  const n = Number(raw);
  if (!Number.isSafeInteger(n) || n < min) {
    throw new InvalidArgError(`--backend-config=tensorrt,${key}=${raw}: expected an integer >= ${min}`);
  }
  return n;
}

export function backendOptions(cfg: BackendConfig): TensorRTBackendOptions {
  const o: TensorRTBackendOptions = {
    ...BACKEND_DEFAULTS,
    plugins: [],
    pythonExecutable: undefined,
    planCacheDirectory: undefined,
  };
  for (const [key, raw] of Object.entries(cfg)) {
    switch (key) {
      case 'coalesce-request-input':
        o.coalesceRequestInput = parseBool(key, raw);
        break;
      case 'version-compatible':
        o.versionCompatible = parseBool(key, raw);
        break;
      case 'plugins': {
        const libs = raw
          .split(';')
          .map((s) => s.trim())
          .filter((s) => s !== '');
        if (libs.length === 0) throw new InvalidArgError(`--backend-config=tensorrt,plugins: names no library`);
        const relative = libs.filter((l) => !l.startsWith('/'));
        if (relative.length > 0) {
          throw new InvalidArgError(
            `--backend-config=tensorrt,plugins: '${relative[0]}' is not an absolute path; give each plugin library as /path/lib.so (';' between them)`,
          );
        }
        o.plugins = Object.freeze(libs);
        break;
      }
      case 'execution-policy':
        if (raw !== 'DEVICE_BLOCKING' && raw !== 'BLOCKING') {
          throw new InvalidArgError(
            `--backend-config=tensorrt,execution-policy=${raw}: expected DEVICE_BLOCKING (the default: one batch at a time per GPU) or BLOCKING (instances of a GPU run side by side)`,
          );
        }
        o.executionPolicy = raw;
        break;
      case 'python-executable':
        o.pythonExecutable = raw;
        break;
      case 'start-timeout-seconds': {
        const s = Number(raw);
        if (!Number.isFinite(s) || s <= 0) {
          throw new InvalidArgError(`--backend-config=tensorrt,${key}=${raw}: expected seconds > 0`);
        }
        o.startTimeoutMs = Math.round(s * 1000);
        break;
      }
      case 'shm-default-byte-size':
        o.shmDefaultByteSize = intAtLeast(key, raw, 4096);
        break;
      case 'shm-growth-byte-size':
        o.shmGrowthByteSize = intAtLeast(key, raw, 4096);
        break;
      case 'plan-cache-directory':
        if (raw.trim() === '') throw new InvalidArgError(`--backend-config=tensorrt,${key}: names no folder`);
        o.planCacheDirectory = resolve(raw);
        break;
      default:
        if (!IGNORED.has(key)) {
          throw new InvalidArgError(
            `--backend-config=tensorrt,${key}: unknown key; the tensorrt backend knows ${KNOWN.join(', ')}`,
          );
        }
    }
  }
  return Object.freeze(o);
}

const ALLOCATION: readonly string[] = ['STATIC', 'ON_PROFILE_CHANGE'];

export function modelOptions(config: ModelConfig): TensorRTModelOptions {
  const name = config.name ?? '';
  const where = `model '${name}'`;
  const notes: string[] = [];
  refuseCachePaths(config, where);
  const rawStrategy = config.parameters?.execution_context_allocation_strategy?.string_value;
  let allocation: AllocationStrategy = 'STATIC';
  if (rawStrategy !== undefined) {
    if (!ALLOCATION.includes(rawStrategy)) {
      throw new InvalidArgError(
        `${where}: parameter execution_context_allocation_strategy is '${rawStrategy}'; expected STATIC (one allocation, the largest over all profiles) or ON_PROFILE_CHANGE (re-allocated for the profile in use)`,
      );
    }
    allocation = rawStrategy as AllocationStrategy;
  }
  const opt = config.optimization ?? {};
  const cuda = (opt.cuda ?? {}) as { graphs?: boolean; busy_wait_events?: boolean; output_copy_stream?: boolean };
  const graphSpecs = parseGraphSpecs(config, where);
  graphSpecs.forEach((s, i) => {
    if (s.lowerBound !== undefined) {
      throw new UnsupportedError(
        `${where}: optimization.cuda.graph_spec[${i}]: graph_lower_bound is not supported by Nereid's TensorRT backend yet (a graph is replayed for its exact shapes only); remove it`,
      );
    }
  });
  if (graphSpecs.length > 0 && cuda.graphs !== true) {
    notes.push('optimization.cuda.graph_spec is set but graphs is false: no CUDA graph is captured');
  }
  const threshold = (opt.gather_kernel_buffer_threshold as number | undefined) ?? 0;
  if (!Number.isSafeInteger(threshold) || threshold < 0) {
    throw new InvalidArgError(`${where}: optimization.gather_kernel_buffer_threshold must be an integer >= 0`);
  }
  const eager = (opt.eager_batching as boolean | undefined) === true;
  if (eager) {
    notes.push(
      'optimization.eager_batching has no effect: a Nereid instance takes its next batch once the current one has answered',
    );
  }
  const accel = opt.execution_accelerators;
  if ((accel?.gpu_execution_accelerator?.length ?? 0) > 0 || (accel?.cpu_execution_accelerator?.length ?? 0) > 0) {
    throw new InvalidArgError(
      `${where}: optimization.execution_accelerators do not apply to a TensorRT plan (it is already a TensorRT engine); remove them`,
    );
  }
  if (opt.priority !== undefined && opt.priority !== 'PRIORITY_DEFAULT') {
    notes.push(
      `optimization.priority ${String(opt.priority)} has no effect: CUDA streams are created with the default priority`,
    );
  }
  return Object.freeze({
    allocation,
    graphs: cuda.graphs === true,
    graphSpecs: Object.freeze(graphSpecs),
    busyWaitEvents: cuda.busy_wait_events === true,
    outputCopyStream: cuda.output_copy_stream === true,
    gatherKernelBufferThreshold: threshold,
    eagerBatching: eager,
    notes: Object.freeze(notes),
  });
}
