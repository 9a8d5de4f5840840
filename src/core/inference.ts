import type { Lease } from './lease.js';
import type { RequestDeviceMemory } from './device.js';
import type { Tensor } from './tensor.js';

/** A request or tensor parameter value (Triton's InferParameter oneof). */
export type ParamValue = string | number | boolean | bigint;
export type Parameters = Record<string, ParamValue>;

/**
 * A slice of a client's registered shared-memory region (Triton's `shared_memory_region`, `shared_memory_offset`,
 * `shared_memory_byte_size` parameters). Offsets and sizes are bigint: clients send uint64 values, and bounds are
 * checked against the region before any byte is read or written.
 */
export interface SharedMemoryRef {
  region: string;
  offset: bigint;
  byteSize: bigint;
}

/**
 * An input as received: the tensor plus its per-tensor parameters (binary_data_size etc. already consumed). With
 * `sharedMemory`, `data` is empty until the server reads the region.
 */
export interface InferInput extends Tensor {
  parameters?: Parameters;
  sharedMemory?: SharedMemoryRef;
}

/**
 * A requested output. `classCount` > 0 asks for Triton's classification extension; `sharedMemory` asks for the data
 * to be written into a registered region instead of the response.
 */
export interface RequestedOutput {
  name: string;
  classCount?: number;
  parameters?: Parameters;
  sharedMemory?: SharedMemoryRef;
}

/** An output of a response; with `sharedMemory` its data was written there (`byteSize` is what was written). */
export interface InferOutput extends Tensor {
  sharedMemory?: SharedMemoryRef;
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
  /** Set by the server when inputs or outputs live in device memory (client CUDA shared memory). */
  device?: RequestDeviceMemory;
  /** What tracing needs from the protocol (set by HTTP and gRPC), or from the parent of an ensemble step. */
  trace?: RequestTrace;
}

/**
 * A request's trace context: the client's W3C `traceparent`/`tracestate` (HTTP headers, gRPC metadata) and when the
 * protocol began and finished receiving it (process.hrtime.bigint ns). An ensemble step of a traced request carries
 * its parent's context and trace id (`parentId`): it is traced because its parent is, whatever its own rate.
 */
export interface RequestTrace {
  traceparent?: string;
  tracestate?: string;
  protocol?: 'HTTP' | 'GRPC';
  recvStart?: bigint;
  recvEnd?: bigint;
  parentId?: number;
}

export interface InferResponse {
  model: string;
  version: string;
  id?: string;
  parameters?: Parameters;
  outputs: InferOutput[];
  /**
   * Set only when the caller asked for views (`InferOptions.views`): the outputs view lent memory, and the caller
   * must call `release` once it no longer reads them (after the write, or when it gives up on the response).
   */
  lease?: Lease;
  /**
   * Set only when the caller said it reports its write (`InferOptions.reportsSend`) and the request is traced with
   * OpenTelemetry: call it once with when the response's write started and ended (process.hrtime.bigint ns).
   */
  onSent?: (sendStart: bigint, sendEnd: bigint) => void;
}
