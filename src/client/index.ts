/**
 * `nereid/client`: a TypeScript client of Nereid's and Triton's KServe v2 HTTP protocol. This entry point is
 * browser-safe (fetch only, no node: imports); the gRPC client lives in `./grpc.js` because it needs Node and grpc-js.
 */

export { NereidHttpClient, type HttpClientOptions } from './http.js';
export { InferResult } from './result.js';
export { bytesToStrings, decodeBytesTensor, encodeBytesTensor } from './tensors.js';
export type * from './types.js';
export {
  AlreadyExistsError,
  CancelledError,
  InternalError,
  InvalidArgError,
  NereidError,
  NotFoundError,
  UnavailableError,
  UnknownError,
  UnsupportedError,
  type ErrorCode,
} from '../core/errors.js';
