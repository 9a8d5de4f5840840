import { availableParallelism } from 'node:os';
import type { ModelConfig } from '../../config/model-config.js';
import { InvalidArgError, UnavailableError } from '../../core/errors.js';
import type { BackendConfig, InstanceSpec } from '../contract.js';
import type { GlobalThreadPool } from './capi/env.js';

/**
 * Triton's onnxruntime-backend options (SPEC §4, seed 003) mapped onto onnxruntime C API calls, Triton's way
 * (its onnxruntime.cc is the reference for names, defaults and errors). Pure: no I/O, no native calls. The
 * engine resolves a SessionPlan once per model and turns it into OrtSessionOptions per instance
 * (capi/session-options.ts), adding the instance's device.
 */

/** GraphOptimizationLevel values of the C API. */
export const GRAPH_LEVEL = { disabled: 0, basic: 1, extended: 2, all: 99 } as const;

export type ProviderName = 'tensorrt' | 'cuda' | 'openvino';

/** One execution provider to append, with its V2 provider options (key/value strings, as the C API takes). */
export interface ProviderPlan {
  readonly name: ProviderName;
  readonly options: ReadonlyArray<readonly [string, string]>;
}

/** Everything a model's sessions are created with. Frozen, plain data. */
export interface SessionPlan {
  /** SetSessionGraphOptimizationLevel. */
  readonly graphLevel: number;
  /** SetSessionExecutionMode: 0 sequential, 1 parallel; undefined leaves onnxruntime's default (sequential). */
  readonly executionMode?: 0 | 1;
  /** SetIntraOpNumThreads / SetInterOpNumThreads; undefined leaves onnxruntime's default (or the global pool). */
  readonly intraOpThreads?: number;
  readonly interOpThreads?: number;
  /** Enable/DisableCpuMemArena, Enable/DisableMemPattern; undefined leaves onnxruntime's default (on). */
  readonly cpuMemArena?: boolean;
  readonly memPattern?: boolean;
  /** AddSessionConfigEntry. */
  readonly sessionConfig: ReadonlyArray<readonly [string, string]>;
  /** AddRunConfigEntry on every run's options (Triton: memory.enable_memory_arena_shrinkage). */
  readonly runConfig: ReadonlyArray<readonly [string, string]>;
  /** Set when the global thread pool is on: the env's pools; sessions call DisablePerSessionThreads. */
  readonly globalThreadPool?: GlobalThreadPool;
  /** Providers of a KIND_GPU instance, in priority order (TensorRT before its CUDA fall-back); device_id added. */
  readonly gpuProviders: readonly ProviderPlan[];
  /** The GPU accelerators the config names (`gpu_execution_accelerator`): only a KIND_GPU instance can honour them. */
  readonly gpuAccelerators: readonly string[];
  /** Providers of every instance (OpenVINO for the CPU). */
  readonly cpuProviders: readonly ProviderPlan[];
  /** GPU arenas named by memory.enable_memory_arena_shrinkage: only KIND_GPU instances may have them. */
  readonly shrinksGpuArena: boolean;
  /** Options accepted but without effect here, one sentence each (the engine logs them). */
  readonly warnings: readonly string[];
}

/** Triton's ParseBoolValue spellings; normalized to "1"/"0" for onnxruntime. */
export function parseBool(where: string, value: string): boolean {
  const v = value.trim().toLowerCase();
  if (v === 'true' || v === '1' || v === 'on' || v === 'yes') return true;
  if (v === 'false' || v === '0' || v === 'off' || v === 'no') return false;
  throw new InvalidArgError(`${where}: expected a boolean (true/false, 1/0, on/off, yes/no), got '${value}'`);
}

function parseInt32(where: string, value: string, min = -0x80000000): number {
  const v = value.trim();
  const n = Number(v);
  if (v === '' || !Number.isSafeInteger(n) || n < min || n > 0x7fffffff) {
    throw new InvalidArgError(`${where}: expected an integer${min === 0 ? ' >= 0' : ''}, got '${value}'`);
  }
  return n;
}

