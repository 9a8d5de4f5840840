import type { ModelConfig } from '../config/model-config.js';
import type { DataType } from '../core/datatypes.js';
import type { Logger } from '../core/logger.js';
import type { Tensor } from '../core/tensor.js';

/**
 * The backend contract, Triton's shape: a backend loads a model into instances, and an instance executes
 * batches. Everything crossing it is plain data (tensors of TypedArrays, config objects), so a backend
 * may run its instances in worker threads (onnxruntime) or in another process (TensorRT, Python) without
 * the scheduler knowing.
 */

/** One tensor of a model file's signature, as the engine reports it. Dims: -1 for dynamic. */
export interface TensorSignature {
  name: string;
  datatype: DataType;
  dims: number[];
}

export interface ModelSignature {
  inputs: TensorSignature[];
  outputs: TensorSignature[];
}

/** Backend-wide settings from `--backend-config=<backend>,<key>=<value>`. */
export type BackendConfig = Readonly<Record<string, string>>;

export interface LoadContext {
  /** Model name and version being loaded. */
  name: string;
  version: number;
  /** The final (auto-completed, validated) config. */
  config: ModelConfig;
  /** `<repo>/<model>` and the model file (or directory) inside `<version>/`. */
  modelDir: string;
  modelPath: string;
  backendConfig: BackendConfig;
  logger: Logger;
  signal?: AbortSignal;
}

/** A batch handed to an instance: full shapes (batch dim included when max_batch_size > 0). */
export interface ExecuteRequest {
  inputs: Tensor[];
  /** Output names to compute; the backend returns exactly these, in this order. */
  outputs: string[];
}

/** Per-execution timings in nanoseconds, reported back for the statistics extension. */
export interface ExecuteTimings {
  computeInputNs: number;
  computeInferNs: number;
  computeOutputNs: number;
}

export interface ExecuteResult {
  outputs: Tensor[];
  timings: ExecuteTimings;
}

/** One execution context (Triton's model instance): runs one batch at a time. */
export interface BackendInstance {
  readonly name: string;
  execute(request: ExecuteRequest, opts?: { signal?: AbortSignal }): Promise<ExecuteResult>;
  /** Releases the instance; idempotent. */
  close(): Promise<void>;
}

export interface LoadedModel {
  instances: BackendInstance[];
  /** Releases every instance; idempotent. */
  close(): Promise<void>;
}

export interface Backend {
  /** Backend name as in config `backend` (`onnxruntime`). */
  readonly name: string;
  /** Platform names it serves (`onnxruntime_onnx`). */
  readonly platforms: readonly string[];
  readonly defaultModelFilename: string;
  /** Reads the model file's signature, for auto-complete and for checking the config against the model. */
  signature(modelPath: string, ctx: { backendConfig: BackendConfig; config: ModelConfig }): Promise<ModelSignature>;
  /** Creates the instances of `instance_group` for one model version. */
  load(ctx: LoadContext): Promise<LoadedModel>;
  /** Releases backend-wide resources (worker pools); idempotent. */
  close?(): Promise<void>;
}
