import { DATATYPES, type DataType, type FixedTypedArray } from '../core/datatypes.js';
import { InvalidArgError } from '../core/errors.js';
import { decodeBytes, elementCount, encodeBytes, fixedBytes, viewFixed } from '../core/tensor.js';
import { floatToBf16Bits, floatToHalfBits } from '../core/half.js';
import type { InferInputTensor, InputData } from './types.js';

/**
 * Tensor data ↔ wire forms, shared by the HTTP and gRPC clients: the raw little-endian bytes of Triton's binary
 * tensor extension and gRPC raw contents, and KServe JSON `data`. Checks happen here, before anything is sent, so a
 * mismatched array fails with a message naming the tensor instead of an opaque server error.
 */

/** An input whose data is in wire-ready form: a TypedArray, or BYTES elements as Uint8Arrays. */
export interface WireInput {
  name: string;
  datatype: DataType;
  shape: number[];
  data: FixedTypedArray | Uint8Array[];
}

const utf8 = new TextEncoder();

/**
 * Encodes BYTES elements (strings as UTF-8, or raw bytes) into Triton's wire form: per element a 4-byte
 * little-endian length, then the bytes. This is what binary HTTP blobs and gRPC raw contents carry.
 */
export function encodeBytesTensor(values: readonly (string | Uint8Array)[]): Uint8Array {
  return encodeBytes(values.map((v) => (typeof v === 'string' ? utf8.encode(v) : v)));
}

/**
 * Decodes Triton's BYTES wire form into its elements (views into `wire`). With `count`, the element count must
 * match; without it, every element in the buffer is returned.
 */
export function decodeBytesTensor(wire: Uint8Array, count?: number, name = 'BYTES tensor'): Uint8Array[] {
  if (count !== undefined) return decodeBytes(wire, count, name);
  let n = 0;
  const dv = new DataView(wire.buffer, wire.byteOffset, wire.byteLength);
  for (let off = 0; off + 4 <= wire.byteLength; n++) off += 4 + dv.getUint32(off, true);
  return decodeBytes(wire, n, name);
}

/** BYTES elements as text (UTF-8; invalid sequences become U+FFFD). */
export function bytesToStrings(values: readonly Uint8Array[]): string[] {
  const decoder = new TextDecoder();
  return values.map((v) => decoder.decode(v));
}

/** Checks an input's data against its datatype and shape, and encodes strings; throws InvalidArgError naming it. */
export function toWireInput(t: InferInputTensor): WireInput {
  const where = `input '${t.name}'`;
  const info = DATATYPES[t.datatype];
  if (info === undefined) throw new InvalidArgError(`${where}: unknown datatype '${String(t.datatype)}'`);
  const count = elementCount(t.shape, where);
  let data: FixedTypedArray | Uint8Array[];
  if (info.array === undefined) {
    if (!Array.isArray(t.data)) {
      throw new InvalidArgError(`${where}: BYTES data must be an array of strings or Uint8Arrays`);
    }
    data = (t.data as (string | Uint8Array)[]).map((v) => (typeof v === 'string' ? utf8.encode(v) : v));
  } else {
    if (!(t.data instanceof info.array)) {
      throw new InvalidArgError(`${where}: ${t.datatype} data must be a ${info.array.name}, got ${describe(t.data)}`);
    }
    data = t.data;
  }
  if (data.length !== count) {
    throw new InvalidArgError(`${where}: shape [${t.shape.join(',')}] needs ${count} elements, got ${data.length}`);
  }
  return { name: t.name, datatype: t.datatype, shape: [...t.shape], data };
}

function describe(data: InputData): string {
  return Array.isArray(data) ? 'an array' : data.constructor.name;
}

/** The wire bytes of tensor data (a view for fixed-size data; one allocation for BYTES). */
export function wireBytes(data: FixedTypedArray | Uint8Array[]): Uint8Array {
  return Array.isArray(data) ? encodeBytes(data) : fixedBytes(data);
}

