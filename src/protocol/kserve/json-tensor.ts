import { DATATYPES, type DataType, type FixedTypedArray } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import type { BytesData, Tensor, TensorData } from '../../core/tensor.js';
import { bf16BitsToFloat, floatToBf16Bits, floatToHalfBits, halfBitsToFloat } from '../../core/half.js';

/**
 * KServe JSON tensor `data` ↔ Nereid tensor data, shared by every protocol that carries JSON (HTTP now; a REST
 * gateway later). Rules, with our deviations from Triton:
 * - `data` is flat or nested (any nesting, row-major); only the total element count is checked against the shape,
 *   as Triton does. Nesting deeper than {@link MAX_JSON_DEPTH} is refused (Triton's limit and wording).
 * - BOOL is a JSON boolean; BYTES a JSON string (its UTF-8 bytes). A BYTES output that is not UTF-8 is refused
 *   (400) rather than written raw into the JSON as Triton does (which makes its body invalid JSON).
 * - Integers must be exact and in range for their datatype (Triton's HTTP front end wraps 2^40 into INT32); the same
 *   conversion serves `/generate`.
 * - INT64/UINT64: JSON numbers, exact up to 2^53. {@link parseJson} keeps larger integer literals exact (as bigint)
 *   where the runtime exposes the literal's source text (Node ≥ 22, or `--harmony-json-parse-with-source`); on Node 20
 *   they arrive rounded. As an extension a decimal JSON string ("9007199254740993") is accepted and always exact.
 * - FP16/BF16 are accepted as JSON numbers (Triton refuses them) and rounded to nearest-even; responses carry them
 *   as numbers.
 * - Responses write non-finite floats as `null` (strict JSON; numpy turns `None` into NaN in float arrays).
 */

/** Maximum nesting of a `data` array (Triton: "JSON nesting depth exceeds maximum allowed limit (100)"). */
export const MAX_JSON_DEPTH = 100;

const INT_RANGES: Partial<Record<DataType, readonly [number, number]>> = {
  INT8: [-0x80, 0x7f],
  INT16: [-0x8000, 0x7fff],
  INT32: [-0x80000000, 0x7fffffff],
  UINT8: [0, 0xff],
  UINT16: [0, 0xffff],
  UINT32: [0, 0xffffffff],
};
const INT64_RANGE: readonly [bigint, bigint] = [-(2n ** 63n), 2n ** 63n - 1n];
const UINT64_RANGE: readonly [bigint, bigint] = [0n, 2n ** 64n - 1n];

// Whether JSON.parse hands revivers the literal's source text (TC39 "JSON.parse source text access").
const HAS_JSON_SOURCE = ((): boolean => {
  let ok = false;
  const probe = (_k: string, v: unknown, ctx?: { source?: string }): unknown => {
    ok = typeof ctx?.source === 'string';
    return v;
  };
  JSON.parse('1', probe as (k: string, v: unknown) => unknown);
  return ok;
})();
const LONG_DIGITS = /\d{16}/;
const INTEGER_TEXT = /^-?\d+$/;

/**
 * JSON.parse that keeps integer literals beyond 2^53 exact (as bigint) where the runtime allows it. The reviver
 * (slow) only runs when the text holds a 16+ digit run, so ordinary requests parse at full JSON.parse speed.
 */
export function parseJson(text: string): unknown {
  if (!HAS_JSON_SOURCE || !LONG_DIGITS.test(text)) return JSON.parse(text);
  const reviver = (_k: string, v: unknown, ctx?: { source?: string }): unknown =>
    typeof v === 'number' && !Number.isSafeInteger(v) && ctx?.source !== undefined && INTEGER_TEXT.test(ctx.source)
      ? BigInt(ctx.source)
      : v;
  return JSON.parse(text, reviver as (k: string, v: unknown) => unknown);
}

function kindOf(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  return typeof v;
}

/**
 * Flattens nested `data` row-major, refusing nesting beyond MAX_JSON_DEPTH (an iterative walk: a value nested 10^5
 * deep must be a 400, not a stack overflow). `expected`, when known, lets an already flat array pass untouched.
 */
