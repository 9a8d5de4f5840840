import { DATATYPES, type DataType, type FixedTypedArray } from './datatypes.js';
import type { DeviceBuffer } from './device.js';
import { InvalidArgError } from './errors.js';

/** A BYTES tensor's elements, each its raw bytes. */
export type BytesData = Uint8Array[];
export type TensorData = FixedTypedArray | BytesData;

/** A named tensor with its KServe datatype. `shape` is the full shape, batch dimension included. */
export interface Tensor {
  name: string;
  datatype: DataType;
  shape: number[];
  data: TensorData;
  /**
   * Set when the bytes live in device memory (client CUDA shared memory, fixed-size datatypes only): `data` is then
   * empty. Only an engine whose instance takes that device sees such a tensor (core/device.ts says who owns it).
   */
  device?: DeviceBuffer;
}

/** Elements in `shape`, checked: every dim a non-negative safe integer and the product safe. */
export function elementCount(shape: readonly number[], what = 'tensor'): number {
  let n = 1;
  for (const d of shape) {
    if (!Number.isSafeInteger(d) || d < 0) {
      throw new InvalidArgError(`${what}: invalid shape [${shape.join(',')}]: dims must be non-negative integers`);
    }
    n *= d;
    if (!Number.isSafeInteger(n)) {
      throw new InvalidArgError(`${what}: shape [${shape.join(',')}] has too many elements`);
    }
  }
  return n;
}

/**
 * Views `bytes` (little-endian, row-major) as the TypedArray of `datatype`. No copy when the offset is
 * aligned; one copy when it is not (TypedArrays need aligned offsets). The caller checked the byte length.
 */
export function viewFixed(datatype: DataType, bytes: Uint8Array): FixedTypedArray {
  const info = DATATYPES[datatype];
  const Ctor = info.array;
  if (Ctor === undefined) throw new InvalidArgError(`datatype ${datatype} has no fixed-size representation`);
  const size = Ctor.BYTES_PER_ELEMENT;
  if (bytes.byteLength % size !== 0) {
    throw new InvalidArgError(`byte length ${bytes.byteLength} is not a multiple of ${size} for ${datatype}`);
  }
  if (bytes.byteOffset % size === 0) {
    return new Ctor(bytes.buffer, bytes.byteOffset, bytes.byteLength / size);
  }
  const copy = new Uint8Array(bytes.byteLength);
  copy.set(bytes);
  return new Ctor(copy.buffer, 0, bytes.byteLength / size);
}

/** The bytes of a fixed-size tensor (a view, no copy). */
export function fixedBytes(data: FixedTypedArray): Uint8Array {
  return new Uint8Array(data.buffer, data.byteOffset, data.byteLength);
}

/**
 * Decodes Triton's BYTES wire form (per element: 4-byte little-endian length, then the bytes).
 * Elements are views into `buf`. Throws INVALID_ARG naming the tensor when a prefix runs past the data
 * or the count differs from `expected`.
 */
export function decodeBytes(buf: Uint8Array, expected: number, name: string): BytesData {
  const out: BytesData = new Array(expected);
  const dv = new DataView(buf.buffer, buf.byteOffset, buf.byteLength);
  let off = 0;
  let i = 0;
  while (off < buf.byteLength) {
    if (buf.byteLength - off < 4) {
      throw new InvalidArgError(
        `input '${name}': incomplete string length indicator, expecting 4 bytes but only ${buf.byteLength - off} bytes available`,
      );
    }
    const len = dv.getUint32(off, true);
    off += 4;
    if (len > buf.byteLength - off) {
      throw new InvalidArgError(
        `input '${name}': string element ${i} has length ${len} but only ${buf.byteLength - off} bytes remain`,
      );
    }
    if (i >= expected) {
      throw new InvalidArgError(`input '${name}': more than the ${expected} string elements its shape holds`);
    }
    out[i++] = buf.subarray(off, off + len);
    off += len;
  }
  if (i !== expected) {
    throw new InvalidArgError(`input '${name}': expected ${expected} string elements, got ${i}`);
  }
  return out;
}

/** Byte length of the BYTES wire form of `data`. */
export function encodedBytesLength(data: BytesData): number {
  let n = 0;
  for (const e of data) n += 4 + e.byteLength;
  return n;
}

/** Encodes BYTES elements into Triton's wire form, into `out` at `offset` (allocated when absent). */
export function encodeBytes(data: BytesData, out?: Uint8Array, offset = 0): Uint8Array {
  const target = out ?? new Uint8Array(encodedBytesLength(data));
  const dv = new DataView(target.buffer, target.byteOffset, target.byteLength);
  let off = offset;
  for (const e of data) {
    dv.setUint32(off, e.byteLength, true);
    target.set(e, off + 4);
    off += 4 + e.byteLength;
  }
  return target;
}

/** Wire byte size of a tensor's data. */
export function tensorByteSize(t: Tensor): number {
  return Array.isArray(t.data) ? encodedBytesLength(t.data) : (t.data as FixedTypedArray).byteLength;
}
