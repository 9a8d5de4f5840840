/**
 * TypeScript view of Triton's ModelConfig (proto/model_config.proto) as the parser produces it:
 * proto field names (snake_case), enums as their names, int64 as JS numbers, absent fields left out
 * (the parser fills proto defaults only where noted). Only the fields the server reads are typed
 * precisely; the rest are kept as parsed and printed back unchanged.
 */

export type ConfigDataType =
  | 'TYPE_INVALID'
  | 'TYPE_BOOL'
  | 'TYPE_UINT8'
  | 'TYPE_UINT16'
  | 'TYPE_UINT32'
  | 'TYPE_UINT64'
  | 'TYPE_INT8'
  | 'TYPE_INT16'
  | 'TYPE_INT32'
  | 'TYPE_INT64'
  | 'TYPE_FP16'
  | 'TYPE_FP32'
  | 'TYPE_FP64'
  | 'TYPE_STRING'
  | 'TYPE_BF16';

export interface ModelTensorReshape {
  shape?: number[];
}

export interface ModelInput {
  name?: string;
  data_type?: ConfigDataType;
  format?: string;
  dims?: number[];
  reshape?: ModelTensorReshape;
  is_shape_tensor?: boolean;
  allow_ragged_batch?: boolean;
  optional?: boolean;
  is_non_linear_format_io?: boolean;
}

export interface ModelOutput {
  name?: string;
  data_type?: ConfigDataType;
  dims?: number[];
  reshape?: ModelTensorReshape;
  label_filename?: string;
  is_shape_tensor?: boolean;
  is_non_linear_format_io?: boolean;
}

export interface ModelVersionPolicy {
  latest?: { num_versions?: number };
  all?: Record<string, never>;
  specific?: { versions?: number[] };
}

/** Triton's `rate_limiter` of an instance group: resources one execution holds, and a priority (a weight). */
export interface ModelRateLimiter {
  resources?: { name?: string; global?: boolean; count?: number }[];
  priority?: number;
}

export interface ModelInstanceGroup {
  name?: string;
  kind?: 'KIND_AUTO' | 'KIND_GPU' | 'KIND_CPU' | 'KIND_MODEL';
  count?: number;
  gpus?: number[];
  profile?: string[];
  passive?: boolean;
  host_policy?: string;
  rate_limiter?: ModelRateLimiter;
  [field: string]: unknown;
}

export interface ModelQueuePolicy {
  timeout_action?: 'REJECT' | 'DELAY';
  default_timeout_microseconds?: number;
  allow_timeout_override?: boolean;
  max_queue_size?: number;
}

export interface ModelDynamicBatching {
  preferred_batch_size?: number[];
  max_queue_delay_microseconds?: number;
  preserve_ordering?: boolean;
  priority_levels?: number;
  default_priority_level?: number;
  default_queue_policy?: ModelQueuePolicy;
  priority_queue_policy?: Record<string, ModelQueuePolicy>;
}

export interface ExecutionAccelerator {
  name?: string;
  parameters?: Record<string, string>;
}

export interface ModelOptimizationPolicy {
  graph?: { level?: number };
  priority?: string;
  cuda?: Record<string, unknown>;
  execution_accelerators?: {
    gpu_execution_accelerator?: ExecutionAccelerator[];
    cpu_execution_accelerator?: ExecutionAccelerator[];
  };
  [field: string]: unknown;
}

export interface ModelParameter {
  string_value?: string;
}

export interface ModelConfig {
  name?: string;
  platform?: string;
  backend?: string;
  runtime?: string;
  version_policy?: ModelVersionPolicy;
  max_batch_size?: number;
  input?: ModelInput[];
  output?: ModelOutput[];
  batch_input?: unknown[];
  batch_output?: unknown[];
  optimization?: ModelOptimizationPolicy;
  dynamic_batching?: ModelDynamicBatching;
  sequence_batching?: Record<string, unknown>;
  ensemble_scheduling?: Record<string, unknown>;
  instance_group?: ModelInstanceGroup[];
  default_model_filename?: string;
  cc_model_filenames?: Record<string, string>;
  metric_tags?: Record<string, string>;
  parameters?: Record<string, ModelParameter>;
  model_warmup?: unknown[];
  model_operations?: { op_library_filename?: string[] };
  model_transaction_policy?: { decoupled?: boolean };
  model_repository_agents?: unknown;
  response_cache?: { enable?: boolean };
  model_metrics?: unknown;
}

/**
 * A config after auto-complete and validation, as everything past the loader sees it (engines at load, the spec,
 * the schedulers): the fields Triton gives a default are resolved, so nobody writes `?? 0` again. Only the
 * loader makes one (`finalizeConfig`).
 */
export interface NormalizedConfig extends ModelConfig {
  name: string;
  /** 0: the model does not batch (Triton's default). */
  max_batch_size: number;
  input: ModelInput[];
  output: ModelOutput[];
  /** Empty: the backend's default group (expanded into instances by the registry). */
  instance_group: ModelInstanceGroup[];
}

/** The defaults of NormalizedConfig filled in (a copy: the completed config is never changed in place). */
export function finalizeConfig(config: ModelConfig, name: string): NormalizedConfig {
  return {
    ...config,
    name: config.name || name,
    max_batch_size: maxBatchOf(config),
    input: config.input ?? [],
    output: config.output ?? [],
    instance_group: config.instance_group ?? [],
  };
}

/**
 * `max_batch_size` of a config that may not be final yet (auto-complete, validation): unset is 0, Triton's
 * default. Past the loader, a NormalizedConfig has it resolved.
 */
export function maxBatchOf(config: ModelConfig): number {
  return config.max_batch_size ?? 0;
}