export function flattenJsonData(name: string, data: unknown[], expected?: number): unknown[] {
  // Fast path: already flat (the common case from tritonclient, which sends flattened arrays).
  if (expected !== undefined && data.length === expected && (expected === 0 || !Array.isArray(data[0]))) return data;
  const out: unknown[] = [];
  const stack: { arr: unknown[]; at: number }[] = [{ arr: data, at: 0 }];
  while (stack.length > 0) {
    const top = stack[stack.length - 1];
    if (top.at === top.arr.length) {
      stack.pop();
      continue;
    }
    const v = top.arr[top.at++];
    if (!Array.isArray(v)) {
      out.push(v);
    } else if (stack.length >= MAX_JSON_DEPTH) {
      throw new InvalidArgError(
        `unable to parse 'data' for input '${name}': JSON nesting depth exceeds maximum allowed limit (${MAX_JSON_DEPTH})`,
      );
    } else {
      stack.push({ arr: v, at: 0 });
    }
  }
  return out;
}

function expectNumber(name: string, v: unknown): number {
  if (typeof v === 'number') return v;
  if (typeof v === 'bigint') return Number(v);
  throw new InvalidArgError(`input '${name}': expected a number, got ${kindOf(v)}`);
}

function expectBigInt(name: string, datatype: DataType, v: unknown): bigint {
  let b: bigint;
  if (typeof v === 'bigint') b = v;
  else if (typeof v === 'number' && Number.isInteger(v)) b = BigInt(v);
  else if (typeof v === 'string' && INTEGER_TEXT.test(v)) b = BigInt(v);
  else if (typeof v === 'number') throw new InvalidArgError(`input '${name}': expected an integer, got ${v}`);
  else throw new InvalidArgError(`input '${name}': expected a number, got ${kindOf(v)}`);
  const [lo, hi] = datatype === 'INT64' ? INT64_RANGE : UINT64_RANGE;
  if (b < lo || b > hi) throw new InvalidArgError(`input '${name}': value ${b} is out of range for ${datatype}`);
  return b;
}

function encodeStrings(name: string, values: readonly unknown[]): BytesData {
  let total = 0;
  for (const v of values) {
    if (typeof v !== 'string') throw new InvalidArgError(`input '${name}': expected a string, got ${kindOf(v)}`);
    total += Buffer.byteLength(v, 'utf8');
  }
  // One allocation for all elements (not Buffer's shared pool: tensors may be transferred to worker threads).
  const buf = new Uint8Array(total);
  const encoder = new TextEncoder();
  const out: BytesData = new Array(values.length);
  let off = 0;
  for (let i = 0; i < values.length; i++) {
    const { written } = encoder.encodeInto(values[i] as string, buf.subarray(off));
    out[i] = buf.subarray(off, off + written);
    off += written;
  }
  return out;
}

/**
 * Converts the JSON `data` of input `name` into tensor data of `datatype` for `shape`. Throws INVALID_ARG naming the
 * input for a wrong element type, an out-of-range integer, a count that does not match the shape, or deep nesting.
 */
export function jsonToTensorData(
  name: string,
  datatype: DataType,
  shape: readonly number[],
  data: unknown,
): TensorData {
  if (!Array.isArray(data)) {
    throw new InvalidArgError(`unable to parse 'data' for input '${name}': expected an array, got ${kindOf(data)}`);
  }
  let expected = 1;
  for (const d of shape) expected *= d;
  const values = flattenJsonData(name, data, expected);
  if (values.length !== expected) {
    throw new InvalidArgError(
      `unable to parse 'data' for input '${name}': shape [${shape.join(',')}] needs ${expected} elements, got ${values.length}`,
    );
  }
  return jsonValuesToTensorData(name, datatype, values);
}

/**
 * Converts flat JSON values to tensor data of `datatype`: the one conversion, with one set of checks and messages,
 * for every JSON route (`/infer` through {@link jsonToTensorData}, `/generate` directly). Integers must be exact
 * and in range (never wrapped or truncated); BOOL takes booleans, BYTES strings.
 */
