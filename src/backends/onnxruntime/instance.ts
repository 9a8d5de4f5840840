import { CancelledError, NereidError, UnavailableError } from '../../core/errors.js';
import type { DeviceMemory } from '../../core/device.js';
import type { Tensor } from '../../core/tensor.js';
import type { Logger } from '../../core/logger.js';
import type {
  EngineInstance,
  EngineRequest,
  EngineResponse,
  ExecuteTimings,
  InstanceSpec,
  ModelSignature,
  Responder,
  TensorSignature,
} from '../contract.js';
import { batchOutputNames, joinInputs, splitOutputs } from '../batching.js';
import { check, ortApi, type Out, type Ptr } from './capi/api.js';
import type { EnvLease } from './capi/env.js';
import { describePlacement, type CudaTensors } from './capi/device-tensors.js';
import type { GraphSpec } from '../../config/graph-spec.js';
import { arenaStats } from './capi/arena-stats.js';
import type { OrtRunner } from './capi/run.js';
import type { OutputPool, PooledBuffer } from './capi/output-pool.js';
import { lendPooled } from './capi/pooled-responses.js';
import { stageInputs } from './capi/staged-inputs.js';
import { isStickyError } from './errors.js';
import type { OrtSession } from './capi/session.js';
import type { SessionPlan } from './options-capi.js';

/**
 * One onnxruntime C API instance (engine.ts makes them): its session, its runner and, on a GPU, its device tensors
 * and the output pool it lends from.
 */

/** Model instances live in this process now (all models), against libuv's pool (capi/threadpool.ts). */
export const live = { instances: 0 };

export interface ModelState {
  name: string;
  plan: SessionPlan;
  modelFile: string;
  lease: EnvLease;
  logSeverity: number;
  /** max_batch_size > 0: requests of a batch run as one. */
  batching: boolean;
  ragged: ReadonlySet<string>;
  logger: Logger;
  /** Test hook: each instance's session writes its optimized graph to `<prefix><instance>.onnx`. */
  optimizedModelPrefix?: string;
  /** Declared inputs that are overridable initializers (fed by name when a request sends them). */
  overridable: readonly TensorSignature[];
  /** Runs block the calling thread (engine-thread transport only). */
  blockingRuns: boolean;
  /** `optimization.cuda.graph_spec`: CUDA graphs captured at load (sessions with enable_cuda_graph). */
  graphSpecs: readonly GraphSpec[];
  /** The TensorRT provider's cache folders, resolved (provider-paths.ts); made before a TensorRT session. */
  trtFolders: readonly string[];
  /** Where an instance's pooled output memory comes from (KIND_GPU in-process); none: fresh memory. */
  outputPool?: (spec: InstanceSpec) => OutputPool | undefined;
}

/** One instance: one OrtSession and its runner. Threading: main thread; one execute at a time (host's rule). */
export class CapiInstance implements EngineInstance {
  readonly name: string;
  /** Settles (never rejects) when the instance hit a sticky error: the transport marks the model UNAVAILABLE. */
  readonly died: Promise<Error>;
  /** KIND_GPU: the CUDA device whose memory (client CUDA shared memory) runs read and write in place. */
  readonly deviceMemory: DeviceMemory | undefined;
  readonly #state: ModelState;
  readonly #session: OrtSession;
  readonly #runner: OrtRunner;
  readonly #cuda: CudaTensors | undefined;
  readonly #pool: OutputPool | undefined;
  #current: Promise<unknown> | undefined;
  #failure: Error | undefined;
  #die!: (err: Error) => void;
  #destroying: Promise<void> | undefined;

