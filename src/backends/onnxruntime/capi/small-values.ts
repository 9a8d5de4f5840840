import { DATATYPES, type DataType, type FixedTypedArray } from '../../../core/datatypes.js';
import type { Tensor } from '../../../core/tensor.js';
import type { Ptr } from './api.js';
import { releaseValue } from './handles.js';
import { createOutput, type InputValue, type OutputBuffer } from './tensors.js';

/**
 * OrtValues made once per tensor name and shape, over memory of their own, for a runner's small host tensors: a
 * small input is copied into its value's memory and a small output copied out of it, instead of an OrtValue made
 * and released around every run.
 *
 * Why: making an OrtValue through koffi and releasing it costs ~2.5 µs; copying 64 bytes costs nothing, and a
 * `simple` request made four (a fifth of its engine time, profiled). Past SMALL_MAX_BYTES a copy would cost more
 * than the value it saves, so those keep borrowing the request's memory.
 *
 * Ownership: one per runner, which runs one batch at a time, so a value's memory serves one run at a time; the
 * answers get copies, never this memory. Bounded: at most CAPACITY values (the oldest released first), all released
 * with the runner.
 */

/** Tensors up to this size are copied through a cached value. */
export const SMALL_MAX_BYTES = 16 * 1024;
/** Values kept per runner (a model with a few inputs and outputs at each batch size fits many times over). */
const CAPACITY = 128;

interface Cached {
  value: number;
  /** The value's memory, as bytes. */
  bytes: Uint8Array;
  buffer: OutputBuffer;
}

export class SmallValues {
  readonly #memoryInfo: Ptr;
  readonly #values = new Map<string, Cached>();

  constructor(memoryInfo: Ptr) {
    this.#memoryInfo = memoryInfo;
  }

  /** The input's value with its data copied in, or undefined when the input is not a small, well-formed host tensor. */
  input(t: Tensor): InputValue | undefined {
    const data = t.data;
    if (Array.isArray(data) || t.device !== undefined) return undefined;
    const view = data as FixedTypedArray;
    const bytes = view.byteLength;
    if (bytes === 0 || bytes > SMALL_MAX_BYTES) return undefined;
    const count = t.shape.reduce((a, b) => a * b, 1);
    if (view.length !== count || count * DATATYPES[t.datatype].byteSize !== bytes) return undefined;
    const c = this.#get('in', t.name, t.datatype, t.shape);
    c.bytes.set(new Uint8Array(view.buffer, view.byteOffset, bytes));
    return { value: c.value, borrowed: c.bytes, cached: true };
  }

  /** A preallocated output of this shape in a cached value, or undefined when it is not small. */
  output(name: string, datatype: DataType, shape: readonly number[]): OutputBuffer | undefined {
    const info = DATATYPES[datatype];
    if (info.array === undefined) return undefined;
    const bytes = shape.reduce((a, b) => a * b, 1) * info.byteSize;
    if (bytes === 0 || bytes > SMALL_MAX_BYTES) return undefined;
    return this.#get('out', name, datatype, shape).buffer;
  }

  /** The answer's own copy of a cached output's bytes (the cached memory serves the next run). */
  static copyOut(b: OutputBuffer): Tensor {
    const src = b.tensor.data as FixedTypedArray;
    const Ctor = DATATYPES[b.tensor.datatype].array!;
    const data = new Ctor(src.length);
    new Uint8Array(data.buffer).set(new Uint8Array(src.buffer, src.byteOffset, src.byteLength));
    return { name: b.tensor.name, datatype: b.tensor.datatype, shape: [...b.tensor.shape], data };
  }

  /** An input and an output may share a name (a graph input passed through): each has values of its own. */
  #get(kind: 'in' | 'out', name: string, datatype: DataType, shape: readonly number[]): Cached {
    const key = `${kind}\0${name}\0${datatype}\0${shape.join(',')}`;
    let c = this.#values.get(key);
    if (c !== undefined) return c;
    if (this.#values.size >= CAPACITY) {
      const [oldest, old] = this.#values.entries().next().value as [string, Cached];
      this.#values.delete(oldest);
      releaseValue(old.value);
    }
    const buffer = createOutput(name, datatype, shape, this.#memoryInfo);
    const data = buffer.tensor.data as FixedTypedArray;
    c = { value: buffer.value as number, bytes: new Uint8Array(data.buffer, data.byteOffset, data.byteLength), buffer };
    this.#values.set(key, c);
    return c;
  }

  /** Releases every value; the runner is done. */
  release(): void {
    for (const c of this.#values.values()) releaseValue(c.value);
    this.#values.clear();
  }
}
