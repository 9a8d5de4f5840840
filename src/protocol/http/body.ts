import type { IncomingMessage } from 'node:http';
import { CancelledError, InvalidArgError } from '../../core/errors.js';
import { tooLargeError } from './compression.js';

/** Triton's cap on non-empty chunks of a chunked body (L0_http: 10^6 one-byte chunks must not grow RSS). */
export const MAX_CHUNKS = 65536;

/**
 * Reads a request body into ONE owned ArrayBuffer, so that input tensors can be views of it and the backend can
 * transfer it to a worker thread (Buffer.allocUnsafeSlow: never Buffer's shared pool, which is untransferable).
 *
 * Limits are enforced before buffering: a Content-Length over `limit` is refused without reading a byte (Node must
 * not read 2.8 GB to say 400); a chunked body is counted as it arrives and refused when it passes `limit` or
 * MAX_CHUNKS non-empty chunks. Node surfaces body data per parsed piece, not per HTTP chunk, so the chunk count is an
 * upper bound of the real one (one chunk split across TCP reads counts twice), which only matters near the cap.
 *
 * On rejection the stream is paused and left unread; the caller answers with `Connection: close` (see
 * `bodyUnread`), so Node closes the socket instead of draining the rest.
 */
export function readBody(req: IncomingMessage, limit: number): Promise<Uint8Array> {
  const lengthHeader = req.headers['content-length'];
  const declared = lengthHeader === undefined ? undefined : Number(lengthHeader);
  if (declared !== undefined && declared > limit) return Promise.reject(tooLargeError(declared, limit));
  if (declared === 0 || (declared === undefined && req.complete)) return Promise.resolve(new Uint8Array(0));

  return new Promise<Uint8Array>((resolve, reject) => {
    const fixed = declared === undefined ? undefined : Buffer.allocUnsafeSlow(declared);
    const chunks: Buffer[] = [];
    let received = 0;
    let nonEmpty = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const fail = (err: Error): void => {
      cleanup();
      req.pause();
      reject(err);
    };
    const onData = (chunk: Buffer): void => {
      if (chunk.length === 0) return;
      received += chunk.length;
      if (fixed !== undefined) {
        // Node's parser never passes more than Content-Length; the check guards the copy anyway.
        if (received > fixed.length) return fail(new InvalidArgError('request body is longer than its Content-Length'));
        chunk.copy(fixed, received - chunk.length);
        return;
      }
      if (received > limit) return fail(tooLargeError(received, limit));
      if (++nonEmpty > MAX_CHUNKS) {
        return fail(
          new InvalidArgError(
            `Chunked request body exceeds maximum of ${MAX_CHUNKS} non-empty chunks. Send fewer or larger HTTP chunks.`,
          ),
        );
      }
      chunks.push(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      if (fixed !== undefined) {
        if (received !== fixed.length) {
          reject(new InvalidArgError(`request body ended after ${received} of ${fixed.length} bytes`));
        } else {
          resolve(fixed);
        }
        return;
      }
      const body = Buffer.allocUnsafeSlow(received);
      let off = 0;
      for (const c of chunks) off += c.copy(body, off);
      resolve(body);
    };
    const onError = (err: Error): void => fail(new CancelledError(`request body could not be read: ${err.message}`));
    const onClose = (): void => fail(new CancelledError('client closed the connection while sending the body'));
    req.on('data', onData);
    req.on('end', onEnd);
    req.on('error', onError);
    req.on('close', onClose);
  });
}

/**
 * Whether the request has a body that was left (partly) unread, so the connection cannot be reused for the next
 * request. A request without Content-Length or Transfer-Encoding has no body (RFC 9112 §6.3), whatever `complete`
 * says at the time (Node sets it only once the empty body has been "read").
 */
export function bodyUnread(req: IncomingMessage): boolean {
  const hasBody = req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0;
  return hasBody && !req.complete;
}