/** Tensor data from its wire bytes, checked against the shape (no copy unless the offset is misaligned). */
export function fromWireBytes(
  name: string,
  datatype: DataType,
  shape: readonly number[],
  bytes: Uint8Array,
): FixedTypedArray | Uint8Array[] {
  const count = elementCount(shape, `output '${name}'`);
  if (datatype === 'BYTES') return decodeBytes(bytes, count, `output '${name}'`);
  const size = DATATYPES[datatype]?.byteSize;
  if (size === undefined) throw new InvalidArgError(`output '${name}': unknown datatype '${datatype}'`);
  if (bytes.byteLength !== count * size) {
    throw new InvalidArgError(
      `output '${name}': shape [${shape.join(',')}] of ${datatype} needs ${count * size} bytes, got ${bytes.byteLength}`,
    );
  }
  return viewFixed(datatype, bytes);
}

/**
 * The JSON text of `data` (flat, row-major). By hand, because JSON.stringify cannot print bigint and would need an
 * intermediate array for every typed array. BYTES must be valid UTF-8 to travel as a JSON string.
 */
export function toJsonData(t: WireInput): string {
  const data = t.data;
  if (Array.isArray(data)) {
    const decoder = new TextDecoder('utf-8', { fatal: true });
    return `[${data
      .map((e) => {
        try {
          return JSON.stringify(decoder.decode(e));
        } catch (err) {
          throw new InvalidArgError(`input '${t.name}': BYTES element is not UTF-8; send it with binary: true`, {
            cause: err,
          });
        }
      })
      .join(',')}]`;
  }
  if (t.datatype === 'BOOL')
    return `[${Array.from(data as Uint8Array, (v) => (v !== 0 ? 'true' : 'false')).join(',')}]`;
  if (t.datatype === 'FP32' || t.datatype === 'FP64') {
    for (const v of data as Float64Array) {
      if (!Number.isFinite(v)) {
        throw new InvalidArgError(`input '${t.name}': ${v} has no JSON form; send it with binary: true`);
      }
    }
  }
  // Integer arrays (bigint ones included) and finite floats join to their exact decimal digits.
  return `[${Array.prototype.join.call(data, ',')}]`;
}

function flatten(data: unknown[]): unknown[] {
  return data.some(Array.isArray) ? (data.flat(Infinity) as unknown[]) : data;
}

/**
 * Tensor data from KServe JSON `data` (flat or nested). INT64/UINT64 beyond 2^53 are exact where the response was
 * parsed with the literals' text (http-codec.ts, Node >= 21: they arrive as bigint); older runtimes round them, and
 * binary data is exact everywhere. `null` floats (NaN/Inf) become NaN.
 */
export function fromJsonData(
  name: string,
  datatype: DataType,
  shape: readonly number[],
  raw: unknown,
): FixedTypedArray | Uint8Array[] {
  if (!Array.isArray(raw)) throw new InvalidArgError(`output '${name}': 'data' is not an array`);
  const values = flatten(raw);
  const count = elementCount(shape, `output '${name}'`);
  if (values.length !== count) {
    throw new InvalidArgError(
      `output '${name}': shape [${shape.join(',')}] needs ${count} elements, got ${values.length}`,
    );
  }
  if (datatype === 'BYTES') return values.map((v) => utf8.encode(String(v)));
  const Ctor = DATATYPES[datatype]?.array;
  if (Ctor === undefined) throw new InvalidArgError(`output '${name}': unknown datatype '${datatype}'`);
  const out = new Ctor(count);
  const num = (v: unknown): number => (v === null ? NaN : Number(v));
  for (let i = 0; i < count; i++) {
    const v = values[i];
    switch (datatype) {
      case 'BOOL':
        out[i] = v === true || v === 1 ? 1 : 0;
        break;
      case 'INT64':
      case 'UINT64':
        out[i] = typeof v === 'bigint' ? v : BigInt(typeof v === 'string' ? v : Math.trunc(num(v)));
        break;
      case 'FP16':
        out[i] = floatToHalfBits(num(v));
        break;
      case 'BF16':
        out[i] = floatToBf16Bits(num(v));
        break;
      default:
        out[i] = num(v);
    }
  }
  return out;
}