  constructor(
    name: string,
    state: ModelState,
    session: OrtSession,
    runner: OrtRunner,
    cuda?: CudaTensors,
    pool?: OutputPool,
  ) {
    this.name = name;
    this.#pool = pool;
    this.#state = state;
    this.#session = session;
    this.#runner = runner;
    this.#cuda = cuda;
    this.deviceMemory = cuda?.memory;
    this.died = new Promise((resolve) => (this.#die = resolve));
  }

  /** The session's signature (names, datatypes, dims as onnxruntime reports them). */
  signature(): ModelSignature {
    return this.#session.signature();
  }

  /** Test hook: how many runs called Run inline on this thread, and how many on libuv's pool. */
  runCounts(): { inline: number; pooled: number } {
    return { ...this.#runner.counts };
  }

  /** Test hook: the session's CPU arena statistics (onnxruntime's AllocatorGetStats keys). */
  cpuArenaStats(): Record<string, number> {
    return arenaStats(this.#session.ptr, this.#state.lease.cpuMemoryInfo);
  }

  /** Test hook: the session's CUDA arena statistics on `device` (GPU script). */
  gpuArenaStats(device: number): Record<string, number> {
    const api = ortApi();
    const out: Out = [null];
    // OrtArenaAllocator (1), OrtMemTypeDefault (0): the CUDA provider's device arena.
    check(api.CreateMemoryInfo('Cuda', 1, device, 0, out));
    try {
      return arenaStats(this.#session.ptr, out[0] as Ptr);
    } finally {
      api.ReleaseMemoryInfo(out[0]);
    }
  }

  async execute(
    requests: readonly EngineRequest[],
    responder: Responder,
    signal: AbortSignal,
  ): Promise<ExecuteTimings> {
    if (this.#failure !== undefined) throw this.#failure;
    if (this.#destroying !== undefined) throw new UnavailableError(`instance ${this.name} is being destroyed`);
    if (signal.aborted) throw new CancelledError('request was cancelled before execution');
    const onAbort = (): void => this.#runner.terminate();
    signal.addEventListener('abort', onAbort, { once: true });
    const work = this.#execute(requests, responder, signal);
    this.#current = work;
    try {
      return await work;
    } catch (err) {
      if (isStickyError(err)) this.#fail(err as Error);
      throw err;
    } finally {
      signal.removeEventListener('abort', onAbort);
      this.#current = undefined;
    }
  }

  async #execute(
    requests: readonly EngineRequest[],
    responder: Responder,
    signal: AbortSignal,
  ): Promise<ExecuteTimings> {
    // Device tensors are not joined (no device-side gather): such a batch runs request by request (the dynamic
    // batcher never forms one; this keeps another scheduler correct).
    const together = requests.length === 1 || (this.#state.batching && !requests.some((r) => r.device !== undefined));
    if (together) {
      const staged = stageInputs(requests, this.#pool);
      let inputs: Tensor[];
      try {
        inputs = joinInputs(requests, this.#state.ragged, staged?.memory);
      } catch (err) {
        staged?.give();
        throw err;
      }
      const device = requests.length === 1 ? requests[0].device : undefined;
      // The pool only where a response will view it; others keep prefaulted memory of their own (no second copy).
      const pool = requests.some((r) => r.viewsOk === true);
      const run = await this.#runner
        .run(inputs, batchOutputNames(requests), device?.outputs, { signal, pool })
        .finally(() => staged?.give());
      const { outputs, timings } = run;
      if (device !== undefined) this.#logPlacement(inputs, outputs);
      const t = process.hrtime.bigint();
      const responses = this.#lend(requests, run.pooled, () => splitOutputs(requests, outputs));
      responses.forEach((r, i) => responder.send(i, r, { final: true }));
      timings.computeOutputNs += Number(process.hrtime.bigint() - t);
      return timings;
    }
    // A model without a batch dimension runs its requests one by one; each gets its own answer or error.
    const sum: ExecuteTimings = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };
    for (let i = 0; i < requests.length; i++) {
      try {
        const { device } = requests[i];
        const pool = requests[i].viewsOk === true;
        const run = await this.#runner.run(requests[i].inputs, requests[i].outputs, device?.outputs, { signal, pool });
        const { outputs, timings } = run;
        if (device !== undefined) this.#logPlacement(requests[i].inputs, outputs);
        const [response] = this.#lend([requests[i]], run.pooled, () => [
          { outputs: requests[i].outputs.map((n) => outputs.find((o) => o.name === n)!) },
        ]);
        responder.send(i, response, { final: true });
        sum.computeInputNs += timings.computeInputNs;
        sum.computeInferNs += timings.computeInferNs;
        sum.computeOutputNs += timings.computeOutputNs;
      } catch (err) {
        if (isStickyError(err) || err instanceof CancelledError) throw err;
        responder.send(i, NereidError.from(err), { final: true });
      }
    }
    return sum;
  }

  /** The responses of a run, lending its pooled output buffer (capi/pooled-responses.ts); it goes back on failure. */
  #lend(requests: readonly EngineRequest[], pooled: PooledBuffer | undefined, make: () => EngineResponse[]) {
    if (pooled === undefined) return make();
    let responses: EngineResponse[];
    try {
      responses = make();
    } catch (err) {
      this.#pool?.give(pooled);
      throw err;
    }
    return lendPooled(requests, responses, pooled, this.#pool);
  }

  /** Verbose: where a run with client device memory read and wrote (the device script checks it on a GPU). */
  #logPlacement(inputs: readonly Tensor[], outputs: readonly Tensor[]): void {
    this.#state.logger.debug({ instance: this.name }, `onnxruntime run: ${describePlacement(inputs, outputs)}`);
  }

  #fail(err: Error): void {
    if (this.#failure !== undefined) return;
    this.#failure = new UnavailableError(`instance ${this.name} failed and cannot run again: ${err.message}`, {
      cause: err,
    });
    this.#state.logger.error({ err, instance: this.name }, 'onnxruntime instance failed');
    this.#die(this.#failure);
  }

  /**
   * Releases the run options and the session. The host calls it after the last execute settled; if a run is
   * still in flight anyway (an unload racing a run), it is terminated and awaited first: releasing a session
   * under a running Run would free memory onnxruntime is using.
   */
  destroy(): Promise<void> {
    this.#destroying ??= this.#destroy();
    return this.#destroying;
  }

  async #destroy(): Promise<void> {
    if (this.#current !== undefined) {
      this.#runner.terminate();
      await this.#current.catch(() => undefined);
    }
    this.#runner.release();
    this.#cuda?.release();
    await this.#session.release();
    live.instances--;
  }
}
