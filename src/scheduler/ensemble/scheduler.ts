import type { EngineRequest } from '../../backends/contract.js';
import { CancelledError, NereidError } from '../../core/errors.js';
import { Drain } from '../drain.js';
import type { Parameters, RequestTrace } from '../../core/inference.js';
import type { Tensor } from '../../core/tensor.js';
import type { ScheduledResult, Scheduler, ScheduleOptions } from '../scheduler.js';
import { copyData } from '../sequence/tensors.js';
import type { EnsembleGraph, EnsembleStep } from './graph.js';

/**
 * Triton's ensemble scheduler: runs a request through the steps of an ensemble graph. A step starts as soon as
 * every tensor it reads exists; each step is a request to its own model, made through the server like any
 * client request (`StepRunner`), so that model's scheduler, batcher, statistics and metrics apply to it. The
 * ensemble answers once every step has run (every step feeds an output: the graph check makes sure).
 *
 * Memory: a tensor handed to a step may be moved away by that step's transport, so a tensor read more than once
 * is copied for all but its last use (ensemble outputs count as a use). Threading: main thread; no queue of its
 * own (the composing models queue).
 */

/** One step's request, as the ensemble makes it. */
export interface StepRequest {
  readonly step: EnsembleStep;
  /** Named as the step model's inputs. Handed over: the runner may move them. */
  readonly inputs: Tensor[];
  /** The step model's outputs to return, in this order. */
  readonly outputs: string[];
  readonly parameters?: Parameters;
  /** The ensemble request's sequence, forwarded to every step (Triton). */
  readonly correlationId?: bigint | string;
  readonly sequence?: { start: boolean; end: boolean };
  /** The traced ensemble's context: each step's spans are children of the ensemble's model span. */
  readonly trace?: RequestTrace;
}

/** Runs one step through the server; resolves with the requested outputs in order. */
export type StepRunner = (request: StepRequest, signal: AbortSignal | undefined) => Promise<Tensor[]>;

const ZERO_TIMINGS = Object.freeze({ computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 });

export class EnsembleScheduler implements Scheduler {
  readonly #graph: EnsembleGraph;
  readonly #run: StepRunner;
  /** No queue of its own: it waits for the runs in flight. */
  readonly #drain = new Drain(() => 0);

  constructor(graph: EnsembleGraph, run: StepRunner) {
    this.#graph = graph;
    this.#run = run;
  }

  /** Requests are queued by the composing models, never here. */
  get pending(): number {
    return 0;
  }

  enqueue(request: EngineRequest, opts: ScheduleOptions = {}): Promise<ScheduledResult> {
    if (this.#drain.stopping) return this.#drain.refusal();
    if (opts.signal?.aborted) {
      return Promise.reject(new CancelledError('request was cancelled before it was scheduled'));
    }
    this.#drain.begin();
    return new EnsembleRun(this.#graph, this.#run, request, opts).promise.finally(() => this.#drain.end());
  }

  failQueued(): void {}

  stop(): Promise<void> {
    return this.#drain.stop();
  }
}

/** One request's way through the graph. */
class EnsembleRun {
  readonly promise: Promise<ScheduledResult>;
  readonly #graph: EnsembleGraph;
  readonly #runner: StepRunner;
  readonly #request: EngineRequest;
  readonly #opts: ScheduleOptions;
  readonly #tensors = new Map<string, Tensor>();
  readonly #uses: Map<string, number>;
  /** Per step: tensors it still waits for. */
  readonly #waiting: number[];
  #left: number;
  #settled = false;
  #resolve!: (r: ScheduledResult) => void;
  #reject!: (e: unknown) => void;

  constructor(graph: EnsembleGraph, runner: StepRunner, request: EngineRequest, opts: ScheduleOptions) {
    this.#graph = graph;
    this.#runner = runner;
    this.#request = request;
    this.#opts = opts;
    this.#uses = new Map(graph.uses);
    this.#left = graph.steps.length;
    this.promise = new Promise<ScheduledResult>((resolve, reject) => {
      this.#resolve = resolve;
      this.#reject = reject;
    });
    for (const t of request.inputs) this.#tensors.set(t.name, t);
    this.#waiting = graph.steps.map((s) => s.reads.filter((t) => !this.#tensors.has(t)).length);
    for (const i of graph.roots) this.#launch(graph.steps[i]);
  }

  /** The tensor for one use: itself at its last use, else a copy (its reader may move it away). */
  #take(name: string, as: string): Tensor {
    const t = this.#tensors.get(name) as Tensor;
    const left = (this.#uses.get(name) as number) - 1;
    this.#uses.set(name, left);
    if (left === 0) return t.name === as ? t : { ...t, name: as };
    return { name: as, datatype: t.datatype, shape: [...t.shape], data: copyData(t.data) };
  }

  #launch(step: EnsembleStep): void {
    // After a failure nothing new starts; steps already running finish and are ignored.
    if (this.#settled) return;
    const r = this.#request;
    const request: StepRequest = {
      step,
      inputs: step.inputMap.map(([input, tensor]) => this.#take(tensor, input)),
      outputs: step.outputMap.map(([output]) => output),
      parameters: r.parameters,
      correlationId: r.correlationId,
      sequence: this.#opts.sequence,
      trace: r.trace,
    };
    // Steps take the client's own signal: a cancelled client cancels its steps where they are, with no
    // per-request controller or listeners (an HTTP connection's signal is shared by all its requests).
    this.#runner(request, this.#opts.signal).then(
      (outputs) => this.#done(step, outputs),
      (err: unknown) => this.#fail(err),
    );
  }

  #done(step: EnsembleStep, outputs: Tensor[]): void {
    if (this.#settled) return;
    step.outputMap.forEach(([, tensor], k) => {
      this.#tensors.set(tensor, outputs[k]);
      for (const c of this.#graph.consumers.get(tensor) ?? []) {
        if (--this.#waiting[c] === 0) this.#launch(this.#graph.steps[c]);
      }
    });
    if (--this.#left > 0) return;
    this.#settled = true;
    const outs = this.#request.outputs.map((name) => this.#take(name, name));
    this.#resolve({ outputs: outs, timings: ZERO_TIMINGS, queueNs: 0, executedBatchSize: this.#request.batchSize });
  }

  /** The first failure answers the request (Triton's "in ensemble" prefix, the step's code). */
  #fail(err: unknown): void {
    if (this.#settled) return;
    this.#settled = true;
    const e = NereidError.from(err);
    this.#reject(
      e.code === 'CANCELLED' && this.#opts.signal?.aborted
        ? e
        : new NereidError(e.code, `in ensemble '${this.#graph.name}', ${e.message}`, {
            cause: e,
            unexpected: e.unexpected,
          }),
    );
  }
}
