import {
  AlreadyExistsError,
  CancelledError,
  InternalError,
  InvalidArgError,
  NereidError,
  NotFoundError,
  UnavailableError,
  UnknownError,
  UnsupportedError,
} from '../core/errors.js';

/**
 * Server answers → the error catalogue of src/core/errors.ts, so callers catch the same classes the server throws.
 * This is the reverse of protocol/kserve/status.ts, kept here because the client may import only core/. HTTP loses
 * information (four codes share 400), so a 400 is reported as INVALID_ARG, the code it most often stands for.
 */

/** The error a non-2xx HTTP answer stands for, keeping the server's message. */
export function errorFromHttp(status: number, message: string): NereidError {
  const cause = { httpStatus: status };
  switch (status) {
    case 404:
      return new NotFoundError(message, { cause });
    case 501:
      return new UnsupportedError(message, { cause });
    case 503:
      return new UnavailableError(message, { cause });
    case 500:
      return new InternalError(message, { cause });
    default:
      // 400 and the transport refusals (405, 413, …) all mean "this request cannot be served as sent".
      if (status >= 400 && status < 500) return new InvalidArgError(message, { cause });
      return new UnknownError(message, { cause });
  }
}

/** gRPC status numbers the client maps (grpc's `status` enum; kept here so the mapping needs no grpc-js import). */
const GRPC = {
  CANCELLED: 1,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

/** The error a gRPC status stands for, keeping the server's details. */
export function errorFromGrpc(code: number, details: string): NereidError {
  const cause = { grpcCode: code };
  switch (code) {
    case GRPC.CANCELLED:
    case GRPC.DEADLINE_EXCEEDED:
      return new CancelledError(details, { cause });
    case GRPC.INVALID_ARGUMENT:
      return new InvalidArgError(details, { cause });
    case GRPC.NOT_FOUND:
      return new NotFoundError(details, { cause });
    case GRPC.ALREADY_EXISTS:
      return new AlreadyExistsError(details, { cause });
    case GRPC.UNIMPLEMENTED:
      return new UnsupportedError(details, { cause });
    case GRPC.INTERNAL:
      return new InternalError(details, { cause });
    case GRPC.UNAVAILABLE:
      return new UnavailableError(details, { cause });
    default:
      return new UnknownError(details, { cause });
  }
}

/**
 * The error for a call that ended because its signal aborted with `reason`: a CancelledError saying whether it was
 * the caller or the timeout (a reason named TimeoutError), with the reason as cause.
 */
export function abortError(reason: unknown, what: string): CancelledError {
  if (reason instanceof CancelledError) return reason;
  const timedOut = reason instanceof Error && reason.name === 'TimeoutError';
  return new CancelledError(timedOut ? `${what}: ${reason.message}` : `${what}: cancelled by the caller`, {
    cause: reason,
  });
}

/** The reason a timeout aborts with: an Error named TimeoutError, as AbortSignal.timeout uses. */
export function timeoutReason(timeoutMs: number): Error {
  const reason = new Error(`timed out after ${timeoutMs} ms`);
  reason.name = 'TimeoutError';
  return reason;
}
