import type { Ptr } from './api.js';
import { addressOf, PointerArray, releaseValue, type Handle } from './handles.js';

/**
 * The four pointer arrays one `Run` reads (input names, input values, output names, output values), in native
 * memory (handles.ts), made once per runner and refilled for each run: a runner runs one batch at a time, so one
 * set serves every run of it, on the JavaScript thread or libuv's pool alike.
 */
export class RunArrays {
  readonly #inNames: PointerArray;
  readonly #ins: PointerArray;
  readonly #outNames: PointerArray;
  readonly #outs: PointerArray;

  constructor(inputs: number, outputs: number) {
    this.#inNames = new PointerArray(inputs);
    this.#ins = new PointerArray(inputs);
    this.#outNames = new PointerArray(outputs);
    this.#outs = new PointerArray(outputs);
  }

  /** Whether a run of this many inputs and outputs fits (more than the session declares needs a set of its own). */
  fits(inputs: number, outputs: number): boolean {
    return inputs <= this.#ins.length && outputs <= this.#outs.length;
  }

  /** Fills the arrays; `outs` holds preallocated values, or null where onnxruntime allocates. */
  fill(
    inNames: readonly number[],
    ins: readonly Handle[],
    outNames: readonly number[],
    outs: readonly (Handle | null)[],
  ) {
    for (let i = 0; i < ins.length; i++) {
      this.#inNames.set(i, inNames[i]);
      this.#ins.set(i, addressOf(ins[i]));
    }
    for (let i = 0; i < outs.length; i++) {
      this.#outNames.set(i, outNames[i]);
      const v = outs[i];
      this.#outs.set(i, v === null ? 0 : addressOf(v));
    }
  }

  /** `Run`'s arguments for the filled arrays. */
  args(session: Ptr, runOptions: Ptr, inputs: number, outputs: number): unknown[] {
    return [
      session,
      runOptions,
      this.#inNames.pointer,
      this.#ins.pointer,
      inputs,
      this.#outNames.pointer,
      outputs,
      this.#outs.pointer,
    ];
  }

  /** After a run that succeeded: the values onnxruntime allocated go into the null slots of `outs`, as addresses. */
  collect(outs: (Handle | null)[]): void {
    for (let i = 0; i < outs.length; i++) if (outs[i] === null) outs[i] = this.#outs.get(i) || null;
  }

  /** After a run that failed: releases the values onnxruntime allocated before failing (the null slots of `outs`). */
  releaseMade(outs: readonly (Handle | null)[]): void {
    for (let i = 0; i < outs.length; i++) {
      const made = this.#outs.get(i);
      if (outs[i] === null && made !== 0) releaseValue(made);
    }
  }

  free(): void {
    for (const a of [this.#inNames, this.#ins, this.#outNames, this.#outs]) a.free();
  }
}
