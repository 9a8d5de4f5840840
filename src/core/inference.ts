import type { Tensor } from './tensor.js';

/** A request or tensor parameter value (Triton's InferParameter oneof). */
export type ParamValue = string | number | boolean | bigint;
export type Parameters = Record<string, ParamValue>;

/** An input as received: the tensor plus its per-tensor parameters (binary_data_size etc. already consumed). */
export interface InferInput extends Tensor {
  parameters?: Parameters;
}

/** A requested output. `classCount` > 0 asks for Triton's classification extension. */
export interface RequestedOutput {
  name: string;
  classCount?: number;
  parameters?: Parameters;
}

/** A protocol-independent inference request, built by the protocol codecs and validated by the server. */
export interface InferRequest {
  model: string;
  /** Version string; '' or undefined lets the version policy choose (latest ready). */
  version?: string;
  id?: string;
  inputs: InferInput[];
  /** Undefined: every output of the model. */
  outputs?: RequestedOutput[];
  parameters?: Parameters;
}

export interface InferResponse {
  model: string;
  version: string;
  id?: string;
  parameters?: Parameters;
  outputs: Tensor[];
}
