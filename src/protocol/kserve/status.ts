import type { ErrorCode } from '../../core/errors.js';

/**
 * Triton's status mapping, written once for every protocol (Triton: `HttpCodeFromError` in http_server.cc and
 * `CodeToStatus` in grpc/grpc_utils.cc). The HTTP front end uses the `http` column now; the gRPC front end reads the
 * `grpc` column, so a new ErrorCode is a compile error here rather than a silent 500 somewhere else.
 */
export interface StatusMapping {
  /** HTTP status code of the `{"error": ...}` response. */
  readonly http: number;
  /** gRPC status code number (`@grpc/grpc-js` `status` enum values). */
  readonly grpc: number;
  /** gRPC status name, for logs and tests. */
  readonly grpcName: string;
}

/** gRPC status numbers used by the mapping (from the gRPC spec; kept here so core stays free of grpc-js). */
export const GRPC_STATUS = Object.freeze({
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  NOT_FOUND: 5,
  ALREADY_EXISTS: 6,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
});

const row = (http: number, grpcName: keyof typeof GRPC_STATUS): StatusMapping =>
  Object.freeze({ http, grpc: GRPC_STATUS[grpcName], grpcName });

/** ErrorCode → HTTP and gRPC status. */
export const STATUS_TABLE: Readonly<Record<ErrorCode, StatusMapping>> = Object.freeze({
  INVALID_ARG: row(400, 'INVALID_ARGUMENT'),
  NOT_FOUND: row(404, 'NOT_FOUND'),
  ALREADY_EXISTS: row(400, 'ALREADY_EXISTS'),
  UNAVAILABLE: row(503, 'UNAVAILABLE'),
  UNSUPPORTED: row(501, 'UNIMPLEMENTED'),
  CANCELLED: row(400, 'CANCELLED'),
  INTERNAL: row(500, 'INTERNAL'),
  UNKNOWN: row(400, 'UNKNOWN'),
  // HTTP meets it only inside a generate_stream already answered 200 (its error event); 429 names it otherwise.
  RESOURCE_EXHAUSTED: row(429, 'RESOURCE_EXHAUSTED'),
});

/** HTTP status for an error code. */
export function httpStatusOf(code: ErrorCode): number {
  return STATUS_TABLE[code].http;
}

/** gRPC status number for an error code. */
export function grpcStatusOf(code: ErrorCode): number {
  return STATUS_TABLE[code].grpc;
}
