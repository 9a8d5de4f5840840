import { readFile } from 'node:fs/promises';
import { CancelledError, NereidError, UnavailableError } from '../../core/errors.js';
import type { DeviceMemory } from '../../core/device.js';
import type { Tensor } from '../../core/tensor.js';
import { noopLogger, type Logger } from '../../core/logger.js';
import type {
  EngineAdapter,
  EngineInstance,
  EngineLoadContext,
  EngineModel,
  EngineRequest,
  ExecuteTimings,
  InstanceSpec,
  ModelSignature,
  Responder,
  TensorSignature,
} from '../contract.js';
import { batchOutputNames, joinInputs, splitOutputs } from '../batching.js';
import { overridableSignatures } from './initializers.js';
import { check, ortApi, type Out, type Ptr } from './capi/api.js';
import { acquireEnv, type EnvLease } from './capi/env.js';
import { CudaTensors, describePlacement, runsOnClientMemory } from './capi/device-tensors.js';
import type { CudaGraphs } from './capi/cuda-graphs.js';
import { cudaGraphsFor, ignoreOtherCaptures, planGraphs, warmUpGraphs, type GraphPlan } from './instance-graphs.js';
import { arenaStats } from './capi/arena-stats.js';
import { parseGraphSpecs, type GraphSpec } from '../../config/graph-spec.js';
import { OrtRunner } from './capi/run.js';
import { PrefaultedBuffers } from './capi/prefaulted.js';
import { createError, isStickyError } from './errors.js';
import { autoCompleteOnnx, resolveModelFile } from './signature.js';
import { createSessionOptions } from './capi/session-options.js';
import { OrtSession } from './capi/session.js';
import { runThreads } from './capi/threadpool.js';
import { planSession, providersFor, usesCudaGraphs, type SessionPlan } from './options-capi.js';

/**
 * The onnxruntime engine over onnxruntime's C API (koffi), for the in-process transport: everything runs on the
 * main thread except session creation/release and `Run`, which koffi runs on libuv's thread pool. No worker
 * thread, no per-request message hop; the event loop never waits for onnxruntime.
 *
 * One OrtSession per instance (Triton's model): KIND_CPU on the CPU provider (plus OpenVINO when configured),
 * KIND_GPU on the CUDA provider of its device (TensorRT first when configured). The model holds a reference on the
 * process's OrtEnv while it is loaded.
 */

/**
 * onnxruntime's log severity from our log level: verbose only when we are. Otherwise only fatal: a run error (a
 * client's out-of-range token id, say) already reaches the client and our log through the error we return, and
 * onnxruntime writing each one to stderr again would let any client flood it.
 */
export function ortLogSeverity(level: string): number {
  return level === 'trace' ? 0 : level === 'debug' ? 1 : 4;
}

/** Model instances live in this process now (all models), against libuv's pool (capi/threadpool.ts). */
let liveInstances = 0;

interface ModelState {
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
  #current: Promise<unknown> | undefined;
  #failure: Error | undefined;
  #die!: (err: Error) => void;
  #destroying: Promise<void> | undefined;

