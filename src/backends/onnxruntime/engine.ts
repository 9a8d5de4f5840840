import { readFile } from 'node:fs/promises';
import { CancelledError, UnavailableError } from '../../core/errors.js';
import { noopLogger, type Logger } from '../../core/logger.js';
import type { EngineAdapter, EngineLoadContext, EngineModel, InstanceSpec } from '../contract.js';
import { overridableSignatures } from './initializers.js';
import { check, ortApi, type Out, type Ptr } from './capi/api.js';
import { acquireEnv } from './capi/env.js';
import { CudaTensors, runsOnClientMemory } from './capi/device-tensors.js';
import type { CudaGraphs } from './capi/cuda-graphs.js';
import { cudaGraphsFor, ignoreOtherCaptures, planGraphs, warmUpGraphs, type GraphPlan } from './instance-graphs.js';
import { parseGraphSpecs } from '../../config/graph-spec.js';
import { OrtRunner } from './capi/run.js';
import { PrefaultedBuffers } from './capi/prefaulted.js';
import type { OutputPool } from './capi/output-pool.js';
import { createError } from './errors.js';
import { autoCompleteOnnx, resolveModelFile } from './signature.js';
import { createSessionOptions } from './capi/session-options.js';
import { OrtSession } from './capi/session.js';
import { runThreads } from './capi/threadpool.js';
import { planSession, providersFor, usesCudaGraphs } from './options-capi.js';
import { createTensorrtFolders, withTensorrtPaths } from './provider-paths.js';
import { CapiInstance, live, type ModelState } from './instance.js';

export type { CapiInstance } from './instance.js';

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
    const session = await this.#openSession(spec, providers, signal);
    const pool = s.blockingRuns ? undefined : s.outputPool?.(spec);
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
        // Outputs copied from the GPU to the host: their memory prefaulted ahead (graph slots have their own), or
        // page-locked memory from the device's pool (in-process only: its buffers are lent on the main thread).
        prefaulted: spec.kind === 'KIND_GPU' && graphs === undefined ? new PrefaultedBuffers() : undefined,
        outputPool: pool,
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
    const instance = new CapiInstance(spec.name, s, session, runner, cuda, pool);
    this.#instances.add(instance);
    live.instances++;
    warnIfPoolShort(s);
    return instance;
  }

  /** The instance's onnxruntime session with its providers (TensorRT's cache folders made first). */
  async #openSession(
    spec: InstanceSpec,
    providers: ReturnType<typeof providersFor>,
    signal: AbortSignal,
  ): Promise<OrtSession> {
    const s = this.#state;
    const api = ortApi();
    const options = createSessionOptions({
      plan: s.plan,
      providers,
      globalThreadPool: s.lease.globalThreadPool,
      logSeverity: s.logSeverity,
      logId: spec.name,
      optimizedModelPath:
        s.optimizedModelPrefix === undefined ? undefined : `${s.optimizedModelPrefix}${spec.name}.onnx`,
      onProviderOptions: (name, text) =>
        s.logger.debug({ instance: spec.name }, `onnxruntime ${name} provider options: ${text}`),
    });
    try {
      if (providers.some((p) => p.name === 'tensorrt'))
        await createTensorrtFolders(s.trtFolders, `instance ${spec.name}`);
      return await OrtSession.create(s.lease.env, s.modelFile, options, signal);
    } catch (err) {
      throw createError(err, providers, `instance ${spec.name}`);
    } finally {
      api.ReleaseSessionOptions(options);
    }
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

/** More instances can run at once than libuv's pool has threads for runs: say so, with the fix. */
function warnIfPoolShort(s: ModelState): void {
  if (live.instances <= runThreads()) return;
  s.logger.warn(
    { model: s.name, instances: live.instances, runThreads: runThreads() },
    `${live.instances} onnxruntime instances can run at once but libuv's pool leaves ${runThreads()} threads for ` +
      `runs: runs beyond that wait for a thread; start nereid with UV_THREADPOOL_SIZE=${live.instances + 4} or more`,
  );
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
  opts: {
    blockingRuns?: boolean;
    planWarnings?: boolean;
    /** The output pool of an instance (KIND_GPU in-process: its device's page-locked pool); none by default. */
    outputPool?: (spec: InstanceSpec) => OutputPool | undefined;
  } = {},
): EngineAdapter & { autoComplete: typeof autoCompleteOnnx } {
  return {
    autoComplete: autoCompleteOnnx,
    async load(ctx: EngineLoadContext & LoadHooks, signal: AbortSignal): Promise<EngineModel> {
      if (signal.aborted) throw new CancelledError('model load was cancelled');
      const logger = (ctx.logger ?? noopLogger).child({ model: ctx.name, version: ctx.version });
      // Relative TensorRT cache paths are the version folder's, never the server's working directory.
      const { plan, folders: trtFolders } = withTensorrtPaths(planSession(ctx.config, ctx.backendConfig), ctx);
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
        outputPool: opts.outputPool,
        graphSpecs,
        trtFolders,
      });
    },
  };
}
