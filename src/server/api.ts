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

export interface InferenceServerApi {
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
