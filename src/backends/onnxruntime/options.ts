import { availableParallelism } from 'node:os';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError, UnsupportedError } from '../../core/errors.js';
import type { BackendConfig } from '../contract.js';

/**
 * Triton's onnxruntime-backend options mapped onto onnxruntime-node's session and run options.
 * Pure: no I/O, no logging. The caller logs `warnings` and hands `session`/`run` to the worker threads
 * (plain JSON, so they cross by structured clone).
 */

/** The subset of onnxruntime-node's `InferenceSession.SessionOptions` that we set (plain data). */
export interface OrtSessionOptions {
  intraOpNumThreads?: number;
  interOpNumThreads?: number;
  executionMode?: 'sequential' | 'parallel';
  graphOptimizationLevel: 'disabled' | 'basic' | 'extended' | 'all';
  enableCpuMemArena?: boolean;
  enableMemPattern?: boolean;
  /** Session config entries (`AddSessionConfigEntry`), nested by dotted key as onnxruntime-node expects. */
  extra?: { session?: Record<string, string> };
  executionProviders: ['cpu'];
  /** Test hook: ORT writes the optimized graph here (used to observe the graph level). */
  optimizedModelFilePath?: string;
}

/** The subset of onnxruntime-node's `InferenceSession.RunOptions` that we set. */
export interface OrtRunOptions {
  /**
   * Run config entries. NOTE: onnxruntime-node 1.30's native binding reads only `logSeverityLevel` and `tag`
   * from RunOptions (its run_options_helper.cc; onnxruntime-common documents `extra` as WebAssembly-only), so
   * `memory.enable_memory_arena_shrinkage` is passed the way ORT defines it but has no effect in this build.
   * The worker logs that once per instance.
   */
  extra?: { memory?: Record<string, string> };
}

export interface MappedOptions {
  session: OrtSessionOptions;
  run: OrtRunOptions;
  /** Options accepted but not applied (deprecated GPU parameters on CPU, ...), one sentence each. */
  warnings: string[];
}

/** Deprecated model parameters that configure the CUDA EP only (Triton feeds them to its CUDA options map). */
const DEPRECATED_GPU_PARAMS = [
  'cudnn_conv_algo_search',
  'gpu_mem_limit',
  'arena_extend_strategy',
  'do_copy_in_default_stream',
];

/** Triton's ParseBoolValue spellings. */
function parseBool(key: string, value: string): boolean {
  const v = value.trim().toLowerCase();
  if (v === 'true' || v === '1' || v === 'on' || v === 'yes') return true;
  if (v === 'false' || v === '0' || v === 'off' || v === 'no') return false;
  throw new InvalidArgError(`parameter '${key}': expected a boolean (true/false, 1/0, on/off, yes/no), got '${value}'`);
}

function parseCount(where: string, value: string): number {
  const v = value.trim();
  const n = Number(v);
  if (v === '' || !Number.isSafeInteger(n) || n < 0 || n > 0x7fffffff) {
    throw new InvalidArgError(`${where}: expected a non-negative integer thread count, got '${value}'`);
  }
  return n;
}

function graphLevel(level: unknown): OrtSessionOptions['graphOptimizationLevel'] {
  if (level === undefined || level === 0) return 'all';
  switch (level) {
    case -1:
      return 'basic';
    case 1:
      return 'extended';
    case 2:
      return 'disabled';
  }
  throw new InvalidArgError(
    `optimization.graph.level: expected -1 (basic), 1 (extended) or 2 (disabled), got ${String(level)}`,
  );
}

/**
 * Rejects every execution accelerator: this build of onnxruntime-node ships the CPU EP only (its GPU
 * libraries are skipped at install, and it has no OpenVINO EP), and Triton's contract is that an accelerator
 * it cannot honour fails the load instead of silently running on CPU.
 */
