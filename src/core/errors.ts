/**
 * The error catalogue. One subclass per Triton status code; protocols map them once
 * (one table for HTTP and gRPC: protocol/kserve/status.ts). Messages say what was wrong and, where we can tell, what to do.
 */

/** Triton's status codes, as named by TRITONSERVER_Error_Code. */
export type ErrorCode =
  | 'INVALID_ARG'
  | 'NOT_FOUND'
  | 'ALREADY_EXISTS'
  | 'UNAVAILABLE'
  | 'UNSUPPORTED'
  | 'CANCELLED'
  | 'INTERNAL'
  | 'UNKNOWN'
  | 'RESOURCE_EXHAUSTED';

export interface NereidErrorOptions {
  cause?: unknown;
  /** See NereidError.unexpected; only NereidError.from() sets it. */
  unexpected?: boolean;
}

/** Base class of every error Nereid raises on purpose. */
export class NereidError extends Error {
  readonly code: ErrorCode;
  /**
   * True when NereidError.from() wrapped a throwable Nereid did not raise on purpose (a bug, or a library's
   * exception): its message was not written for clients, so the protocols answer a generic message with an error
   * id instead and log the cause (protocol/kserve/client-error.ts).
   */
  readonly unexpected: boolean;
  constructor(code: ErrorCode, message: string, options?: NereidErrorOptions) {
    super(message, options);
    this.code = code;
    this.unexpected = options?.unexpected ?? false;
    this.name = new.target.name;
  }

  /** Turns anything thrown into a NereidError; unexpected errors become INTERNAL with the original as cause. */
  static from(err: unknown): NereidError {
    if (err instanceof NereidError) return err;
    if (err instanceof Error && err.name === 'AbortError') {
      return new CancelledError('request was cancelled', { cause: err });
    }
    const message = err instanceof Error ? err.message : String(err);
    return new InternalError(message, { cause: err, unexpected: true });
  }
}

/** The request is malformed or does not fit the model (HTTP 400, gRPC INVALID_ARGUMENT). */
export class InvalidArgError extends NereidError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('INVALID_ARG', message, options);
  }
}
/** Unknown model or version (HTTP 404, gRPC NOT_FOUND). */
export class NotFoundError extends NereidError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('NOT_FOUND', message, options);
  }
}
export class AlreadyExistsError extends NereidError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('ALREADY_EXISTS', message, options);
  }
}
/** Temporarily unable: queue full, queue timeout, version not ready, shutting down (HTTP 503). */
export class UnavailableError extends NereidError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('UNAVAILABLE', message, options);
  }
}
/** A feature this build or this release does not provide (HTTP 501, gRPC UNIMPLEMENTED). */
export class UnsupportedError extends NereidError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('UNSUPPORTED', message, options);
  }
}
export class CancelledError extends NereidError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('CANCELLED', message, options);
  }
}
export class InternalError extends NereidError {
  constructor(message: string, options?: NereidErrorOptions) {
    super('INTERNAL', message, options);
  }
}
export class UnknownError extends NereidError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('UNKNOWN', message, options);
  }
}

/**
 * A client holds more of the server than a limit allows: a stream whose client does not take its responses (more
 * pending than `--stream-max-pending-bytes`, or none taken for `--stream-stall-timeout-secs`). Not one of
 * TRITONSERVER_Error_Code's; gRPC's own RESOURCE_EXHAUSTED (what grpc-js answers for a message over its size limit).
 */
export class ResourceExhaustedError extends NereidError {
  constructor(message: string, options?: { cause?: unknown }) {
    super('RESOURCE_EXHAUSTED', message, options);
  }
}

/** Every code with its class; a test checks the catalogue is complete. */
export const ERROR_CLASSES: Readonly<Record<ErrorCode, new (message: string) => NereidError>> = Object.freeze({
  INVALID_ARG: InvalidArgError,
  NOT_FOUND: NotFoundError,
  ALREADY_EXISTS: AlreadyExistsError,
  UNAVAILABLE: UnavailableError,
  UNSUPPORTED: UnsupportedError,
  CANCELLED: CancelledError,
  INTERNAL: InternalError,
  UNKNOWN: UnknownError,
  RESOURCE_EXHAUSTED: ResourceExhaustedError,
});
