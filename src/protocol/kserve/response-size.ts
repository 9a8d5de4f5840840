import type { FixedTypedArray } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import { encodedBytesLength, type Tensor } from '../../core/tensor.js';
import { bf16BitsToFloat, halfBitsToFloat } from '../../core/half.js';
import { bytesElementToJson } from './json-tensor.js';

/**
 * `--max-response-bytes` (Nereid's own): the largest inference response a client can make the server build. An
 * output's size is the client's to choose on some models (a shape input, a generator), and a 256M-element output asked
 * for as JSON once ended the process with a V8 heap out-of-memory. The default is gRPC's largest message (INT32_MAX),
 * so every response Triton could send still goes out; lower it to bound the memory one request can take.
 *
 * Checked twice, both before the memory is spent: against a lower bound of the encoded size before encoding starts
 * (binary and gRPC sizes are exact; JSON counts at least one digit and a comma per number), then exactly, chunk by
 * chunk, while JSON text is written (json-output below never holds more than the budget).
 */
export const DEFAULT_MAX_RESPONSE_BYTES = 2 ** 31 - 1;

/** The refusal: a client error (400 / INVALID_ARGUMENT), raised before the response exists. */
export function responseTooLarge(bytes: number, max: number, how: 'at least' | 'about' | 'exactly'): InvalidArgError {
  return new InvalidArgError(
    `the response would be ${how === 'exactly' ? '' : `${how} `}${bytes} bytes, more than the maximum response size of ${max} bytes (--max-response-bytes); ask for fewer or smaller outputs, or for binary instead of JSON outputs`,
  );
}

/** Exact byte size of an output's binary form (raw data, or BYTES with 4-byte length prefixes). */
export function binaryByteSize(t: Tensor): number {
  return Array.isArray(t.data) ? encodedBytesLength(t.data) : (t.data as FixedTypedArray).byteLength;
}

/** A lower bound of the JSON text of an output's `data` array: `[` `]`, commas, and the shortest value per element. */
export function minJsonByteSize(t: Tensor): number {
  const n = t.data.length;
  if (n === 0) return 2;
  if (Array.isArray(t.data)) return 1 + encodedBytesLength(t.data) - n; // each element: its bytes, "", and a comma
  return 1 + n * (t.datatype === 'BOOL' ? 5 : 2);
}

const SAMPLE_ELEMENTS = 4096;

/**
 * The JSON size of an output's `data`, estimated from up to 4096 evenly spaced elements. Used to refuse, before any
 * encoding, a JSON output that would pass the limit by a clear margin (10 %): a 256M-element FP32 output is refused
 * at once instead of after 2 GiB of text. The exact count during encoding stays the guarantee.
 */
export function estimateJsonByteSize(t: Tensor): number {
  const n = t.data.length;
  if (n <= SAMPLE_ELEMENTS) return minJsonByteSize(t);
  const step = n / SAMPLE_ELEMENTS;
  let bytes = 0;
  for (let k = 0; k < SAMPLE_ELEMENTS; k++) {
    const i = Math.floor(k * step);
    bytes += Buffer.byteLength(sliceText(t, i, i + 1), 'utf8') + 1;
  }
  return Math.round((bytes / SAMPLE_ELEMENTS) * n) + 1;
}

const CHUNK_ELEMENTS = 65536;
/** Encoding yields to the event loop after this much time, so one large JSON output does not stall other clients. */
const YIELD_AFTER_MS = 10;

/** What is left of a response's byte budget; `take` throws the refusal once it is spent. */
export class ResponseBudget {
  #left: number;
  readonly #max: number;
  #used = 0;
  constructor(max: number) {
    this.#max = max;
    this.#left = max;
  }
  take(n: number): void {
    this.#used += n;
    this.#left -= n;
    if (this.#left < 0) throw responseTooLarge(this.#used, this.#max, 'at least');
  }
}

function floatText(values: ArrayLike<number>, from: number, to: number, map?: (bits: number) => number): string {
  const parts = new Array<string>(to - from);
  for (let i = from; i < to; i++) {
    const v = map === undefined ? values[i] : map(values[i]);
    parts[i - from] = Number.isFinite(v) ? String(v) : 'null';
  }
  return parts.join(',');
}

function sliceText(t: Tensor, from: number, to: number): string {
  const data = t.data;
  if (Array.isArray(data)) {
    const parts = new Array<string>(to - from);
    for (let i = from; i < to; i++) parts[i - from] = bytesElementToJson(t.name, i, data[i]);
    return parts.join(',');
  }
  const arr = data as FixedTypedArray;
  switch (t.datatype) {
    case 'BOOL': {
      const parts = new Array<string>(to - from);
      for (let i = from; i < to; i++) parts[i - from] = arr[i] !== 0 ? 'true' : 'false';
      return parts.join(',');
    }
    case 'FP32':
    case 'FP64':
      return floatText(arr as Float32Array, from, to);
    case 'FP16':
      return floatText(arr as Uint16Array, from, to, halfBitsToFloat);
    case 'BF16':
      return floatText(arr as Uint16Array, from, to, bf16BitsToFloat);
    default:
      // Integer arrays (bigint ones included) join to exact decimal digits.
      return Array.prototype.join.call(arr.subarray(from, to), ',');
  }
}

/**
 * Appends the JSON text of `t.data` (a flat array, row-major; the rules of json-tensor.ts `tensorDataToJson`) to
 * `out` in chunks of 64Ki elements, each counted against `budget` as it is made, so a refusal comes before the text
 * outgrows the budget. Yields to the event loop between chunks once it has run for 10 ms.
 */
export async function appendJsonData(t: Tensor, budget: ResponseBudget, out: Buffer[]): Promise<void> {
  const n = t.data.length;
  let started = performance.now();
  const open = Buffer.from('[');
  budget.take(1);
  out.push(open);
  for (let from = 0; from < n; from += CHUNK_ELEMENTS) {
    const to = Math.min(n, from + CHUNK_ELEMENTS);
    const chunk = Buffer.from((from === 0 ? '' : ',') + sliceText(t, from, to), 'utf8');
    budget.take(chunk.byteLength);
    out.push(chunk);
    if (to < n && performance.now() - started > YIELD_AFTER_MS) {
      await new Promise<void>((resolve) => setImmediate(resolve));
      started = performance.now();
    }
  }
  budget.take(1);
  out.push(Buffer.from(']'));
}
