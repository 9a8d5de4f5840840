import { suggestion } from '../../config/config-error.js';
import { InvalidArgError } from '../../core/errors.js';
import { boolWord } from '../../core/bool-word.js';

/**
 * The execution providers of Triton's onnxruntime backend (`optimization.execution_accelerators`: TensorRT, CUDA,
 * OpenVINO) as onnxruntime's V2 provider options, checked and normalized here (options-capi.ts plans the rest of a
 * session), and the value spellings Triton's options take. Pure: no I/O, no native calls.
 */

export type ProviderName = 'tensorrt' | 'cuda' | 'openvino';

/** One execution provider to append, with its V2 provider options (key/value strings, as the C API takes). */
export interface ProviderPlan {
  readonly name: ProviderName;
  readonly options: ReadonlyArray<readonly [string, string]>;
}

/** Triton's ParseBoolValue spellings; normalized to "1"/"0" for onnxruntime. */
export function parseBool(where: string, value: string): boolean {
  const b = boolWord(value);
  if (b === undefined) {
    throw new InvalidArgError(`${where}: expected a boolean (true/false, 1/0, on/off, yes/no), got '${value}'`);
  }
  return b;
}

export function parseInt32(where: string, value: string, min = -0x80000000): number {
  const v = value.trim();
  const n = Number(v);
  if (v === '' || !Number.isSafeInteger(n) || n < min || n > 0x7fffffff) {
    throw new InvalidArgError(`${where}: expected an integer${min === 0 ? ' >= 0' : ''}, got '${value}'`);
  }
  return n;
}

/** A size_t as a decimal string (gpu_mem_limit, max_workspace_size_bytes): kept as text, no float rounding. */
export function parseSize(where: string, value: string): string {
  const v = value.trim();
  if (!/^\d+$/.test(v) || BigInt(v) > 0xffffffffffffffffn) {
    throw new InvalidArgError(`${where}: expected a byte count (a non-negative integer), got '${value}'`);
  }
  return BigInt(v).toString();
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
const TENSORRT_OPTIONS: Readonly<Record<string, readonly [string, 'bool' | 'int' | 'size' | 'string' | 'name']>> = {
  max_workspace_size_bytes: ['trt_max_workspace_size', 'size'],
  trt_max_partition_iterations: ['trt_max_partition_iterations', 'int'],
  trt_min_subgraph_size: ['trt_min_subgraph_size', 'int'],
  int8_calibration_table_name: ['trt_int8_calibration_table_name', 'name'],
  int8_use_native_calibration_table: ['trt_int8_use_native_calibration_table', 'bool'],
  trt_dla_enable: ['trt_dla_enable', 'bool'],
  trt_dla_core: ['trt_dla_core', 'int'],
  trt_engine_cache_enable: ['trt_engine_cache_enable', 'bool'],
  trt_engine_cache_path: ['trt_engine_cache_path', 'string'],
  trt_engine_cache_prefix: ['trt_engine_cache_prefix', 'name'],
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

/** Integer TensorRT options with a range TensorRT defines (IBuilderConfig's optimization levels 0-5, ...). */
const TENSORRT_RANGES: Readonly<Record<string, readonly [number, number]>> = {
  trt_builder_optimization_level: [0, 5],
  trt_max_partition_iterations: [1, 0x7fffffff],
  trt_min_subgraph_size: [1, 0x7fffffff],
  trt_dla_core: [0, 0x7fffffff],
  trt_auxiliary_streams: [-1, 0x7fffffff],
  trt_ep_context_embed_mode: [0, 1],
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

/**
 * A file name inside the engine cache folder (the INT8 calibration table, the engines' prefix): onnxruntime joins
 * it to `trt_engine_cache_path`, so a separator or `..` would leave that folder.
 */
function parseName(where: string, value: string): string {
  if (/[/\\\0]/.test(value) || value === '.' || value === '..') {
    throw new InvalidArgError(
      `${where}: expected a file name inside trt_engine_cache_path (no '/', '\\' or '..'), got '${value}'`,
    );
  }
  return value;
}

function normalize(where: string, kind: 'bool' | 'int' | 'size' | 'string' | 'name', value: string): string {
  switch (kind) {
    case 'name':
      return parseName(where, value);
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

export function tensorrtPlan(field: string, ea: { parameters?: Record<string, string> }): ProviderPlan {
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
        `unknown parameter '${key}' is provided for TensorRT Execution Accelerator (${field})${suggestion(key, ['precision_mode', ...Object.keys(TENSORRT_OPTIONS)])}; known: precision_mode, ${Object.keys(TENSORRT_OPTIONS).join(', ')}`,
      );
    }
    const v = normalize(where, known[1], value);
    const range = TENSORRT_RANGES[key];
    if (range !== undefined && (Number(v) < range[0] || Number(v) > range[1])) {
      throw new InvalidArgError(`${where}: expected an integer from ${range[0]} to ${range[1]}, got '${value}'`);
    }
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

export function cudaPlan(
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
          : `unknown parameter '${key}' is provided for CUDA Execution Accelerator (${field})${suggestion(key, Object.keys(CUDA_OPTIONS))}; onnxruntime 1.30 knows ${Object.keys(CUDA_OPTIONS).join(', ')}`,
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

export function openvinoPlan(field: string, ea: { parameters?: Record<string, string> }): ProviderPlan {
  const options = new Map<string, string>([['device_type', 'CPU']]);
  for (const [key, value] of paramsOf(ea)) {
    if (!OPENVINO_OPTIONS.has(key)) {
      throw new InvalidArgError(
        `unknown parameter '${key}' is provided for OpenVINO Execution Accelerator (${field})${suggestion(key, OPENVINO_OPTIONS)}; known: ${[...OPENVINO_OPTIONS].join(', ')}`,
      );
    }
    options.set(key, value);
  }
  return { name: 'openvino', options: [...options] };
}