export function checkAccelerators(config: ModelConfig): void {
  const eas = config.optimization?.execution_accelerators;
  for (const [field, list] of [
    ['gpu_execution_accelerator', eas?.gpu_execution_accelerator],
    ['cpu_execution_accelerator', eas?.cpu_execution_accelerator],
  ] as const) {
    for (const ea of list ?? []) {
      const name = ea.name ?? '';
      const known = field === 'gpu_execution_accelerator' ? ['tensorrt', 'cuda'] : ['openvino'];
      if (!known.includes(name)) {
        throw new InvalidArgError(
          `unknown execution accelerator '${name}' in optimization.execution_accelerators.${field} ` +
            `(Triton's onnxruntime backend knows ${known.map((k) => `'${k}'`).join(', ')})`,
        );
      }
      throw new UnsupportedError(
        `execution accelerator '${name}' is not available in this build (onnxruntime-node with the CPU ` +
          `execution provider only); remove it from optimization.execution_accelerators.${field} to run on ` +
          `CPU, or serve this model with Triton's onnxruntime backend built with ${name === 'openvino' ? 'OpenVINO' : 'GPU'} support`,
      );
    }
  }
}

/**
 * Intra-op threads when neither the model nor the backend config says: the machine's cores shared between the
 * model's instances (at least 1). Nereid's own default, not ORT's (one pool of every core per session): instances
 * run at the same time in their own threads, and N pools of every core oversubscribe the CPU that the main thread
 * (HTTP, batching) needs too. Measured on 2 cores, text_encoder, 2 instances, batching, concurrency 64: 1,165 req/s
 * with ORT's default, 1,845 with 1 thread each. `intra_op_thread_count: "0"` still asks for ORT's default.
 */
function defaultIntraOpThreads(config: ModelConfig): number {
  let instances = 1;
  try {
    instances = instanceCount(config);
  } catch {
    // An unsupported kind fails the load elsewhere, with its own message.
  }
  return Math.max(1, Math.floor(availableParallelism() / instances));
}

/**
 * Maps a model config and `--backend-config=onnxruntime,...` to onnxruntime-node options, Triton's way.
 * Throws InvalidArgError naming the parameter for a bad value and UnsupportedError for an accelerator this
 * build cannot honour.
 *
 * Global thread pool: onnxruntime-node has no API for ORT's global thread pool (CreateEnvWithGlobalThreadPools
 * / DisablePerSessionThreads are not bound). We keep its observable contract instead: with
 * `enable-global-threadpool=1` the model's own thread counts are ignored and the backend-config counts apply,
 * but each session still owns its pool of that size (threads are not shared between instances).
 */
