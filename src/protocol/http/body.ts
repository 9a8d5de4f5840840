import type { IncomingMessage } from 'node:http';
import { CancelledError, InvalidArgError } from '../../core/errors.js';
import { tooLargeError, type BodyKind } from './compression.js';

/** Triton's cap on non-empty chunks of a chunked body (L0_http: 10^6 one-byte chunks must not grow RSS). */
export const MAX_CHUNKS = 65536;

/**
 * First allocation for a body; it grows (doubling) as bytes arrive, up to the declared length or the limit. Small, so
 * that a connection that sends headers and stalls costs 64 KiB, not a megabyte (4096 of them: 256 MiB).
 */
const INITIAL_CAPACITY = 64 * 1024;

/**
 * A byte buffer that grows as data arrives: a client that declares 64 MiB and then stalls holds at most about twice
 * what it actually sent, not the declared size (once, a stalled body held 64 MiB per connection for 300 s).
 * Backed by Buffer.allocUnsafeSlow: never Buffer's shared pool, so the result can be transferred to a worker thread.
 */
class GrowingBuffer {
  #buf: Buffer;
  #length = 0;
  constructor(
    initial: number,
    readonly max: number,
  ) {
    this.#buf = Buffer.allocUnsafeSlow(Math.min(initial, max));
  }
  get length(): number {
    return this.#length;
  }
  append(chunk: Buffer): void {
    const need = this.#length + chunk.length;
    if (need > this.#buf.length) {
      const grown = Buffer.allocUnsafeSlow(Math.min(this.max, Math.max(need, this.#buf.length * 2)));
      this.#buf.copy(grown, 0, 0, this.#length);
      this.#buf = grown;
    }
    chunk.copy(this.#buf, this.#length);
    this.#length = need;
  }
  /** The bytes received; no copy when the buffer is exactly full (always so for a complete Content-Length body). */
  bytes(): Uint8Array {
    if (this.#length === this.#buf.length) return this.#buf;
    const out = Buffer.allocUnsafeSlow(this.#length);
    this.#buf.copy(out, 0, 0, this.#length);
    return out;
  }
}

/**
 * Reads a request body into ONE owned ArrayBuffer, so that input tensors can be views of it and the backend can
 * transfer it to a worker thread.
 *
 * Limits are enforced before buffering: a Content-Length over `limit` is refused without reading a byte (Node must
 * not read 2.8 GB to say 400); a chunked body is counted as it arrives and refused when it passes `limit` or
 * MAX_CHUNKS non-empty chunks. Node surfaces body data per parsed piece, not per HTTP chunk, so the chunk count is an
 * upper bound of the real one (one chunk split across TCP reads counts twice), which only matters near the cap.
 * Memory follows what arrived, not what was declared (GrowingBuffer).
 *
 * `kind` picks Triton's words for a body over the limit (compression.ts tooLargeError).
 *
 * On rejection nothing more is kept: the stream goes on flowing with no listener, so what still arrives is dropped as
 * it is parsed, and the caller answers with `Connection: close` (see `bodyUnread`), so Node closes the socket once
 * the answer is written (a body that never ends, refused at the 64 MiB limit: the socket closed 3 MiB later, measured).
 * Pausing it instead kept every piece parsed after the refusal, one small Buffer per chunk, until the socket closed:
 * 100 concurrent refused bodies of 10^6 one-byte chunks grew the server by 214 MiB (test/hardening/chunked-body).
 */
export function readBody(req: IncomingMessage, limit: number, kind: BodyKind = 'json'): Promise<Uint8Array> {
  const lengthHeader = req.headers['content-length'];
  const declared = lengthHeader === undefined ? undefined : Number(lengthHeader);
  if (declared !== undefined && declared > limit) return Promise.reject(tooLargeError(declared, limit, kind));
  if (declared === 0 || (declared === undefined && req.complete)) return Promise.resolve(new Uint8Array(0));

  return new Promise<Uint8Array>((resolve, reject) => {
    const body = new GrowingBuffer(INITIAL_CAPACITY, declared ?? limit);
    let nonEmpty = 0;
    const cleanup = (): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onError);
      req.off('close', onClose);
    };
    const fail = (err: Error): void => {
      cleanup();
      // Flowing with no listener: later chunks are dropped, never buffered (see above).
      req.resume();
      reject(err);
    };
    const onData = (chunk: Buffer): void => {
      if (chunk.length === 0) return;
      const received = body.length + chunk.length;
      if (declared !== undefined) {
        // Node's parser never passes more than Content-Length; the check guards the copy anyway.
        if (received > declared) return fail(new InvalidArgError('request body is longer than its Content-Length'));
      } else {
        if (received > limit) return fail(tooLargeError(received, limit, kind));
        if (++nonEmpty > MAX_CHUNKS) {
          return fail(
            new InvalidArgError(
              `Chunked request body exceeds maximum of ${MAX_CHUNKS} non-empty chunks. Send fewer or larger HTTP chunks.`,
            ),
          );
        }
      }
      body.append(chunk);
    };
    const onEnd = (): void => {
      cleanup();
      if (declared !== undefined && body.length !== declared) {
        reject(new InvalidArgError(`request body ended after ${body.length} of ${declared} bytes`));
        return;
      }
      resolve(body.bytes());
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
