import type { DataType } from '../../../core/datatypes.js';

/**
 * What a session's outputs looked like for given input shapes, so that the next run with the same input shapes
 * can hand onnxruntime output buffers JavaScript already owns (preallocated outputs of `Run`): onnxruntime then
 * writes (or, for a GPU session, copies device-to-host) straight into them, and the copy out of onnxruntime's
 * buffer — a whole batch's output on the event loop's thread, 25 MB for BERT-base fp32 at batch 64 — is gone.
 *
 * A guess can be wrong only for a model whose output shape depends on input values (NonZero, say): the run then
 * fails with a shape mismatch; the runner retries it without preallocation and `unstable()` keeps that input
 * shape from being guessed again. Ownership: one per runner, used on the JavaScript thread only.
 */

/** Distinct input shapes remembered per session; beyond it the oldest is forgotten (Map order). */
const CAPACITY = 256;

export interface OutputShape {
  datatype: DataType;
  shape: readonly number[];
}

export class OutputShapes {
  readonly #known = new Map<string, ReadonlyMap<string, OutputShape>>();
  readonly #unstable = new Set<string>();

  /** A key for a run's input shapes (names in request order: the runner's caller keeps that order stable). */
  static key(inputs: ReadonlyArray<{ name: string; shape: readonly number[] }>): string {
    let k = '';
    for (const t of inputs) k += `${t.name}:${t.shape.join('x')};`;
    return k;
  }

  /** The remembered output shapes for `key`, or undefined (never seen, or unstable). */
  get(key: string): ReadonlyMap<string, OutputShape> | undefined {
    return this.#known.get(key);
  }

  /** Remembers what a run with `key` produced; BYTES outputs are never preallocated, so they are left out. */
  remember(key: string, outputs: ReadonlyArray<{ name: string; datatype: DataType; shape: readonly number[] }>): void {
    if (this.#unstable.has(key) || this.#known.has(key)) return;
    const m = new Map<string, OutputShape>();
    for (const o of outputs) if (o.datatype !== 'BYTES') m.set(o.name, { datatype: o.datatype, shape: [...o.shape] });
    if (this.#known.size >= CAPACITY) this.#known.delete(this.#known.keys().next().value as string);
    this.#known.set(key, m);
  }

  /** A preallocated run with `key` failed: do not guess for it again. */
  unstable(key: string): void {
    this.#known.delete(key);
    if (this.#unstable.size < CAPACITY) this.#unstable.add(key);
  }

  get size(): number {
    return this.#known.size;
  }
}