/** A size_t as a decimal string (gpu_mem_limit, max_workspace_size_bytes): kept as text, no float rounding. */
function parseSize(where: string, value: string): string {
  const v = value.trim();
  if (!/^\d+$/.test(v) || BigInt(v) > 0xffffffffffffffffn) {
    throw new InvalidArgError(`${where}: expected a byte count (a non-negative integer), got '${value}'`);
  }
  return BigInt(v).toString();
}

function graphLevel(level: unknown): number {
  if (level === undefined || level === 0) return GRAPH_LEVEL.all;
  if (level === -1) return GRAPH_LEVEL.basic;
  if (level === 1) return GRAPH_LEVEL.extended;
  if (level === 2) return GRAPH_LEVEL.disabled;
  throw new InvalidArgError(
    `optimization.graph.level: expected -1 (basic), 1 (extended) or 2 (disabled), got ${String(level)}`,
  );
}

/** Instances of every group (count defaults to 1), whatever their kind: each one is a session. */
export function totalInstances(config: ModelConfig): number {
  const groups = config.instance_group ?? [];
  if (groups.length === 0) return 1;
  return Math.max(
    1,
    groups.reduce((n, g) => n + (Number.isSafeInteger(g.count) && (g.count ?? 1) >= 0 ? (g.count ?? 1) : 1), 0),
  );
}

/**
 * Intra-op threads when neither the model nor the backend config says: the machine's cores shared between the
 * model's instances (at least 1). Nereid's own default, not onnxruntime's (a pool of every core per session):
 * instances run at the same time, and N pools of every core oversubscribe the CPU the main thread needs too
 * (measured in wave 1: text_encoder, 2 instances, 2 cores: 1,165 req/s with onnxruntime's default, 1,845 with 1
 * thread each). `intra_op_thread_count: "0"` still asks for onnxruntime's default.
 */
function defaultIntraOpThreads(config: ModelConfig): number {
  return Math.max(1, Math.floor(availableParallelism() / totalInstances(config)));
}

/** CUDA provider options of onnxruntime 1.30 that a config may set (values are onnxruntime's strings). */
const CUDA_OPTIONS: Readonly<Record<string, 'bool' | 'int' | 'size' | 'string'>> = {
  device_id: 'int',
  gpu_mem_limit: 'size',
  arena_extend_strategy: 'string',
  cudnn_conv_algo_search: 'string',
  do_copy_in_default_stream: 'bool',
  cudnn_conv_use_max_workspace: 'bool',
  enable_cuda_graph: 'bool',
  cudnn_conv1d_pad_to_nc1d: 'bool',
  tunable_op_enable: 'bool',
  tunable_op_tuning_enable: 'bool',
  tunable_op_max_tuning_duration_ms: 'int',
  enable_skip_layer_norm_strict_mode: 'bool',
  prefer_nhwc: 'bool',
  use_ep_level_unified_stream: 'bool',
  use_tf32: 'bool',
  fuse_conv_bias: 'bool',
  sdpa_kernel: 'int',
};

