import { CancelledError, InternalError, InvalidArgError, NereidError } from '../../../core/errors.js';
import type { DeviceBuffer } from '../../../core/device.js';
import type { Tensor } from '../../../core/tensor.js';
import koffi from 'koffi';
import { callAsync, check, ortApi, statusError, type Out, type Ptr } from './api.js';
import { addressOf, releaseValue, type Handle } from './handles.js';
import { RunArrays } from './run-arrays.js';
import type { OrtSession, SessionTensor } from './session.js';
import { OutputShapes } from './output-shapes.js';
import { checkedInput, runError } from './run-checks.js';
import { createInput, createOutput, readOutput, type InputValue, type OutputBuffer } from './tensors.js';
import type { CudaTensors } from './device-tensors.js';
import { CudaGraphs, type GraphSlot } from './cuda-graphs.js';
import { InlineRuns } from './inline-runs.js';
import { SmallValues } from './small-values.js';
import type { RunnerOptions, RunResult } from './run-options.js';
import type { PooledBuffer } from './output-pool.js';
import { hostOutputMemory } from './host-outputs.js';

export type { RunnerOptions, RunResult } from './run-options.js';

/**
 * Runs of one session: one OrtRunOptions reused by every run (its config entries, its terminate flag), and the
 * synchronous `Run` called on libuv's thread pool through koffi.
 *
 * Threading: `run` is called on the JavaScript thread, one run at a time per runner (an instance executes one
 * batch at a time). The native Run occupies one pool thread for its whole duration and uses the session's own
 * (or the global) intra-op threads; nothing in it calls back into JavaScript, so a busy event loop never stalls
 * it, and it works with intra_op_thread_count 1 (the pool thread computes).
 *
 * Memory: input OrtValues borrow the request's TypedArrays (or a device tensor's CUDA memory: device-tensors.ts)
 * until Run returned and they were released; small host tensors (≤ 16 KiB) are copied through values the runner
 * keeps per name and shape instead (small-values.ts). Outputs land in host memory once: for input shapes seen before they
 * are preallocated (host-outputs.ts: one pooled page-locked buffer on a GPU, else prefaulted or fresh memory) and
 * onnxruntime writes (GPU: copies device-to-host) into them — or into the client's CUDA memory of this device;
 * otherwise onnxruntime allocates them and they are copied once.
 * Output OrtValues are released on every path.
 */

export class OrtRunner {
  readonly #session: OrtSession;
  readonly #opts: RunnerOptions;
  readonly #runOptions: Ptr;
  readonly #inputs: ReadonlyMap<string, SessionTensor>;
  readonly #ownNames: SessionTensor[];
  readonly #outputs: ReadonlyMap<string, SessionTensor>;
  /** Every output of the session, in its order: what a padded CUDA graph slot is made with. */
  readonly #allOutputNames: readonly string[];
  readonly #allOutputPtrs: number[];
  /** Run's pointer arrays, reused by every run (one at a time). */
  readonly #arrays: RunArrays;
  /** Name C strings' addresses, by the strings' pointer objects (made once: koffi.address makes a BigInt). */
  readonly #nameAddress = new Map<Ptr, number>();
  readonly #shapes = new OutputShapes();
  readonly #small: SmallValues;
  readonly #inlineRuns: InlineRuns | undefined;
  /** This run calls Run inline (a blocking runner's always do); how long the last native Run took, ns. */
  #inline = false;
  #runNs = 0;
  /** Test hook: runs that called Run inline, and on the pool. */
  readonly counts = { inline: 0, pooled: 0 };
  #terminated = false;
  #running = false;
  #released = false;

