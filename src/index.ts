/**
 * `nereid`: the embeddable server. `serve(options)` loads a Triton model repository and starts the HTTP (and, unless
 * turned off, gRPC and metrics) endpoints in this process; it is the same function `nereid serve` runs. Clients live
 * in `nereid/client` and `nereid/client/grpc`.
 *
 * ```ts
 * import { serve } from 'nereid';
 * const nereid = await serve({ repositories: ['./models'], httpPort: 0, allowGrpc: false, allowMetrics: false });
 * console.log(nereid.httpUrl);
 * await nereid.close();
 * ```
 */

export { serve, type RunningNereid, type ServeOptions } from './serve.js';
export { NEREID_VERSION } from './core/version.js';
export type { InferenceServer } from './server/server.js';
export type { GrpcKeepaliveOptions, GrpcTlsOptions } from './protocol/grpc/index.js';
export type { TraceOptions } from './server/trace.js';
export { LogRing, type ConsoleAccess, type ConsoleCategory } from './console/index.js';
export { createLogger, noopLogger, type Logger, type LoggerOptions, type LogSwitches } from './core/logger.js';
export {
  AlreadyExistsError,
  CancelledError,
  ERROR_CLASSES,
  InternalError,
  InvalidArgError,
  NereidError,
  NotFoundError,
  UnavailableError,
  UnknownError,
  ResourceExhaustedError,
  UnsupportedError,
  type ErrorCode,
} from './core/errors.js';