/** Triton's TensorRT accelerator parameters → onnxruntime TensorRT provider option, with the value's kind. */
const TENSORRT_OPTIONS: Readonly<Record<string, readonly [string, 'bool' | 'int' | 'size' | 'string']>> = {
  max_workspace_size_bytes: ['trt_max_workspace_size', 'size'],
  trt_max_partition_iterations: ['trt_max_partition_iterations', 'int'],
  trt_min_subgraph_size: ['trt_min_subgraph_size', 'int'],
  int8_calibration_table_name: ['trt_int8_calibration_table_name', 'string'],
  int8_use_native_calibration_table: ['trt_int8_use_native_calibration_table', 'bool'],
  trt_dla_enable: ['trt_dla_enable', 'bool'],
  trt_dla_core: ['trt_dla_core', 'int'],
  trt_engine_cache_enable: ['trt_engine_cache_enable', 'bool'],
  trt_engine_cache_path: ['trt_engine_cache_path', 'string'],
  trt_engine_cache_prefix: ['trt_engine_cache_prefix', 'string'],
  trt_dump_subgraphs: ['trt_dump_subgraphs', 'bool'],
  trt_force_sequential_engine_build: ['trt_force_sequential_engine_build', 'bool'],
  trt_context_memory_sharing_enable: ['trt_context_memory_sharing_enable', 'bool'],
  trt_layer_norm_fp32_fallback: ['trt_layer_norm_fp32_fallback', 'bool'],
  trt_timing_cache_enable: ['trt_timing_cache_enable', 'bool'],
  trt_timing_cache_path: ['trt_timing_cache_path', 'string'],
  trt_force_timing_cache: ['trt_force_timing_cache', 'bool'],
  trt_detailed_build_log: ['trt_detailed_build_log', 'bool'],
  trt_build_heuristics_enable: ['trt_build_heuristics_enable', 'bool'],
  trt_sparsity_enable: ['trt_sparsity_enable', 'bool'],
  trt_builder_optimization_level: ['trt_builder_optimization_level', 'int'],
  trt_auxiliary_streams: ['trt_auxiliary_streams', 'int'],
  trt_tactic_sources: ['trt_tactic_sources', 'string'],
  trt_extra_plugin_lib_paths: ['trt_extra_plugin_lib_paths', 'string'],
  trt_profile_min_shapes: ['trt_profile_min_shapes', 'string'],
  trt_profile_max_shapes: ['trt_profile_max_shapes', 'string'],
  trt_profile_opt_shapes: ['trt_profile_opt_shapes', 'string'],
  trt_cuda_graph_enable: ['trt_cuda_graph_enable', 'bool'],
  trt_dump_ep_context_model: ['trt_dump_ep_context_model', 'bool'],
  trt_ep_context_file_path: ['trt_ep_context_file_path', 'string'],
  trt_ep_context_embed_mode: ['trt_ep_context_embed_mode', 'int'],
};

/** OpenVINO provider options (V2 keys) a config may set; Triton itself sets only device_type CPU. */
const OPENVINO_OPTIONS = new Set([
  'device_type',
  'precision',
  'num_of_threads',
  'num_streams',
  'cache_dir',
  'load_config',
  'model_priority',
  'enable_opencl_throttling',
  'enable_qdq_optimizer',
  'disable_dynamic_shapes',
]);

function normalize(where: string, kind: 'bool' | 'int' | 'size' | 'string', value: string): string {
  switch (kind) {
    case 'bool':
      return parseBool(where, value) ? '1' : '0';
    case 'int':
      return String(parseInt32(where, value));
    case 'size':
      return parseSize(where, value);
    case 'string':
      return value;
  }
}

/** Accelerator parameters: `{ key: value }` strings in the JSON form of the config. */
function paramsOf(ea: { parameters?: Record<string, string> }): Array<[string, string]> {
  return Object.entries(ea.parameters ?? {});
}

function tensorrtPlan(field: string, ea: { parameters?: Record<string, string> }): ProviderPlan {
  const options: Array<[string, string]> = [];
  for (const [key, value] of paramsOf(ea)) {
    const where = `${field} 'tensorrt' parameter '${key}'`;
    if (key === 'precision_mode') {
      const mode = value.trim().toUpperCase();
      if (mode === 'FP16') options.push(['trt_fp16_enable', '1']);
      else if (mode === 'BF16') options.push(['trt_bf16_enable', '1']);
      else if (mode === 'INT8') options.push(['trt_int8_enable', '1']);
      else if (mode !== 'FP32') {
        throw new InvalidArgError(`${where}: unsupported precision mode '${value}' (FP32, FP16, BF16 or INT8)`);
      }
      continue;
    }
    const known = TENSORRT_OPTIONS[key];
    if (known === undefined) {
      throw new InvalidArgError(
        `unknown parameter '${key}' is provided for TensorRT Execution Accelerator (${field}); known: precision_mode, ${Object.keys(TENSORRT_OPTIONS).join(', ')}`,
      );
    }
    const v = normalize(where, known[1], value);
    if (v !== '') options.push([known[0], v]);
  }
  return { name: 'tensorrt', options };
}