export function sessionOptionsFor(config: ModelConfig, backendConfig: BackendConfig = {}): MappedOptions {
  checkAccelerators(config);
  const params: Record<string, string> = {};
  for (const [k, v] of Object.entries(config.parameters ?? {})) params[k] = v.string_value ?? '';
  const warnings: string[] = [];
  const session: OrtSessionOptions = {
    graphOptimizationLevel: graphLevel(config.optimization?.graph?.level),
    executionProviders: ['cpu'],
  };
  const run: OrtRunOptions = {};

  const mode = params.execution_mode;
  if (mode !== undefined) {
    const m = mode.trim();
    if (m !== '0' && m !== '1') {
      throw new InvalidArgError(`parameter 'execution_mode': expected 0 (sequential) or 1 (parallel), got '${mode}'`);
    }
    session.executionMode = m === '0' ? 'sequential' : 'parallel';
  }

  const globalPool = backendConfig['enable-global-threadpool'];
  const useGlobal = globalPool !== undefined && parseBool('enable-global-threadpool', globalPool);
  for (const [key, opt] of [
    ['intra_op_thread_count', 'intraOpNumThreads'],
    ['inter_op_thread_count', 'interOpNumThreads'],
  ] as const) {
    // Validate the backend-config value even when unused, so a typo fails at load rather than later.
    const fromBackend = backendConfig[key];
    const backendCount =
      fromBackend === undefined ? undefined : parseCount(`backend-config 'onnxruntime,${key}'`, fromBackend);
    const fromModel = params[key];
    const modelCount = fromModel === undefined ? undefined : parseCount(`parameter '${key}'`, fromModel);
    if (useGlobal && modelCount !== undefined) {
      warnings.push(`parameter '${key}' is ignored: the global thread pool is enabled (backend-config applies)`);
    }
    const n = useGlobal ? backendCount : modelCount;
    // 0 means "let ORT pick" in Triton, which it expresses by not calling SetIntra/InterOpNumThreads.
    if (n !== undefined && n > 0) session[opt] = n;
    else if (n === undefined && opt === 'intraOpNumThreads') session[opt] = defaultIntraOpThreads(config);
  }

  if (params.enable_mem_arena !== undefined) {
    session.enableCpuMemArena = parseBool('enable_mem_arena', params.enable_mem_arena);
  }
  if (params.enable_mem_pattern !== undefined) {
    session.enableMemPattern = parseBool('enable_mem_pattern', params.enable_mem_pattern);
  }
  const devAlloc = params['session.use_device_allocator_for_initializers'];
  if (devAlloc !== undefined) {
    // Triton passes the string through verbatim; ORT accepts "0"/"1" and fails session creation otherwise.
    session.extra = { session: { use_device_allocator_for_initializers: devAlloc } };
  }
  const shrink = params['memory.enable_memory_arena_shrinkage'];
  if (shrink !== undefined) {
    // Triton: AddRunConfigEntry(run_options, key, value) with the value verbatim ("cpu:0", "cpu:0;gpu:0").
    if (shrink !== '' && !/^(cpu|gpu):\d+(;(cpu|gpu):\d+)*$/.test(shrink)) {
      throw new InvalidArgError(
        `parameter 'memory.enable_memory_arena_shrinkage': expected a device list like 'cpu:0' or 'cpu:0;gpu:0', got '${shrink}'`,
      );
    }
    if (/gpu:/.test(shrink)) {
      throw new UnsupportedError(
        `parameter 'memory.enable_memory_arena_shrinkage': '${shrink}' names a GPU arena, but this build runs on CPU only; use 'cpu:0'`,
      );
    }
    run.extra = { memory: { enable_memory_arena_shrinkage: shrink } };
    warnings.push(
      "parameter 'memory.enable_memory_arena_shrinkage' is passed as a run config entry, but onnxruntime-node 1.30 " +
        'does not apply run config entries (only logSeverityLevel and tag); the CPU arena is not shrunk',
    );
  }
  for (const key of DEPRECATED_GPU_PARAMS) {
    if (params[key] === undefined) continue;
    if (key === 'arena_extend_strategy' && !['0', '1'].includes(params[key].trim())) {
      throw new InvalidArgError(
        `parameter 'arena_extend_strategy': expected 0 (kNextPowerOfTwo) or 1 (kSameAsRequested), got '${params[key]}'`,
      );
    }
    warnings.push(
      key === 'arena_extend_strategy'
        ? "deprecated parameter 'arena_extend_strategy' is ignored: Triton applies it to the CUDA arena only, and " +
            'onnxruntime-node cannot configure the CPU arena (no OrtArenaCfg / CreateAndRegisterAllocator binding)'
        : `deprecated parameter '${key}' configures the CUDA execution provider and is ignored on CPU`,
    );
  }
  return { session, run, warnings };
}

/** Instances to start: the sum of `instance_group` counts (count defaults to 1); KIND_GPU is refused. */
export function instanceCount(config: ModelConfig): number {
  const groups = config.instance_group ?? [];
  if (groups.length === 0) return 1;
  let n = 0;
  for (const [i, g] of groups.entries()) {
    const kind = g.kind ?? 'KIND_AUTO';
    if (kind === 'KIND_GPU') {
      throw new UnsupportedError(
        `instance_group[${i}] kind KIND_GPU is not supported by this build (no GPU execution provider); use KIND_CPU`,
      );
    }
    if (kind === 'KIND_MODEL') {
      throw new UnsupportedError(`instance_group[${i}] kind KIND_MODEL is not supported by the onnxruntime backend`);
    }
    const count = g.count ?? 1;
    if (!Number.isSafeInteger(count) || count < 0) {
      throw new InvalidArgError(`instance_group[${i}].count: expected a non-negative integer, got ${String(count)}`);
    }
    n += count;
  }
  if (n === 0) throw new InvalidArgError('instance_group: the counts add up to 0 instances; set count >= 1');
  return n;
}
