import type { RequestTrace } from '../../core/inference.js';

/**
 * What tracing needs from a protocol, for every inference request (cheap: two clock reads and two lookups, nothing
 * of OpenTelemetry): when receiving began and ended, and the client's W3C trace context, taken from the HTTP
 * headers or gRPC metadata `traceparent` / `tracestate`, which the server continues when it traces the request.
 */
export function requestTrace(
  protocol: 'HTTP' | 'GRPC',
  recvStart: bigint,
  traceparent: string | undefined,
  tracestate: string | undefined,
): RequestTrace {
  const t: RequestTrace = { protocol, recvStart, recvEnd: process.hrtime.bigint() };
  if (traceparent !== undefined && traceparent.length <= MAX_HEADER) t.traceparent = traceparent;
  if (tracestate !== undefined && tracestate.length <= MAX_HEADER) t.tracestate = tracestate;
  return t;
}

/** W3C caps tracestate at 512 characters in practice; anything far longer is no trace context. */
const MAX_HEADER = 4096;

/** A header or metadata value as one string (the first of repeated ones). */
export function header(value: string | string[] | Buffer | undefined): string | undefined {
  if (Array.isArray(value)) return value[0];
  return typeof value === 'string' ? value : undefined;
}