/** Deprecated model parameters that configure the CUDA provider (Triton still honours them). */
function deprecatedCudaOptions(params: Record<string, string>): Array<[string, string]> {
  const out: Array<[string, string]> = [];
  const algo = params.cudnn_conv_algo_search;
  if (algo !== undefined) {
    const names = ['EXHAUSTIVE', 'HEURISTIC', 'DEFAULT'];
    const n = parseInt32("parameter 'cudnn_conv_algo_search'", algo, 0);
    if (n > 2) {
      throw new InvalidArgError(
        `parameter 'cudnn_conv_algo_search': expected 0 (EXHAUSTIVE), 1 (HEURISTIC) or 2 (DEFAULT), got '${algo}'`,
      );
    }
    out.push(['cudnn_conv_algo_search', names[n]]);
  }
  if (params.gpu_mem_limit !== undefined) {
    out.push(['gpu_mem_limit', parseSize("parameter 'gpu_mem_limit'", params.gpu_mem_limit)]);
  }
  const arena = params.arena_extend_strategy;
  if (arena !== undefined) {
    const v = arena.trim();
    if (v !== '0' && v !== '1') {
      throw new InvalidArgError(
        `parameter 'arena_extend_strategy': expected 0 (kNextPowerOfTwo) or 1 (kSameAsRequested), got '${arena}'`,
      );
    }
    out.push(['arena_extend_strategy', v === '0' ? 'kNextPowerOfTwo' : 'kSameAsRequested']);
  }
  if (params.do_copy_in_default_stream !== undefined) {
    const b = parseBool("parameter 'do_copy_in_default_stream'", params.do_copy_in_default_stream);
    out.push(['do_copy_in_default_stream', b ? '1' : '0']);
  }
  return out;
}

function cudaPlan(
  field: string,
  ea: { parameters?: Record<string, string> } | undefined,
  params: Record<string, string>,
): ProviderPlan {
  // Deprecated parameters first, then the accelerator's own (they win: they are the documented way).
  const options = new Map<string, string>(deprecatedCudaOptions(params));
  for (const [key, value] of ea === undefined ? [] : paramsOf(ea)) {
    const kind = CUDA_OPTIONS[key];
    if (kind === undefined || key === 'device_id') {
      throw new InvalidArgError(
        key === 'device_id'
          ? `${field} 'cuda' parameter 'device_id': the device comes from instance_group's gpus, not from a parameter`
          : `unknown parameter '${key}' is provided for CUDA Execution Accelerator (${field}); onnxruntime 1.30 knows ${Object.keys(CUDA_OPTIONS).join(', ')}`,
      );
    }
    const v = normalize(`${field} 'cuda' parameter '${key}'`, kind, value);
    if (key === 'arena_extend_strategy' && v !== 'kNextPowerOfTwo' && v !== 'kSameAsRequested') {
      throw new InvalidArgError(
        `${field} 'cuda' parameter 'arena_extend_strategy': expected kNextPowerOfTwo or kSameAsRequested, got '${value}'`,
      );
    }
    if (key === 'cudnn_conv_algo_search' && !['EXHAUSTIVE', 'HEURISTIC', 'DEFAULT'].includes(v)) {
      throw new InvalidArgError(
        `${field} 'cuda' parameter 'cudnn_conv_algo_search': expected EXHAUSTIVE, HEURISTIC or DEFAULT, got '${value}'`,
      );
    }
    options.set(key, v);
  }
  return { name: 'cuda', options: [...options] };
}

function openvinoPlan(field: string, ea: { parameters?: Record<string, string> }): ProviderPlan {
  const options = new Map<string, string>([['device_type', 'CPU']]);
  for (const [key, value] of paramsOf(ea)) {
    if (!OPENVINO_OPTIONS.has(key)) {
      throw new InvalidArgError(
        `unknown parameter '${key}' is provided for OpenVINO Execution Accelerator (${field}); known: ${[...OPENVINO_OPTIONS].join(', ')}`,
      );
    }
    options.set(key, value);
  }
  return { name: 'openvino', options: [...options] };
}

/**
 * Maps a model config and `--backend-config=onnxruntime,...` to a SessionPlan. Throws INVALID_ARG naming the
 * option for a bad value or an unknown accelerator or accelerator parameter.
 */
