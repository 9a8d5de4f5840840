import type { DataType, FixedTypedArray } from '../core/datatypes.js';

export type {
  ModelIndexEntry,
  ModelMetadata,
  ModelStatistics,
  ServerMetadata,
  StatDuration,
  TensorMetadata,
} from '../core/wire.js';

/**
 * The client's public vocabulary, shared by the HTTP and gRPC clients. The wire shapes (Triton's JSON field names)
 * are kept as they are, so what you read here is what Triton's documentation describes; only tensors are turned into
 * typed arrays.
 */

export type { DataType, FixedTypedArray };

/** A request parameter value (Triton's InferParameter: bool, int64, string; doubles where the server allows them). */
export type ClientParamValue = string | number | boolean | bigint;

/** Request or tensor parameters. */
export type ClientParameters = Record<string, ClientParamValue>;

/**
 * Tensor data as the client takes it. Fixed-size datatypes use their TypedArray (`INT32` → Int32Array, `INT64` →
 * BigInt64Array, `BOOL` → Uint8Array of 0/1, `FP16`/`BF16` → Uint16Array of raw bits); `BYTES` takes strings (sent as
 * UTF-8) or raw Uint8Array elements.
 */
export type InputData = FixedTypedArray | string[] | Uint8Array[];

/** One input tensor. `shape` is the full shape, batch dimension included. */
export interface InferInputTensor {
  name: string;
  datatype: DataType;
  shape: readonly number[];
  data: InputData;
  /** Per-tensor parameters, sent as they are. */
  parameters?: ClientParameters;
}

/** A requested output. `classCount` > 0 asks for Triton's classification extension (a BYTES `value:index[:label]`). */
export interface RequestedOutput {
  name: string;
  classCount?: number;
  parameters?: ClientParameters;
}

/**
 * An output tensor as the client returns it: fixed-size datatypes as their TypedArray (see {@link InputData}),
 * `BYTES` as one Uint8Array per element (use {@link InferResult.strings} for text).
 */
export interface OutputTensor {
  name: string;
  datatype: DataType;
  shape: number[];
  data: FixedTypedArray | Uint8Array[];
  parameters?: ClientParameters;
}

/** Options every call takes. */
export interface CallOptions {
  /** Aborts the call; the promise rejects with a CancelledError whose cause is the signal's reason. */
  signal?: AbortSignal;
  /** Overrides the client's `timeoutMs` for this call; on expiry the call rejects with a CancelledError. */
  timeoutMs?: number;
}

/** Options of {@link NereidHttpClient.infer} and the gRPC client's `infer`. */
export interface InferOptions extends CallOptions {
  /** Outputs to return; all of the model's outputs when omitted. */
  outputs?: RequestedOutput[];
  /** Model version; the version policy chooses when omitted. */
  version?: string;
  /** Request id, echoed in the response. */
  id?: string;
  /** Request parameters (Triton's `sequence_id`, `priority`, `timeout` in µs, or custom ones). */
  parameters?: ClientParameters;
  /**
   * HTTP only. true (default): tensors travel as Triton binary tensor data; false: KServe JSON. FP16/BF16 inputs are
   * always sent binary because Triton refuses them in JSON.
   */
  binary?: boolean;
}

/**
 * A model configuration in Triton's JSON form (proto field names, enums as strings, int64 as numbers). Only the most
 * used fields are typed; the rest is there under its proto name.
 */
export interface ModelConfigJson {
  name?: string;
  platform?: string;
  backend?: string;
  max_batch_size?: number;
  input?: { name: string; data_type: string; dims: number[]; [field: string]: unknown }[];
  output?: { name: string; data_type: string; dims: number[]; label_filename?: string; [field: string]: unknown }[];
  [field: string]: unknown;
}

/** Options of `loadModel` (Triton's model repository extension). */
export interface LoadModelOptions extends CallOptions {
  /** A ModelConfig replacing the one on disk: JSON text or an object (serialised for you). */
  config?: string | ModelConfigJson;
  /** `<version>/<path>` → file content; the server requires `config` with it. */
  files?: Record<string, Uint8Array>;
}

/** Options of `unloadModel`. */
export interface UnloadModelOptions extends CallOptions {
  /** Also unload the ensembles that depend on the model. */
  unloadDependents?: boolean;
}
