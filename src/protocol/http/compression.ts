import { promisify } from 'node:util';
import zlib from 'node:zlib';
import { InvalidArgError, UnsupportedError } from '../../core/errors.js';

/** Content codings Nereid reads and writes (Triton's set). */
export type Coding = 'gzip' | 'deflate';

const gunzip = promisify(zlib.gunzip);
const inflate = promisify(zlib.inflate);
const gzip = promisify(zlib.gzip);
const deflate = promisify(zlib.deflate);

/** Responses smaller than this go out uncompressed: the gzip header and a zlib round trip cost more than they save. */
export const MIN_COMPRESS_BYTES = 1024;

/**
 * The request body's coding from `Content-Encoding`; undefined for none/identity. Anything else is UNSUPPORTED
 * ("Unsupported compression type", 501), answered before the body is read.
 */
export function requestCoding(header: string | undefined): Coding | undefined {
  const v = header?.trim().toLowerCase();
  if (v === undefined || v === '' || v === 'identity') return undefined;
  if (v === 'gzip' || v === 'x-gzip') return 'gzip';
  if (v === 'deflate') return 'deflate';
  throw new UnsupportedError(`Unsupported compression type '${header}'. Supported: gzip, deflate`);
}

/** The response coding for an `Accept-Encoding` header: gzip preferred, then deflate; q=0 means refused. */
export function responseCoding(header: string | undefined): Coding | undefined {
  if (header === undefined) return undefined;
  const accepted = new Set<string>();
  for (const part of header.split(',')) {
    const [token, ...params] = part.trim().toLowerCase().split(';');
    const q = params.map((p) => p.trim()).find((p) => p.startsWith('q='));
    if (q !== undefined && Number(q.slice(2)) === 0) continue;
    accepted.add(token.trim());
  }
  if (accepted.has('gzip') || accepted.has('x-gzip')) return 'gzip';
  if (accepted.has('deflate')) return 'deflate';
  return undefined;
}

/** How a body over `--http-max-input-size` is named in the answer; Triton words each its own way (http_server.cc). */
export type BodyKind = 'json' | 'raw' | 'compressed';

/**
 * The answer to a body over the limit, in Triton's words for its kind: a JSON (+ binary) body gives its size
 * (EVBufferToJson), a raw binary body its byte size (EVBufferToRawInput), a compressed body none: Triton stops
 * inflating at the limit (DataCompressor), and so does Nereid. `size` is the bytes received when a chunked body
 * passed the limit, a lower bound of its length.
 */
export function tooLargeError(size: number, limit: number, kind: BodyKind = 'json'): InvalidArgError {
  const hint = 'Use --http-max-input-size to increase the limit.';
  if (kind === 'compressed') {
    return new InvalidArgError(`Decompressed data size exceeds the maximum allowed value of ${limit} bytes. ${hint}`);
  }
  if (kind === 'raw') {
    return new InvalidArgError(
      `Raw input has a byte_size (${size} bytes) that exceeds the maximum allowed value of ${limit} bytes. ${hint}`,
    );
  }
  return new InvalidArgError(
    `request JSON size of ${size} bytes exceeds the maximum allowed input size of ${limit} bytes. ${hint}`,
  );
}

/**
 * Decompresses a request body, refusing output beyond `limit` bytes without producing it (zlib's maxOutputLength
 * stops a gzip bomb early). The result owns its ArrayBuffer (never Buffer's shared pool) so tensors viewing it can be
 * transferred to worker threads.
 */
export async function decompress(body: Uint8Array, coding: Coding, limit: number): Promise<Uint8Array> {
  let out: Buffer;
  try {
    out = await (coding === 'gzip' ? gunzip : inflate)(body, { maxOutputLength: Math.max(1, limit) });
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ERR_BUFFER_TOO_LARGE') throw tooLargeError(0, limit, 'compressed');
    throw new InvalidArgError(`failed to decompress the request body (${coding}): ${(err as Error).message}`, {
      cause: err,
    });
  }
  if (out.byteOffset === 0 && out.buffer.byteLength === out.byteLength) return out;
  const owned = new Uint8Array(out.byteLength);
  owned.set(out);
  return owned;
}

/** Compresses a response body. */
export function compress(body: Uint8Array, coding: Coding): Promise<Buffer> {
  return coding === 'gzip' ? gzip(body) : deflate(body);
}