export function planSession(config: ModelConfig, backendConfig: BackendConfig = {}): SessionPlan {
  const params: Record<string, string> = {};
  for (const [k, v] of Object.entries(config.parameters ?? {})) params[k] = v.string_value ?? '';
  const warnings: string[] = [];

  let executionMode: 0 | 1 | undefined;
  if (params.execution_mode !== undefined) {
    const m = params.execution_mode.trim();
    if (m !== '0' && m !== '1') {
      throw new InvalidArgError(
        `parameter 'execution_mode': expected 0 (sequential) or 1 (parallel), got '${params.execution_mode}'`,
      );
    }
    executionMode = m === '0' ? 0 : 1;
  }

  const pool = backendConfig['enable-global-threadpool'];
  const useGlobal = pool !== undefined && parseBool("backend-config 'onnxruntime,enable-global-threadpool'", pool);
  const counts: Record<'intra_op_thread_count' | 'inter_op_thread_count', number | undefined> = {
    intra_op_thread_count: undefined,
    inter_op_thread_count: undefined,
  };
  const backendCounts = { ...counts };
  for (const key of ['intra_op_thread_count', 'inter_op_thread_count'] as const) {
    // Validate the backend-config value even when unused, so a typo fails at load rather than later.
    const b = backendConfig[key];
    if (b !== undefined) backendCounts[key] = parseInt32(`backend-config 'onnxruntime,${key}'`, b, 0);
    const m = params[key];
    if (m !== undefined) counts[key] = parseInt32(`parameter '${key}'`, m, 0);
    if (useGlobal && m !== undefined) {
      warnings.push(`parameter '${key}' is ignored: the global thread pool is enabled (backend-config applies)`);
    }
  }
  let intraOpThreads: number | undefined;
  let interOpThreads: number | undefined;
  let globalThreadPool: GlobalThreadPool | undefined;
  if (useGlobal) {
    globalThreadPool = {
      intraOpThreads: backendCounts.intra_op_thread_count ?? 0,
      interOpThreads: backendCounts.inter_op_thread_count ?? 0,
    };
  } else {
    // 0 means "let onnxruntime pick" in Triton, expressed by not calling SetIntra/InterOpNumThreads.
    const intra = counts.intra_op_thread_count;
    intraOpThreads = intra === undefined ? defaultIntraOpThreads(config) : intra > 0 ? intra : undefined;
    const inter = counts.inter_op_thread_count;
    interOpThreads = inter !== undefined && inter > 0 ? inter : undefined;
  }

  const cpuMemArena =
    params.enable_mem_arena === undefined
      ? undefined
      : parseBool("parameter 'enable_mem_arena'", params.enable_mem_arena);
  const memPattern =
    params.enable_mem_pattern === undefined
      ? undefined
      : parseBool("parameter 'enable_mem_pattern'", params.enable_mem_pattern);

  const sessionConfig: Array<[string, string]> = [];
  const devAlloc = params['session.use_device_allocator_for_initializers'];
  if (devAlloc !== undefined) {
    const on = parseBool("parameter 'session.use_device_allocator_for_initializers'", devAlloc);
    sessionConfig.push(['session.use_device_allocator_for_initializers', on ? '1' : '0']);
  }

  const runConfig: Array<[string, string]> = [];
  let shrinksGpuArena = false;
  const shrink = params['memory.enable_memory_arena_shrinkage'];
  if (shrink !== undefined) {
    // onnxruntime's format: "cpu:0", "gpu:0", "cpu:0;gpu:1" (device:id pairs, ';'-separated).
    if (shrink !== '' && !/^(cpu|gpu):\d+(;(cpu|gpu):\d+)*$/.test(shrink)) {
      throw new InvalidArgError(
        `parameter 'memory.enable_memory_arena_shrinkage': expected a device list like 'cpu:0' or 'cpu:0;gpu:0', got '${shrink}'`,
      );
    }
    shrinksGpuArena = /gpu:/.test(shrink);
    if (shrink !== '') runConfig.push(['memory.enable_memory_arena_shrinkage', shrink]);
  }

  const gpuProviders: ProviderPlan[] = [];
  const cpuProviders: ProviderPlan[] = [];
  const eas = config.optimization?.execution_accelerators;
  let cudaEa: { parameters?: Record<string, string> } | undefined;
  for (const ea of eas?.gpu_execution_accelerator ?? []) {
    const field = 'optimization.execution_accelerators.gpu_execution_accelerator';
    if (ea.name === 'tensorrt') gpuProviders.push(tensorrtPlan(field, ea));
    else if (ea.name === 'cuda') cudaEa = ea;
    else {
      throw new InvalidArgError(
        `unknown Execution Accelerator '${ea.name ?? ''}' is requested in ${field} (known: 'tensorrt', 'cuda')`,
      );
    }
  }
  // KIND_GPU always runs on the CUDA provider: alone, or as TensorRT's fall-back for the nodes TensorRT cannot take.
  gpuProviders.push(cudaPlan('optimization.execution_accelerators.gpu_execution_accelerator', cudaEa, params));
  for (const ea of eas?.cpu_execution_accelerator ?? []) {
    const field = 'optimization.execution_accelerators.cpu_execution_accelerator';
    if (ea.name === 'openvino') cpuProviders.push(openvinoPlan(field, ea));
    else {
      throw new InvalidArgError(
        `unknown Execution Accelerator '${ea.name ?? ''}' is requested in ${field} (known: 'openvino')`,
      );
    }
  }
  const groups = config.instance_group ?? [];
  const anyGpu = groups.some((g) => g.kind === 'KIND_GPU' || g.kind === 'KIND_AUTO' || g.kind === undefined);
  if (!anyGpu && (eas?.gpu_execution_accelerator?.length ?? 0) > 0) {
    warnings.push(
      'optimization.execution_accelerators.gpu_execution_accelerator applies to KIND_GPU instances only; this model has none',
    );
  }

  return Object.freeze({
    graphLevel: graphLevel(config.optimization?.graph?.level),
    executionMode,
    intraOpThreads,
    interOpThreads,
    cpuMemArena,
    memPattern,
    sessionConfig,
    runConfig,
    globalThreadPool,
    gpuProviders,
    gpuAccelerators: (eas?.gpu_execution_accelerator ?? []).map((ea) => ea.name ?? ''),
    cpuProviders,
    shrinksGpuArena,
    warnings,
  });
}