export function jsonValuesToTensorData(name: string, datatype: DataType, values: readonly unknown[]): TensorData {
  if (datatype === 'BYTES') return encodeStrings(name, values);
  const Ctor = DATATYPES[datatype].array;
  if (Ctor === undefined) throw new InvalidArgError(`input '${name}': unsupported datatype ${datatype}`);
  const n = values.length;
  const out = new Ctor(n);
  switch (datatype) {
    case 'BOOL':
      for (let i = 0; i < n; i++) {
        const v = values[i];
        if (typeof v !== 'boolean') throw new InvalidArgError(`input '${name}': expected a boolean, got ${kindOf(v)}`);
        out[i] = v ? 1 : 0;
      }
      return out;
    case 'INT64':
    case 'UINT64':
      for (let i = 0; i < n; i++) out[i] = expectBigInt(name, datatype, values[i]);
      return out;
    case 'FP32':
    case 'FP64':
      for (let i = 0; i < n; i++) out[i] = expectNumber(name, values[i]);
      return out;
    case 'FP16':
      for (let i = 0; i < n; i++) out[i] = floatToHalfBits(expectNumber(name, values[i]));
      return out;
    case 'BF16':
      for (let i = 0; i < n; i++) out[i] = floatToBf16Bits(expectNumber(name, values[i]));
      return out;
    default: {
      const [lo, hi] = INT_RANGES[datatype] as readonly [number, number];
      for (let i = 0; i < n; i++) {
        const v = expectNumber(name, values[i]);
        if (!Number.isInteger(v)) throw new InvalidArgError(`input '${name}': expected an integer, got ${v}`);
        if (v < lo || v > hi) throw new InvalidArgError(`input '${name}': value ${v} is out of range for ${datatype}`);
        out[i] = v;
      }
      return out;
    }
  }
}

// Strict: a BYTES element that is not UTF-8 must not become U+FFFD in a 200. ignoreBOM keeps a leading U+FEFF (the
// default decoder drops it, silently changing the element).
const STRICT_UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * The JSON string literal of element `index` of BYTES output `output`. Throws INVALID_ARG (400) when the bytes are
 * not UTF-8: a JSON string cannot carry them. Triton itself writes such bytes raw into its JSON (its body is then not
 * valid JSON), and tritonclient fails the call with "Failed to encode using UTF-8. Please use binary_data=True, if
 * you want to pass a byte array"; Nereid refuses on the server with that advice, as it refuses FP16 output as JSON.
 */
export function bytesElementToJson(output: string, index: number, bytes: Uint8Array): string {
  let text: string;
  try {
    text = STRICT_UTF8.decode(bytes);
  } catch {
    throw new InvalidArgError(
      `Failed to encode output '${output}' using UTF-8: element ${index} is not valid UTF-8, so it cannot be a JSON string. Please use binary_data=True (the output's 'binary_data' parameter), if you want to pass a byte array`,
    );
  }
  return JSON.stringify(text);
}

function floatsToJson(values: ArrayLike<number>, map?: (bits: number) => number): string {
  const parts = new Array<string>(values.length);
  for (let i = 0; i < values.length; i++) {
    const v = map === undefined ? values[i] : map(values[i]);
    parts[i] = Number.isFinite(v) ? String(v) : 'null';
  }
  return parts.join(',');
}

/**
 * The JSON text of a tensor's flat `data` array (row-major). Written by hand rather than via JSON.stringify so that
 * INT64/UINT64 print exactly (bigint digits) and typed arrays need no intermediate JS array.
 */
export function tensorDataToJson(t: Tensor): string {
  const data = t.data;
  if (Array.isArray(data)) return `[${data.map((e, i) => bytesElementToJson(t.name, i, e)).join(',')}]`;
  const arr = data as FixedTypedArray;
  switch (t.datatype) {
    case 'BOOL':
      return `[${Array.from(arr as Uint8Array, (v) => (v !== 0 ? 'true' : 'false')).join(',')}]`;
    case 'FP32':
    case 'FP64':
      return `[${floatsToJson(arr as Float32Array)}]`;
    case 'FP16':
      return `[${floatsToJson(arr as Uint16Array, halfBitsToFloat)}]`;
    case 'BF16':
      return `[${floatsToJson(arr as Uint16Array, bf16BitsToFloat)}]`;
    default:
      // Integer arrays (bigint ones included) join to exact decimal digits.
      return `[${Array.prototype.join.call(arr, ',')}]`;
  }
}
