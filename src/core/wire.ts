import type { DataType } from './datatypes.js';

/**
 * Shapes of Triton's protocol answers that both the server (src/server/api.ts) and the client (src/client) use:
 * server and model metadata, the repository index, statistics. Plain data, as they travel in JSON.
 */

export interface ServerMetadata {
  name: string;
  version: string;
  extensions: string[];
}

export interface TensorMetadata {
  name: string;
  datatype: DataType;
  /** Full shape as clients see it: -1 for the batch dim (when max_batch_size > 0) and variable dims. */
  shape: number[];
}

export interface ModelMetadata {
  name: string;
  versions: string[];
  platform: string;
  inputs: TensorMetadata[];
  outputs: TensorMetadata[];
}

/** One row of the repository index (Triton's RepositoryIndex). */
export interface ModelIndexEntry {
  name: string;
  /** '' when the model has no version loaded (e.g. its config failed). */
  version: string;
  state: string;
  reason: string;
}

export interface StatDuration {
  count: number;
  ns: number;
}

/** Triton's ModelStatistics (statistics extension), numbers as JS numbers. */
export interface ModelStatistics {
  name: string;
  version: string;
  last_inference: number;
  inference_count: number;
  execution_count: number;
  inference_stats: {
    success: StatDuration;
    fail: StatDuration;
    queue: StatDuration;
    compute_input: StatDuration;
    compute_infer: StatDuration;
    compute_output: StatDuration;
    cache_hit: StatDuration;
    cache_miss: StatDuration;
  };
  response_stats: Record<string, unknown>;
  batch_stats: {
    batch_size: number;
    compute_input: StatDuration;
    compute_infer: StatDuration;
    compute_output: StatDuration;
  }[];
  memory_usage: { type: string; id: number; byte_size: number }[];
}