/** The providers of one instance, device ids filled in. Throws INVALID_ARG for a config the kind cannot take. */
/**
 * Whether sessions of this plan replay CUDA graphs (the CUDA provider's `enable_cuda_graph`): they run on the
 * engine-thread transport, whose instance thread can copy into and out of the graphs' fixed device buffers.
 */
export function usesCudaGraphs(plan: SessionPlan): boolean {
  return plan.gpuProviders.some(
    (p) => p.name === 'cuda' && p.options.some(([k, v]) => k === 'enable_cuda_graph' && v === '1'),
  );
}

export function providersFor(plan: SessionPlan, spec: Pick<InstanceSpec, 'kind' | 'device' | 'name'>): ProviderPlan[] {
  if (spec.kind === 'KIND_GPU') {
    if (!Number.isSafeInteger(spec.device) || spec.device < 0) {
      throw new InvalidArgError(`instance ${spec.name}: KIND_GPU needs a GPU id, got ${spec.device}`);
    }
    const device = String(spec.device);
    return [
      ...plan.gpuProviders.map((p) => ({ name: p.name, options: [...p.options, ['device_id', device] as const] })),
      ...plan.cpuProviders,
    ];
  }
  if (spec.kind === 'KIND_MODEL') {
    throw new InvalidArgError(`instance ${spec.name}: KIND_MODEL is not supported by the onnxruntime backend`);
  }
  // Triton would run such a config on CPU, the accelerator ignored; Nereid never falls back silently: a config
  // that asks for a GPU accelerator gets a GPU or a clear load error.
  if (plan.gpuAccelerators.length > 0) {
    const names = plan.gpuAccelerators.join(', ');
    throw new UnavailableError(
      `instance ${spec.name} is ${spec.kind}, but optimization.execution_accelerators.gpu_execution_accelerator asks for ${names}: ` +
        'a GPU accelerator needs a KIND_GPU instance on a machine with a usable GPU (nereid gpu check); remove it to run on CPU',
    );
  }
  if (plan.shrinksGpuArena) {
    throw new InvalidArgError(
      `parameter 'memory.enable_memory_arena_shrinkage' names a GPU arena, but instance ${spec.name} is ${spec.kind}; use 'cpu:0'`,
    );
  }
  return [...plan.cpuProviders];
}