  constructor(name: string, state: ModelState, session: OrtSession, runner: OrtRunner, cuda?: CudaTensors) {
    this.name = name;
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
    const work = this.#execute(requests, responder);
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

  async #execute(requests: readonly EngineRequest[], responder: Responder): Promise<ExecuteTimings> {
    // Device tensors are not joined (no device-side gather): such a batch runs request by request (the dynamic
    // batcher never forms one; this keeps another scheduler correct).
    const together = requests.length === 1 || (this.#state.batching && !requests.some((r) => r.device !== undefined));
    if (together) {
      const inputs = joinInputs(requests, this.#state.ragged);
      const device = requests.length === 1 ? requests[0].device : undefined;
      const { outputs, timings } = await this.#runner.run(inputs, batchOutputNames(requests), device?.outputs);
      if (device !== undefined) this.#logPlacement(inputs, outputs);
      const t = process.hrtime.bigint();
      splitOutputs(requests, outputs).forEach((r, i) => responder.send(i, r, { final: true }));
      timings.computeOutputNs += Number(process.hrtime.bigint() - t);
      return timings;
    }
    // A model without a batch dimension runs its requests one by one; each gets its own answer or error.
    const sum: ExecuteTimings = { computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 };
    for (let i = 0; i < requests.length; i++) {
      try {
        const { device } = requests[i];
        const { outputs, timings } = await this.#runner.run(requests[i].inputs, requests[i].outputs, device?.outputs);
        if (device !== undefined) this.#logPlacement(requests[i].inputs, outputs);
        responder.send(
          i,
          { outputs: requests[i].outputs.map((n) => outputs.find((o) => o.name === n)!) },
          { final: true },
        );
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
    liveInstances--;
  }
}

class CapiModel implements EngineModel {
  readonly #state: ModelState;
  readonly #instances = new Set<CapiInstance>();
  #unloaded = false;

  constructor(state: ModelState) {
    this.#state = state;
  }

  async createInstance(spec: InstanceSpec, signal: AbortSignal): Promise<CapiInstance> {
    if (this.#unloaded) throw new UnavailableError(`model ${this.#state.name} is unloaded`);
    const s = this.#state;
    const providers = providersFor(s.plan, spec);
    if (spec.kind === 'KIND_GPU' && s.blockingRuns) ignoreOtherCaptures();
    const api = ortApi();
    const options = createSessionOptions({
      plan: s.plan,
      providers,
      globalThreadPool: s.lease.globalThreadPool,
      logSeverity: s.logSeverity,
      logId: spec.name,
      optimizedModelPath:
        s.optimizedModelPrefix === undefined ? undefined : `${s.optimizedModelPrefix}${spec.name}.onnx`,
    });
    let session: OrtSession;
    try {
      session = await OrtSession.create(s.lease.env, s.modelFile, options, signal);
    } catch (err) {
      throw createError(err, providers, `instance ${spec.name}`);
    } finally {
      api.ReleaseSessionOptions(options);
    }
    let runner: OrtRunner;
    // A KIND_GPU instance (CUDA or TensorRT provider on its device) reads and writes client CUDA memory in place.
    let cuda: CudaTensors | undefined;
    let graphs: CudaGraphs | undefined;
    let graphPlan: GraphPlan | undefined;
    try {
      const out: Out = [null];
      check(api.GetAllocatorWithDefaultOptions(out));
      if (spec.kind === 'KIND_GPU' && runsOnClientMemory(providers)) cuda = new CudaTensors(spec.device);
      if (spec.kind === 'KIND_GPU' && usesCudaGraphs(s.plan)) {
        graphPlan = planGraphs(s.graphSpecs, session.inputs, s.batching, `instance ${spec.name}`, s.logger);
        graphs = cudaGraphsFor(spec, s.blockingRuns, graphPlan.padded);
      }
      runner = new OrtRunner(session, {
        runConfig: s.plan.runConfig,
        logSeverity: s.logSeverity,
        cpuMemoryInfo: s.lease.cpuMemoryInfo,
        device: cuda,
        allocator: out[0] as Ptr,
        tag: spec.name,
        overridable: s.overridable,
        blocking: s.blockingRuns,
        // Only CPU runs may go inline: GPU runs are never that short, and CUDA's per-thread state stays on the pool's.
        inlineShortRuns: spec.kind === 'KIND_CPU',
        graphs,
        // Outputs copied from the GPU to the host: their memory prefaulted ahead (graph slots have their own).
        prefaulted: spec.kind === 'KIND_GPU' && graphs === undefined ? new PrefaultedBuffers() : undefined,
      });
    } catch (err) {
      cuda?.release();
      graphs?.release();
      await session.release();
      throw err;
    }
    if (graphPlan !== undefined) {
      try {
        const outputs = session.outputs.map((t) => t.name);
        await warmUpGraphs(runner, graphPlan, outputs, `instance ${spec.name}`, s.logger);
      } catch (err) {
        runner.release();
        cuda?.release();
        await session.release();
        throw err;
      }
    }
    const instance = new CapiInstance(spec.name, s, session, runner, cuda);
    this.#instances.add(instance);
    liveInstances++;
    if (liveInstances > runThreads()) {
      s.logger.warn(
        { model: s.name, instances: liveInstances, runThreads: runThreads() },
        `${liveInstances} onnxruntime instances can run at once but libuv's pool leaves ${runThreads()} threads for ` +
          `runs: runs beyond that wait for a thread; start nereid with UV_THREADPOOL_SIZE=${liveInstances + 4} or more`,
      );
    }
    return instance;
  }

  /** Releases what the model holds: instances the host did not destroy (defensive), then the env reference. */
  async unload(): Promise<void> {
    if (this.#unloaded) return;
    this.#unloaded = true;
    await Promise.all([...this.#instances].map((i) => i.destroy()));
    this.#instances.clear();
    this.#state.lease.release();
  }
}

/** Test hooks of a load, beside the contract's context. */
interface LoadHooks {
  /** A logger for the engine's own warnings (the in-process transport may pass the host's). */
  logger?: Logger;
  /** Each session writes its optimized graph to `<prefix><instance>.onnx` (observes the graph level). */
  optimizedModelPrefix?: string;
}

/**
 * The onnxruntime C API engine. `blockingRuns`: Run on the calling thread (only where that thread is the
 * instance's own: the engine-thread transport). `planWarnings: false`: the host logs the plan's warnings.
 */
export function onnxruntimeCapiAdapter(
  opts: { blockingRuns?: boolean; planWarnings?: boolean } = {},
): EngineAdapter & { autoComplete: typeof autoCompleteOnnx } {
  return {
    autoComplete: autoCompleteOnnx,
    async load(ctx: EngineLoadContext & LoadHooks, signal: AbortSignal): Promise<EngineModel> {
      if (signal.aborted) throw new CancelledError('model load was cancelled');
      const logger = (ctx.logger ?? noopLogger).child({ model: ctx.name, version: ctx.version });
      const plan = planSession(ctx.config, ctx.backendConfig);
      if (opts.planWarnings !== false) for (const w of plan.warnings) logger.warn(w);
      const graphSpecs = parseGraphSpecs(ctx.config, `model '${ctx.name}'`);
      if (graphSpecs.length > 0 && !usesCudaGraphs(plan)) {
        logger.warn(
          "optimization.cuda.graph_spec has no effect: the CUDA provider's enable_cuda_graph is not set (gpu_execution_accelerator cuda parameters)",
        );
      }
      const modelFile = await resolveModelFile(ctx.modelPath);
      const logSeverity = ortLogSeverity(ctx.logLevel);
      const lease = acquireEnv({ logSeverity, globalThreadPool: plan.globalThreadPool });
      const ragged = new Set(
        (ctx.config.input ?? []).filter((i) => i.allow_ragged_batch === true).map((i) => i.name as string),
      );
      // Only a config declaring `optional` inputs can name overridable initializers: read the file for them then.
      const declared = new Set((ctx.config.input ?? []).filter((i) => i.optional).map((i) => i.name as string));
      const overridable =
        declared.size === 0
          ? []
          : overridableSignatures(new Uint8Array(await readFile(modelFile)), ctx.name).filter((t) =>
              declared.has(t.name),
            );
      return new CapiModel({
        name: ctx.name,
        plan,
        modelFile,
        lease,
        logSeverity,
        batching: ctx.config.max_batch_size > 0,
        ragged,
        logger,
        optimizedModelPrefix: ctx.optimizedModelPrefix,
        overridable,
        blockingRuns: opts.blockingRuns === true,
        graphSpecs,
      });
    },
  };
}
