import koffi from 'koffi';
import { ortApi, type Ptr } from './api.js';

/**
 * Native handles on the hot path as plain addresses (JavaScript numbers), and the pointer arrays `Run` reads, in
 * native memory written as numbers.
 *
 * Why: a pointer koffi hands back is an External with a finalizer, and a JavaScript array of them is converted
 * element by element on every call. A `simple` request made four OrtValues and three such arrays: koffi's
 * pointer marshalling and the finalizers the garbage collector then ran were ~10 % of the server's CPU per request
 * (perf, 2-core machine). An address passes to a binding that takes it as an integer (`uintptr_t`), or becomes a
 * pointer object where a rare path needs one; user-space addresses (< 2^47) are exact in a double.
 */

/** An OrtValue (or other native object) as koffi's pointer object or as its address. */
export type Handle = Ptr | number;

const TWO_32 = 2 ** 32;

/** The address of a handle. */
export function addressOf(h: Handle): number {
  return typeof h === 'number' ? h : Number(koffi.address(h));
}

/**
 * A handle as koffi's pointer object, for bindings declared with `void*`: koffi reads a number given for a pointer
 * as 32 bits (an OrtValue above 4 GiB crashed), so an address must become a pointer object first, or go to a
 * binding that takes it as an integer (`releaseValue`).
 */
export function pointerOf(h: Handle): Ptr {
  return typeof h === 'number' ? (koffi.decode(BigUint64Array.of(BigInt(h)), 'void *') as Ptr) : h;
}

let releaseAt: ((address: number) => void) | undefined;

/** ReleaseValue for either form of handle; an address goes as a 64-bit integer (no pointer object is made). */
export function releaseValue(h: Handle): void {
  const api = ortApi();
  if (typeof h !== 'number') return api.ReleaseValue(h);
  releaseAt ??= api.ReleaseValueAt as (address: number) => void;
  releaseAt(h);
}

/**
 * Pointers in native layout (`T* const*` for the C API) in memory of its own outside the JavaScript heap, written and
 * read as numbers: the Uint32 halves of each 64-bit slot (little-endian, as every platform onnxruntime ships for),
 * so no BigInt is made per element. Native memory because koffi's asynchronous calls do not pass a TypedArray's own
 * bytes through to the pool thread (a Run given one crashed); `pointer` is the same on every call and thread.
 * Freed with `free()`; never used after.
 */
export class PointerArray {
  readonly pointer: Ptr;
  readonly length: number;
  readonly #halves: Uint32Array;

  constructor(length: number) {
    this.length = Math.max(length, 1);
    this.pointer = koffi.alloc('uint64_t', this.length) as Ptr;
    this.#halves = new Uint32Array(koffi.view(this.pointer, this.length * 8));
  }

  set(i: number, address: number): void {
    this.#halves[2 * i] = address % TWO_32;
    this.#halves[2 * i + 1] = Math.floor(address / TWO_32);
  }

  /** The address in slot `i`; 0 for a null pointer. */
  get(i: number): number {
    return this.#halves[2 * i] + this.#halves[2 * i + 1] * TWO_32;
  }

  free(): void {
    koffi.free(this.pointer);
  }
}
