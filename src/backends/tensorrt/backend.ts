import { stat } from 'node:fs/promises';
import { join } from 'node:path';
import type { ModelConfig } from '../../config/model-config.js';
import type { DataType } from '../../core/datatypes.js';
import { InvalidArgError, NotFoundError, UnsupportedError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type {
  AutoCompleteContext,
  Backend,
  EngineLoadContext,
  EngineRequest,
  ExecuteTimings,
  Instance,
  InstanceKind,
  InstanceSpec,
  Responder,
} from '../contract.js';
import { processBackend, type PreparedLoad } from '../runtime/process/backend.js';
import type { ProcessInstance } from '../runtime/process/instance.js';
import { externalDataLocations } from '../onnxruntime/external-data.js';
import { ENGINE_MODEL_PY, resolveEnvironment, tensorrtHome, type TensorRTEnvironment } from './environment.js';
import {
  checkAgainstPlan,
  completeFromPlan,
  instanceProfiles,
  requestOutsideProfiles,
  type PlanFacts,
} from './facts.js';
import {
  backendOptions,
  KNOWN,
  modelOptions,
  type TensorRTBackendOptions,
  type TensorRTModelOptions,
} from './options.js';
import { ONNX_BUILD_PARAMETERS, onnxBuildOptions, planFromOnnx } from './onnx-plan.js';
import { PlanCache } from './plan-cache.js';
import { probePlan } from './probe.js';

/**
 * Triton's tensorrt backend (`platform: "tensorrt_plan"`, `backend: "tensorrt"`, `model.plan`) over the
 * child-process transport: per model version, ONE Python process per GPU hosting every instance on that GPU (one
 * TensorRT runtime and engine per process, as Triton shares them per device; each instance an execution context
 * per optimization profile with its own CUDA stream, on its own thread). The engine is
 * python/nereid_python/engines/tensorrt; this side resolves options, reads the plan's facts for auto-complete and
 * checks each request against the instance's profiles before it reaches the GPU (a 400 naming the allowed range).
 *
 * Threading: main thread only.
 */

/** Datatypes a TensorRT plan's I/O can have that Triton has names for. */
const DATATYPES: readonly DataType[] = ['BOOL', 'UINT8', 'INT8', 'INT32', 'INT64', 'FP16', 'FP32', 'BF16'];
const KINDS: readonly InstanceKind[] = ['KIND_GPU'];

export interface TensorRTBackendInit {
  /** Folders put first on the engine process's PYTHONPATH (tests: the TensorRT test double). */
  pythonPath?: readonly string[];
  /** Extra environment of the engine processes (tests: the double's hooks). */
  env?: Readonly<Record<string, string>>;
}

// Long: a declaration (descriptor, auto-complete, prepare) whose parts are each short; see runtime/process/backend.ts.
export function tensorrtBackend(init: TensorRTBackendInit = {}): Backend & { readonly kinds: readonly InstanceKind[] } {
  /** Facts by plan path, valid while the file's size and mtime (and the loading options) are unchanged. */
  const factsCache = new Map<string, { key: string; facts: PlanFacts }>();
  const environment = (o: TensorRTBackendOptions): TensorRTEnvironment =>
    resolveEnvironment(o, init.pythonPath ?? [], init.env ?? {});
  /** The plan auto-complete found or built per ONNX file, for the load that follows (while the file is unchanged). */
  const onnxPlans = new Map<string, { stamp: string; plan: string }>();

  /** The plan to serve: the model file itself, or the plan built from (or cached for) a `.onnx` model file. */
  async function planOf(
    modelPath: string,
    config: ModelConfig,
    o: TensorRTBackendOptions,
    logger: Logger,
    signal: AbortSignal | undefined,
    reuse: boolean,
  ): Promise<string> {
    const where = `model '${config.name ?? ''}'`;
    if (!modelPath.endsWith('.onnx')) {
      const unused = ONNX_BUILD_PARAMETERS.filter((k) => config.parameters?.[k] !== undefined);
      if (unused.length > 0) {
        logger.warn(
          `${where}: parameter(s) ${unused.join(', ')} apply to a model.onnx built at load; ${modelPath} is a plan already`,
        );
      }
      return modelPath;
    }
    const options = onnxBuildOptions(config, where);
    const st = await stat(modelPath);
    const stamp = `${st.size}:${st.mtimeMs}`;
    const known = onnxPlans.get(modelPath);
    if (reuse && known?.stamp === stamp) return known.plan;
    const env = environment(o);
    const { plan } = await planFromOnnx({
      onnx: modelPath,
      where,
      options,
      env,
      cache: new PlanCache(o.planCacheDirectory ?? join(tensorrtHome(), 'plans')),
      device: config.instance_group?.[0]?.gpus?.[0] ?? 0,
      logger,
      timeoutMs: o.startTimeoutMs,
      signal,
    });
    onnxPlans.set(modelPath, { stamp, plan });
    return plan;
  }

  async function factsFor(
    plan: string,
    o: TensorRTBackendOptions,
    device: number,
    signal?: AbortSignal,
  ): Promise<PlanFacts> {
    let st;
    try {
      st = await stat(plan);
    } catch (e) {
      throw new NotFoundError(`TensorRT plan '${plan}' does not exist`, { cause: e });
    }
    if (!st.isFile()) throw new InvalidArgError(`TensorRT plan '${plan}' is not a file`);
    const key = `${st.size}:${st.mtimeMs}:${o.versionCompatible}:${o.plugins.join(';')}`;
    const hit = factsCache.get(plan);
    if (hit?.key === key) return hit.facts;
    const facts = await probePlan(plan, environment(o), {
      device,
      versionCompatible: o.versionCompatible,
      plugins: o.plugins,
      timeoutMs: o.startTimeoutMs,
      signal,
    });
    factsCache.set(plan, { key, facts });
    return facts;
  }

  return processBackend({
    name: 'tensorrt',
    platforms: ['tensorrt_plan'],
    defaultModelFilename: 'model.plan',
    datatypes: DATATYPES,
    sections: ['model_warmup', 'response_cache'],
    kinds: KINDS,
    // A version-compatible plan carries a lean runtime TensorRT runs as host code; any plan may need plugin code.
    executesModelFile: true,
    settings: {
      keys: KNOWN,
      check: backendOptions,
      parameters: ['execution_context_allocation_strategy', ...ONNX_BUILD_PARAMETERS],
    },
    alternateModelFilenames: ['model.onnx'],
    // A model.onnx sent in a load request may name external data: confined to the model folder like onnxruntime's.
    referencedFiles: (path, content) => (path.endsWith('.onnx') ? externalDataLocations(content) : undefined),
    // One process per GPU: instances restarted together after a crash all land in the same new one.
    placement: 'device',
    shmPrefix: 'nereid_trt_',
    modelFileKind: 'TensorRT plan',

    /** Triton's tensorrt auto-complete from the plan (read on the first instance group's first GPU). */
    async autoComplete(config: ModelConfig, ctx: AutoCompleteContext): Promise<ModelConfig> {
      const name = ctx.modelName;
      requireGpuKinds(config, name);
      const o = backendOptions(ctx.backendConfig);
      const device = config.instance_group?.[0]?.gpus?.[0] ?? 0;
      const plan = await planOf(ctx.modelPath, { ...config, name }, o, ctx.logger, ctx.signal, false);
      const facts = await factsFor(plan, o, device, ctx.signal);
      const completed = ctx.autoComplete
        ? completeFromPlan(config, facts, name, (m) => ctx.logger.warn({ model: name }, m))
        : config;
      checkAgainstPlan(completed, facts, name);
      modelOptions(completed);
      return completed;
    },

    async prepare(ctx: EngineLoadContext & { logger: Logger }, signal?: AbortSignal): Promise<PreparedLoad> {
      const name = ctx.name;
      requireGpuKinds(ctx.config, name);
      const o = backendOptions(ctx.backendConfig);
      const mo = modelOptions(ctx.config);
      const logger = ctx.logger;
      for (const n of mo.notes) logger.warn(`model '${name}': ${n}`);
      const env = environment(o);
      const firstDevice = ctx.config.instance_group?.[0]?.gpus?.[0] ?? 0;
      const plan = await planOf(ctx.modelPath, ctx.config, o, logger, signal, true);
      const facts = await factsFor(plan, o, firstDevice, signal);
      checkAgainstPlan(ctx.config, facts, name);
      logger.info(
        `model '${name}' version ${ctx.version}: TensorRT ${facts.trt_version} (${facts.flavor ?? 'full'} runtime) on ${facts.device_name ?? 'GPU'}, python ${env.executable} (from ${env.source}); ${facts.profiles.length} optimization profile(s)`,
      );
      const options = JSON.stringify(engineOptions(o, mo));
      const profilesOf = (spec: InstanceSpec): number[] =>
        instanceProfiles(spec.profiles, facts, `model '${name}': instance ${spec.name}`);
      return {
        process: {
          kind: 'tensorrt process',
          python: env,
          options: o,
          setup: 'nereid tensorrt setup',
          // An idle engine polls its channel this long before it blocks: a batch that arrives within it skips the
          // wake-up of a blocked process (the python backend's default, measured there: p50 round trip 75 -> 45
          // µs); here it is most of what a batch-1 request pays between two runs.
          args: ['--spin-us', '50'],
        },
        graceMs: 30_000,
        deviceKey: (spec) => spec.device,
        instance: (spec: InstanceSpec) => {
          if (spec.kind !== 'KIND_GPU') {
            throw new UnsupportedError(
              `model '${name}': instance ${spec.name} is ${spec.kind}; TensorRT plans run on GPUs only (KIND_GPU)`,
            );
          }
          return {
            inputLayout: o.coalesceRequestInput ? 'name' : 'request',
            payload: {
              instance_name: spec.name,
              model_path: ENGINE_MODEL_PY,
              decoupled: false,
              args: {
                plan,
                device: String(spec.device),
                profiles: JSON.stringify(profilesOf(spec)),
                max_batch_size: String(ctx.config.max_batch_size),
                instance_name: spec.name,
                options,
              },
            },
          };
        },
        guard: (spec, inner) => new ProfileCheckedInstance(inner, facts, profilesOf(spec), name),
      };
    },

    async close(): Promise<void> {
      await Promise.resolve();
      factsCache.clear();
    },
  });
}

/** What the engine process needs of the options (python/nereid_python/engines/tensorrt/context.py). */
export function engineOptions(o: TensorRTBackendOptions, mo: TensorRTModelOptions): Record<string, unknown> {
  return {
    coalesce: o.coalesceRequestInput,
    plugins: o.plugins,
    version_compatible: o.versionCompatible,
    policy: o.executionPolicy,
    allocation: mo.allocation,
    graphs: mo.graphs,
    graph_specs: mo.graphSpecs.map((s) => ({ batch_size: s.batchSize, inputs: s.inputs })),
    busy_wait_events: mo.busyWaitEvents,
    output_copy_stream: mo.outputCopyStream,
    gather_threshold: mo.gatherKernelBufferThreshold,
  };
}

function requireGpuKinds(config: ModelConfig, name: string): void {
  for (const [i, g] of (config.instance_group ?? []).entries()) {
    if (g.kind === 'KIND_CPU' || g.kind === 'KIND_MODEL') {
      throw new UnsupportedError(
        `model '${name}': instance_group[${i}] is ${g.kind}, but TensorRT plans run on GPUs only: use KIND_GPU (or KIND_AUTO on a machine with a GPU)`,
      );
    }
  }
}

/**
 * An instance whose requests are checked against its optimization profiles first: a request no profile can hold
 * is answered INVALID_ARG (400) naming the allowed ranges, the others go to the engine process.
 */
class ProfileCheckedInstance implements Instance {
  readonly name: string;
  readonly died: Promise<Error>;
  readonly #inner: ProcessInstance;
  readonly #facts: PlanFacts;
  readonly #profiles: readonly number[];
  readonly #model: string;

  constructor(inner: ProcessInstance, facts: PlanFacts, profiles: readonly number[], model: string) {
    this.name = inner.name;
    this.died = inner.died;
    this.#inner = inner;
    this.#facts = facts;
    this.#profiles = profiles;
    this.#model = model;
  }

  /** The engine process (tests kill it to check the health rules). */
  get pid(): number {
    return this.#inner.pid;
  }

  execute = (
    requests: readonly EngineRequest[],
    responder: Responder,
    signal: AbortSignal,
  ): Promise<ExecuteTimings> => {
    const ok: number[] = [];
    requests.forEach((r, i) => {
      const shapes = new Map(r.inputs.map((t) => [t.name, t.shape]));
      const outside = requestOutsideProfiles(this.#facts, this.#profiles, shapes);
      if (outside === undefined) ok.push(i);
      else responder.send(i, new InvalidArgError(`model '${this.#model}': ${outside}`), { final: true });
    });
    if (ok.length === requests.length) return this.#inner.execute(requests, responder, signal);
    if (ok.length === 0) return Promise.resolve({ computeInputNs: 0, computeInferNs: 0, computeOutputNs: 0 });
    return this.#inner.execute(
      ok.map((i) => requests[i]),
      { send: (j, resp, o) => responder.send(ok[j], resp, o) },
      signal,
    );
  };

  destroy(): Promise<void> {
    return this.#inner.destroy();
  }
}
