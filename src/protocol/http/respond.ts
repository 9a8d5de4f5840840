import type { IncomingMessage, ServerResponse } from 'node:http';
import type { Logger } from '../../core/logger.js';
import { errorForClient } from '../kserve/client-error.js';
import { httpStatusOf } from '../kserve/status.js';
import { bodyUnread } from './body.js';
import { compress, MIN_COMPRESS_BYTES, responseCoding } from './compression.js';

/** Response headers beyond Content-Type/Length. */
export type ExtraHeaders = Record<string, string | number>;

/**
 * Bodies up to this size are joined into one Buffer and sent with `res.end(buf)`; larger ones are written corked
 * (one writev, no copy of the tensors). Measured on `simple`-sized binary responses (~300 B, 16 connections):
 * concat and cork+writev were within run-to-run noise (10–17k req/s each), so the copy only goes where it is cheap.
 */
const CONCAT_MAX_BYTES = 64 * 1024;

/**
 * Sends a complete response. Compresses (gzip preferred, then deflate) when the client accepts it and the body is
 * larger than MIN_COMPRESS_BYTES; a compressed body needs the one concatenation zlib wants anyway.
 */
export async function send(
  req: IncomingMessage,
  res: ServerResponse,
  status: number,
  contentType: string | undefined,
  parts: readonly Uint8Array[],
  headers: ExtraHeaders = {},
  opts: { compressible?: boolean } = {},
): Promise<void> {
  if (res.headersSent || res.destroyed) return;
  let length = 0;
  for (const p of parts) length += p.byteLength;
  let body = parts;
  // Headers go to writeHead as one flat array: Node stores them in one pass, where setHeader validates and copies
  // each into the response's header map first (3 % of a `simple` request's main-thread time, profiled).
  const head: (string | number)[] = [];
  // Only inference responses are compressed, as Triton does: tritonclient's aio client asks for gzip but reads
  // metadata, config and statistics bodies without decompressing them.
  const coding =
    opts.compressible && length > MIN_COMPRESS_BYTES ? responseCoding(req.headers['accept-encoding']) : undefined;
  if (coding !== undefined) {
    const compressed = await compress(parts.length === 1 ? parts[0] : Buffer.concat(parts), coding);
    body = [compressed];
    length = compressed.byteLength;
    head.push('Content-Encoding', coding, 'Vary', 'Accept-Encoding');
    if (res.destroyed) return;
  }
  for (const k in headers) head.push(k, headers[k]);
  if (contentType !== undefined) head.push('Content-Type', contentType);
  head.push('Content-Length', length);
  // A body left unread cannot be skipped on a keep-alive connection without reading it: close instead.
  if (bodyUnread(req)) head.push('Connection', 'close');
  res.writeHead(status, head as string[]);
  if (body.length === 1) {
    res.end(body[0]);
    return;
  }
  if (body.length > 1 && length <= CONCAT_MAX_BYTES) {
    res.end(Buffer.concat(body));
    return;
  }
  res.cork();
  for (const p of body) res.write(p);
  res.end();
  res.uncork();
}

/** Sends a JSON value. */
export function sendJson(req: IncomingMessage, res: ServerResponse, status: number, value: unknown): Promise<void> {
  return send(req, res, status, 'application/json', [Buffer.from(JSON.stringify(value), 'utf8')]);
}

/** Sends a status with an empty body (Triton's health and ready endpoints). */
export function sendEmpty(req: IncomingMessage, res: ServerResponse, status: number): Promise<void> {
  return send(req, res, status, undefined, []);
}

/**
 * Answers any error as `{"error": msg}` with Triton's status mapping. Errors Nereid did not raise on purpose are
 * logged with an id and answered as INTERNAL (500) with a generic message naming that id (kserve/client-error.ts).
 */
export async function sendError(
  req: IncomingMessage,
  res: ServerResponse,
  err: unknown,
  logger: Logger,
): Promise<void> {
  const e = errorForClient(err, logger, { protocol: 'http', method: req.method, url: req.url });
  if (res.headersSent) {
    // Too late for a status: cut the connection so the client sees a failure rather than a truncated success.
    res.destroy(e);
    return;
  }
  const headers: ExtraHeaders = {};
  // Triton advertises what it accepts along with "Unsupported compression type".
  if (e.code === 'UNSUPPORTED' && e.message.startsWith('Unsupported compression type')) {
    headers['Accept-Encoding'] = 'gzip, deflate';
  }
  await send(
    req,
    res,
    httpStatusOf(e.code),
    'application/json',
    [Buffer.from(JSON.stringify({ error: e.message }))],
    headers,
  );
}
