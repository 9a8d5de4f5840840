/**
 * Framing of the control channel: each frame is a 4-byte little-endian length, then that many bytes of UTF-8
 * JSON (one message object). Tensors never travel here, only their places in shared memory, so frames are small
 * and JSON costs a few microseconds a side (measured: see bench/process-transport.ts).
 */

/** Frames larger than this are a protocol violation (a corrupted or hostile stream), not data to buffer. */
export const MAX_FRAME_BYTES = 64 * 1024 * 1024;

/** One frame holding `msg`. */
export function encodeFrame(msg: unknown): Buffer {
  const json = JSON.stringify(msg);
  const n = Buffer.byteLength(json);
  const out = Buffer.allocUnsafe(4 + n);
  out.writeUInt32LE(n, 0);
  out.write(json, 4, 'utf8');
  return out;
}

/** Splits a byte stream into messages. Throws on a frame over MAX_FRAME_BYTES or JSON that does not parse. */
export class FrameDecoder {
  #pending: Buffer | undefined;

  /** The messages completed by `chunk`, in order. */
  push(chunk: Buffer): unknown[] {
    let buf = this.#pending === undefined ? chunk : Buffer.concat([this.#pending, chunk]);
    const out: unknown[] = [];
    let pos = 0;
    while (buf.length - pos >= 4) {
      const n = buf.readUInt32LE(pos);
      if (n > MAX_FRAME_BYTES) throw new Error(`control frame of ${n} bytes exceeds ${MAX_FRAME_BYTES}`);
      if (buf.length - pos - 4 < n) break;
      out.push(JSON.parse(buf.toString('utf8', pos + 4, pos + 4 + n)));
      pos += 4 + n;
    }
    if (pos < buf.length) {
      buf = buf.subarray(pos);
      // Keep a copy: `chunk` belongs to the stream and may be reused by it.
      this.#pending = this.#pending === undefined ? Buffer.from(buf) : buf;
    } else {
      this.#pending = undefined;
    }
    return out;
  }
}
