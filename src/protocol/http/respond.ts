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
  // Only inference responses are compressed, as Triton does: tritonclient's aio client asks for gzip but reads
  // metadata, config and statistics bodies without decompressing them.
  const coding =
    opts.compressible && length > MIN_COMPRESS_BYTES ? responseCoding(req.headers['accept-encoding']) : undefined;
  if (coding !== undefined) {
    const compressed = await compress(parts.length === 1 ? parts[0] : Buffer.concat(parts), coding);
    body = [compressed];
    length = compressed.byteLength;
    res.setHeader('Content-Encoding', coding);
    res.setHeader('Vary', 'Accept-Encoding');
    if (res.destroyed) return;
  }
  for (const [k, v] of Object.entries(headers)) res.setHeader(k, v);
  if (contentType !== undefined) res.setHeader('Content-Type', contentType);
  res.setHeader('Content-Length', length);
  // A body left unread cannot be skipped on a keep-alive connection without reading it: close instead.
  if (bodyUnread(req)) res.setHeader('Connection', 'close');
  res.statusCode = status;
  if (body.length > 1 && length <= CONCAT_MAX_BYTES) body = [Buffer.concat(body)];
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