  constructor(session: OrtSession, opts: RunnerOptions) {
    const api = ortApi();
    this.#session = session;
    this.#opts = opts;
    if (opts.inlineShortRuns === true && opts.blocking !== true) this.#inlineRuns = new InlineRuns();
    const extra = (opts.overridable ?? []).filter((t) => !session.inputs.some((i) => i.name === t.name));
    // Their names as C strings of our own, alive as long as the runner (released in release()).
    this.#ownNames = extra.map((t) => {
      const bytes = Buffer.from(`${t.name}\0`, 'utf8');
      const ptr = koffi.alloc('char', bytes.length) as Ptr;
      koffi.encode(ptr, 'char', bytes, bytes.length);
      return { ...t, namePtr: ptr };
    });
    this.#inputs = new Map([...session.inputs, ...this.#ownNames].map((t) => [t.name, t]));
    this.#outputs = new Map(session.outputs.map((t) => [t.name, t]));
    this.#allOutputNames = session.outputs.map((t) => t.name);
    this.#allOutputPtrs = session.outputs.map((t) => this.#name(t));
    const out: Out = [null];
    check(api.CreateRunOptions(out));
    this.#runOptions = out[0] as Ptr;
    try {
      check(api.RunOptionsSetRunTag(this.#runOptions, opts.tag));
      check(api.RunOptionsSetRunLogSeverityLevel(this.#runOptions, opts.logSeverity));
      for (const [k, v] of opts.runConfig) check(api.AddRunConfigEntry(this.#runOptions, k, v));
    } catch (err) {
      api.ReleaseRunOptions(this.#runOptions);
      throw err;
    }
    this.#arrays = new RunArrays(this.#inputs.size, this.#outputs.size);
    this.#small = new SmallValues(opts.cpuMemoryInfo);
  }

  /** The address of a tensor's name string. */
  #name(t: SessionTensor): number {
    let a = this.#nameAddress.get(t.namePtr);
    if (a === undefined) {
      a = addressOf(t.namePtr);
      this.#nameAddress.set(t.namePtr, a);
    }
    return a;
  }

  get running(): boolean {
    return this.#running;
  }

  /**
   * Asks onnxruntime to stop the run in flight (RunOptionsSetTerminate: checked between nodes); that run then
   * rejects with CANCELLED. A no-op when nothing runs.
   */
  terminate(): void {
    if (!this.#running || this.#terminated || this.#released) return;
    this.#terminated = true;
    check(ortApi().RunOptionsSetTerminate(this.#runOptions));
  }

  /**
   * One Run of `inputs` producing `outputNames` in that order. Inputs with `device` are read on the device;
   * outputs in `deviceOutputs` are written there when their shape is known beforehand (answered with `device`).
   */
  async run(
    inputs: readonly Tensor[],
    outputNames: readonly string[],
    deviceOutputs?: ReadonlyMap<string, DeviceBuffer>,
    /** `pool`: the host outputs may go to the output pool (a response will view them); `signal` ends a wait for it. */
    opts: { signal?: AbortSignal; pool?: boolean } = {},
  ): Promise<RunResult> {
    if (this.#released) throw new InternalError('onnxruntime runner used after release');
    if (this.#running) throw new InternalError('onnxruntime runner: one run at a time');
    const api = ortApi();
    const t0 = process.hrtime.bigint();
    const inNames: number[] = [];
    const outNames: number[] = [];
    for (const name of outputNames) {
      const t = this.#outputs.get(name);
      if (t === undefined) throw new InvalidArgError(`unexpected inference output '${name}' for the model`);
      outNames.push(this.#name(t));
    }
    const values: InputValue[] = [];
    this.#running = true;
    try {
      for (const t of inputs) {
        const s = checkedInput(t, this.#inputs.get(t.name));
        values.push(
          t.device === undefined
            ? (this.#small.input(t) ?? createInput(t, this.#opts.cpuMemoryInfo, this.#opts.allocator))
            : this.#deviceTensors(t.name).input(t),
        );
        inNames.push(this.#name(s));
      }
      const key = OutputShapes.key(inputs);
      const t1 = process.hrtime.bigint();
      this.#inline = this.#opts.blocking === true || this.#inlineRuns?.inline(key) === true;
      let outputs: Tensor[];
      let pooled: PooledBuffer | undefined;
      const known = this.#shapes.get(key);
      const guess = known !== undefined && outputNames.every((n) => known.has(n)) ? known : undefined;
      const graphs = this.#opts.graphs;
      if (graphs !== undefined && deviceOutputs === undefined && inputs.every((t) => t.device === undefined)) {
        outputs = await this.#graphRun(graphs, inputs, inNames, values, outNames, outputNames);
      } else if (guess !== undefined) {
        try {
          ({ outputs, pooled } = await this.#runInto(
            inNames,
            values,
            outNames,
            outputNames,
            guess,
            deviceOutputs,
            opts,
          ));
        } catch (err) {
          // A cancelled run is not retried; any other failure may be our shape guess (a mismatch is reported as
          // a generic failure): run again the plain way, which reports the model's own error if there is one.
          if (this.#terminated || err instanceof CancelledError) throw this.#runError(err);
          this.#shapes.unstable(key);
          outputs = await this.#runPlain(inNames, values, outNames, outputNames);
        }
      } else {
        outputs = await this.#runPlain(inNames, values, outNames, outputNames);
        this.#shapes.remember(key, outputs);
      }
      this.#inlineRuns?.observe(key, this.#runNs, this.#inline);
      const t2 = this.#ranAt;
      const t3 = process.hrtime.bigint();
      return {
        outputs,
        timings: { computeInputNs: Number(t1 - t0), computeInferNs: Number(t2 - t1), computeOutputNs: Number(t3 - t2) },
        pooled,
      };
    } finally {
      // The run is over (or never started): the inputs' memory may go now.
      for (const v of values) if (v.cached !== true) releaseValue(v.value);
      if (this.#terminated) {
        this.#terminated = false;
        check(api.RunOptionsUnsetTerminate(this.#runOptions));
      }
      this.#running = false;
    }
  }

  /**
   * A run through a CUDA graph slot (cuda-graphs.ts): the padded slot of a graph_spec covering the batch, else the
   * slot of its exact shapes — whose first run runs without a graph to learn its output shapes and makes the slot;
   * later ones copy in, replay, copy out.
   */
  async #graphRun(
    graphs: CudaGraphs,
    inputs: readonly Tensor[],
    inNames: number[],
    values: InputValue[],
    outNames: number[],
    outputNames: readonly string[],
  ): Promise<Tensor[]> {
    const padded = graphs.padded(inputs, this.#allOutputNames);
    if (padded !== undefined) {
      const { slot, rows } = padded;
      return this.#replay(graphs, slot, inputs, this.#allOutputPtrs, rows, outputNames);
    }
    const key = CudaGraphs.key(inputs, outputNames);
    const slot = graphs.slot(key);
    if (slot === undefined || slot === null) {
      this.#graphId(-1);
      const outputs = await this.#runPlain(inNames, values, outNames, outputNames);
      if (slot === undefined) graphs.create(key, inputs, outputs);
      return outputs;
    }
    return this.#replay(graphs, slot, inputs, outNames, undefined, undefined);
  }

  /** Copies the inputs into the slot, replays its graph, copies the (named) outputs' first `rows` rows out. */
  async #replay(
    graphs: CudaGraphs,
    slot: GraphSlot,
    inputs: readonly Tensor[],
    outNames: number[],
    rows: number | undefined,
    names: readonly string[] | undefined,
  ): Promise<Tensor[]> {
    graphs.upload(slot, inputs, rows);
    this.#graphId(slot.id);
    const v = graphs.values(slot);
    await this.#call(
      // The slot's values are in the order it was made with (a padded slot's may differ from the request's).
      slot.inputs.map((b) => this.#name(this.#inputs.get(b.name)!)),
      v.inputs.map((value) => ({ value, borrowed: slot })),
      outNames,
      v.outputs,
    );
    return graphs.download(slot, rows, names);
  }

  #graphIdSet: number | undefined;

  /** onnxruntime's `gpu_graph_id` run config: which captured graph a run replays (-1: none). */
  #graphId(id: number): void {
    if (this.#graphIdSet === id) return;
    check(ortApi().AddRunConfigEntry(this.#runOptions, 'gpu_graph_id', String(id)));
    this.#graphIdSet = id;
  }

  /** The instance's device tensors; the host gives device tensors only to instances that have them. */
  #deviceTensors(name: string): CudaTensors {
    const d = this.#opts.device;
    if (d === undefined) throw new InternalError(`tensor '${name}' is in device memory, but this instance runs on CPU`);
    return d;
  }

  /** When the last native Run returned (the rest of `run` is reading outputs). */
  #ranAt = 0n;

  /** Run with onnxruntime allocating the outputs, then one copy each into JavaScript memory. */
  async #runPlain(
    inNames: number[],
    values: InputValue[],
    outNames: number[],
    outputNames: readonly string[],
  ): Promise<Tensor[]> {
    const outs: Array<Handle | null> = new Array(outNames.length).fill(null);
    try {
      await this.#call(inNames, values, outNames, outs);
      const outputs: Tensor[] = [];
      for (let i = 0; i < outs.length; i++) outputs.push(readOutput(outputNames[i], outs[i] as Ptr));
      return outputs;
    } finally {
      for (const v of outs) if (v !== null) releaseValue(v);
    }
  }

  /**
   * Run into preallocated outputs of the guessed shapes: the client's device buffers, else host memory (one pooled
   * page-locked buffer, given back here when the run fails): no copy afterwards.
   */
  async #runInto(
    inNames: number[],
    values: InputValue[],
    outNames: number[],
    outputNames: readonly string[],
    guess: ReadonlyMap<string, { datatype: Tensor['datatype']; shape: readonly number[] }>,
    deviceOutputs: ReadonlyMap<string, DeviceBuffer> | undefined,
    opts: { signal?: AbortSignal; pool?: boolean },
  ): Promise<{ outputs: Tensor[]; pooled?: PooledBuffer }> {
    const host = await hostOutputMemory(
      outputNames.map((n) => (deviceOutputs?.has(n) === true ? undefined : guess.get(n))),
      {
        pool: opts.pool === true ? this.#opts.outputPool : undefined,
        prefaulted: this.#opts.prefaulted,
        signal: opts.signal,
      },
    );
    const buffers: OutputBuffer[] = [];
    // Small outputs of plain host memory land in the runner's cached values and are copied out (small-values.ts).
    const cached = new Set<OutputBuffer>();
    try {
      outputNames.forEach((n, i) => {
        const g = guess.get(n)!;
        const [d, at] = [deviceOutputs?.get(n), host.places[i]];
        const small = d === undefined && at === undefined ? this.#small.output(n, g.datatype, g.shape) : undefined;
        if (small !== undefined) cached.add(small);
        buffers.push(
          (d && this.#deviceTensors(n).output(n, g.datatype, g.shape, d)) ??
            small ??
            createOutput(n, g.datatype, g.shape, this.#opts.cpuMemoryInfo, at?.memory, at?.offset),
        );
      });
      const outs: Array<Handle | null> = buffers.map((b) => b.value);
      await this.#call(inNames, values, outNames, outs);
      const outputs = buffers.map((b) => (cached.has(b) ? SmallValues.copyOut(b) : b.tensor));
      return { outputs, pooled: host.pooled };
    } catch (err) {
      if (host.pooled !== undefined) this.#opts.outputPool?.give(host.pooled);
      throw err;
    } finally {
      // The tensors' memory stays referenced by `buffers` until here: onnxruntime wrote into it during Run.
      for (const b of buffers) if (!cached.has(b)) releaseValue(b.value);
    }
  }

  /**
   * The native Run: on a pool thread, or on this thread for a blocking runner; `outs` holds preallocated values or
   * nulls onnxruntime fills.
   */
  async #call(inNames: number[], values: InputValue[], outNames: number[], outs: Array<Handle | null>): Promise<void> {
    const api = ortApi();
    const own = this.#arrays.fits(values.length, outs.length);
    const a = own ? this.#arrays : new RunArrays(values.length, outs.length);
    a.fill(
      inNames,
      values.map((v) => v.value),
      outNames,
      outs,
    );
    const t0 = process.hrtime.bigint();
    try {
      const args = a.args(this.#session.ptr, this.#runOptions, values.length, outs.length);
      if (this.#inline) {
        this.counts.inline++;
        const status = api.Run(...args) as Ptr | null;
        if (status !== null) throw statusError(status);
      } else {
        this.counts.pooled++;
        await callAsync(api.Run, ...args);
      }
      a.collect(outs);
    } catch (err) {
      // Values onnxruntime created before failing are ours to release; preallocated ones the caller releases.
      a.releaseMade(outs);
      throw this.#runError(err);
    } finally {
      this.#ranAt = process.hrtime.bigint();
      this.#runNs = Number(this.#ranAt - t0);
      if (!own) a.free();
    }
  }

  #runError(err: unknown): NereidError {
    return runError(err, this.#terminated);
  }

  /** Releases the run options. Idempotent; never with a run in flight. */
  release(): void {
    if (this.#released) return;
    if (this.#running) throw new InternalError('onnxruntime runner released during a run');
    this.#released = true;
    this.#opts.graphs?.release();
    this.#opts.prefaulted?.close();
    ortApi().ReleaseRunOptions(this.#runOptions);
    for (const t of this.#ownNames) koffi.free(t.namePtr);
    this.#arrays.free();
    this.#small.release();
  }
}
