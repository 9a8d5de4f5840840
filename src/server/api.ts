import type { ModelConfig } from '../config/model-config.js';
import type { DataType } from '../core/datatypes.js';
import type { InferRequest, InferResponse } from '../core/inference.js';

/** What every protocol (HTTP, gRPC) talks to. Validation and errors are computed here, once. */

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

export interface CallOptions {
  signal?: AbortSignal;
}

export interface InferenceServerApi extends InferenceServerExtensions {
  isLive(): boolean;
  isReady(): boolean;
  metadata(): ServerMetadata;
  /** Throws NotFoundError for an unknown model/version, UnavailableError when not ready. */
  modelMetadata(name: string, version?: string): ModelMetadata;
  /** Never throws: unknown model → false. */
  modelReady(name: string, version?: string): boolean;
  modelConfig(name: string, version?: string): ModelConfig;
  /** Throws NotFoundError unless the model (and version) can take requests; lets protocols fail fast before parsing bodies. */
  checkModel(name: string, version?: string): void;
  infer(request: InferRequest, opts?: CallOptions): Promise<InferResponse>;
  close(): Promise<void>;
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

/** Load request overrides (Triton's model repository extension). */
export interface LoadOptions {
  /** JSON text of a ModelConfig that replaces config.pbtxt. */
  config?: string;
  /** `file:<version>/<path>` overrides: path (without the `file:` prefix) → content. */
  files?: ReadonlyMap<string, Uint8Array>;
}

/** Log settings (Triton's logging extension). */
export interface LogSettings {
  log_file: string;
  log_info: boolean;
  log_warning: boolean;
  log_error: boolean;
  log_verbose_level: number;
  log_format: string;
}

/** Trace settings: every value a list of strings, as Triton's trace extension. */
export type TraceSettings = Record<string, string | string[]>;

/**
 * The model repository, statistics, logging and trace extensions. Methods whose feature is not built
 * yet throw UnsupportedError (HTTP 501, gRPC UNIMPLEMENTED) with a message saying so.
 */
export interface InferenceServerExtensions {
  repositoryIndex(opts?: { ready?: boolean }): ModelIndexEntry[];
  loadModel(name: string, opts?: LoadOptions & CallOptions): Promise<void>;
  unloadModel(name: string, opts?: { unloadDependents?: boolean } & CallOptions): Promise<void>;
  /** No name: every model; no version: every version of the model. Unknown model/version → NotFoundError. */
  modelStatistics(name?: string, version?: string): ModelStatistics[];
  logSettings(): LogSettings;
  updateLogSettings(update: Partial<Record<keyof LogSettings, unknown>>): LogSettings;
  traceSettings(model?: string): TraceSettings;
  updateTraceSettings(model: string | undefined, update: Record<string, unknown>): TraceSettings;
}
