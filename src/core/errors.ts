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

/**
 * A NereidError as plain data, for everything that crosses a thread, a process or a pipe as data (front-end and
 * engine threads by postMessage, child engines and helper processes as JSON). `unexpected` errors keep their
 * cause's text and stack, so the side that answers the client logs what really happened.
 */
export interface ErrorData {
  code: ErrorCode;
  message: string;
  unexpected?: boolean;
  stack?: string;
  cause?: { name: string; message: string; stack?: string };
}

/** The compact form Nereid's Python processes write (`{"c": code, "m": message}`). */
export interface CompactErrorData {
  c: string;
  m: string;
}

export function errorToData(err: unknown): ErrorData {
  const e = NereidError.from(err);
  const out: ErrorData = { code: e.code, message: e.message, unexpected: e.unexpected, stack: e.stack };
  const cause = e.cause;
  if (cause instanceof Error) out.cause = { name: cause.name, message: cause.message, stack: cause.stack };
  else if (cause !== undefined) out.cause = { name: 'Error', message: String(cause) };
  return out;
}

/**
 * The same class and code on this side; an unexpected error stays unexpected (the protocol logs it with an id).
 * Data from outside TypeScript may carry a code Nereid does not have: `unknownAs` says which class it becomes.
 */
export function errorFromData(d: ErrorData, unknownAs: ErrorCode = 'INTERNAL'): NereidError {
  let cause: Error | undefined;
  if (d.cause !== undefined) {
    cause = new Error(d.cause.message);
    cause.name = d.cause.name;
    if (d.cause.stack !== undefined) cause.stack = d.cause.stack;
  }
  const e = d.unexpected
    ? new InternalError(d.message, { cause, unexpected: true })
    : new (ERROR_CLASSES[d.code] ?? ERROR_CLASSES[unknownAs])(String(d.message));
  if (d.stack !== undefined) e.stack = d.stack;
  return e;
}

/** A Python process's `{c, m}`; `fallback` is the message when it sent none at all. */
export function errorFromCompact(
  e: CompactErrorData | undefined,
  fallback: string,
  unknownAs: ErrorCode = 'INTERNAL',
): NereidError {
  if (e === undefined || typeof e !== 'object') return new ERROR_CLASSES[unknownAs](fallback);
  return errorFromData({ code: e.c as ErrorCode, message: e.m }, unknownAs);
}
