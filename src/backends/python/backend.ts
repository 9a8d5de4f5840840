import { readFile, stat } from 'node:fs/promises';
import { modelConfigFromJson, modelConfigToJson } from '../../config/index.js';
import type { ModelConfig } from '../../config/model-config.js';
import { ALL_DATATYPES } from '../../core/datatypes.js';
import { InvalidArgError, NereidError, NotFoundError, UnavailableError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type {
  AutoCompleteContext,
  Backend,
  EngineLoadContext,
  Instance,
  InstanceSpec,
  ModelHandle,
} from '../contract.js';
import { ChildProcessHost } from '../runtime/process/child.js';
import { ProcessInstance } from '../runtime/process/instance.js';
import { segmentPrefix, sweepStaleSegments } from '../runtime/process/owner.js';
import { blsService, type ModelCaller } from './bls.js';
import { responseChecker } from './check.js';
import { childEnv, resolveInterpreter, type Interpreter } from './interpreter.js';
import { executeTimeoutMs, forceCpuOnlyInputs, pythonOptions, type PythonOptions } from './options.js';

/**
 * Triton's python backend (`backend: "python"`, `model.py` with `TritonPythonModel`), one stub process per
 * instance over the child-process transport. The stub and `triton_python_backend_utils` are python/.
 */

/** A python backend plus the hook the server uses to let models call models (BLS). */
export interface PythonBackend extends Backend {
  /** Gives BLS calls a way into the server; until then they fail UNAVAILABLE. */
  attachModelCaller(caller: ModelCaller): void;
}

export function pythonBackend(opts: { caller?: ModelCaller } = {}): PythonBackend {
  let caller = opts.caller;
  let cleaned = false;
  // Segments of servers killed before they could remove them (the server sweeps at start too; this covers a
  // backend used on its own).
  const cleanOnce = (): void => {
    if (cleaned) return;
    cleaned = true;
    sweepStaleSegments();
  };

  async function startStub(
    interp: Interpreter,
    o: PythonOptions,
    logger: Logger,
    signal?: AbortSignal,
  ): Promise<ChildProcessHost> {
    cleanOnce();
    try {
      return await ChildProcessHost.start(
        {
          kind: 'python process',
          command: interp.executable,
          args: ['-m', 'nereid_python', '--spin-us', String(o.stubSpinUs)],
          env: childEnv(),
          shm: {
            prefix: segmentPrefix(o.shmPrefix),
            defaultByteSize: o.shmDefaultByteSize,
            growthByteSize: o.shmGrowthByteSize,
          },
          startTimeoutMs: o.stubTimeoutMs,
          logger,
        },
        signal,
      );
    } catch (e) {
      const err = NereidError.from(e);
      if (/No module named 'numpy'/.test(err.message)) {
        throw new UnavailableError(
          `python interpreter '${interp.executable}' (from ${interp.source}) has no numpy: run 'bash scripts/setup-python.sh' or install numpy into it`,
          { cause: e },
        );
      }
      throw err;
    }
  }

  return {
    name: 'python',
    platforms: [],
    defaultModelFilename: 'model.py',
    datatypes: ALL_DATATYPES,
    // Only what runs end to end: the sequence batcher, warm-up and the response cache are not built yet, and a
    // section claimed here would be silently ignored instead of failing the load.
    sections: ['decoupled'],
    // Triton passes the kind to the model (args['model_instance_kind']); the model decides where it runs.
    kinds: ['KIND_GPU', 'KIND_CPU', 'KIND_MODEL'],

    attachModelCaller(c: ModelCaller): void {
      caller = c;
    },

    /**
     * Runs the model's static `auto_complete_config` in a short-lived stub (Triton: an interpreter destroyed
     * afterwards). With auto-complete off, the config is taken as it is.
     */
    async autoComplete(config: ModelConfig, ctx: AutoCompleteContext): Promise<ModelConfig> {
      if (!ctx.autoComplete) return config;
      await checkModelFile(ctx.modelPath);
      // A model.py that never mentions it has nothing to run: no process to start (half a second per load).
      if (!(await readFile(ctx.modelPath, 'utf8')).includes('auto_complete_config')) return config;
      const o = pythonOptions(ctx.backendConfig);
      const interp = await resolveInterpreter(config, modelDirOf(ctx.modelPath), o);
      const host = await startStub(interp, o, ctx.logger, ctx.signal);
      try {
        const reply = await host.request(
          { op: 'autocomplete', model_path: ctx.modelPath, config: modelConfigToJson(config) },
          ctx.signal,
        );
        if (reply.op === 'error') {
          if (reply.tb) {
            ctx.logger.error(`auto_complete_config of model '${ctx.modelName}' failed:\n${reply.tb}`);
          }
          throw new InvalidArgError(`model '${ctx.modelName}': auto_complete_config failed: ${reply.e.m}`);
        }
        if (reply.op !== 'autocompleted')
          throw new UnavailableError(`unexpected '${reply.op}' from the auto-complete stub`);
        const done = modelConfigFromJson(
          JSON.stringify(reply.config),
          `auto_complete_config of model '${ctx.modelName}'`,
        );
        return completedBy(config, done);
      } finally {
        await host.close(1000);
      }
    },

    async load(ctx: EngineLoadContext & { logger: Logger }, signal?: AbortSignal): Promise<ModelHandle> {
      await checkModelFile(ctx.modelPath);
      const o = pythonOptions(ctx.backendConfig);
      const interp = await resolveInterpreter(ctx.config, ctx.modelDir, o);
      // The loader's logger already carries the model and version.
      const logger = ctx.logger;
      const timeout = executeTimeoutMs(ctx.config, o);
      const cpuOnlyInputs = forceCpuOnlyInputs(ctx.config);
      const decoupled = ctx.config.model_transaction_policy?.decoupled === true;
      const configJson = JSON.stringify(modelConfigToJson(ctx.config));
      const services = blsService(() => caller, logger);
      let announced = false;
      const hosts = new Set<ChildProcessHost>();
      if (signal?.aborted) throw new UnavailableError(`load of model '${ctx.name}' was cancelled`);

      return {
        async createInstance(spec: InstanceSpec, sig?: AbortSignal): Promise<Instance> {
          const ilogger = logger.child({ instance: spec.name });
          const host = await startStub(interp, o, ilogger, sig);
          hosts.add(host);
          // `exited` never rejects.
          void host.exited.then(() => hosts.delete(host));
          host.services = services;
          if (!announced) {
            announced = true;
            logger.info(
              `model '${ctx.name}' runs on python ${String(host.info.python)} (${interp.executable}, from ${interp.source}; numpy ${String(host.info.numpy)})`,
            );
          }
          try {
            return await ProcessInstance.create(
              host,
              {
                name: spec.name,
                decoupled,
                executeTimeoutMs: timeout,
                destroyGraceMs: o.finalizeTimeoutMs,
                ownsProcess: true,
                logger: ilogger,
                check: responseChecker(ctx.config, spec.name),
                // Client CUDA memory reaches the model as GPU tensors only when it asked for them (Triton's rule).
                deviceMemory:
                  spec.kind === 'KIND_GPU' && !cpuOnlyInputs ? { kind: 'cuda', device: spec.device } : undefined,
                payload: {
                  instance_name: spec.name,
                  model_path: ctx.modelPath,
                  decoupled,
                  args: {
                    model_config: configJson,
                    model_instance_kind: spec.kind.replace(/^KIND_/, ''),
                    model_instance_device_id: String(Math.max(0, spec.device)),
                    model_instance_name: spec.name,
                    model_repository: ctx.modelDir,
                    model_version: String(ctx.version),
                    model_name: ctx.name,
                  },
                },
              },
              sig,
            );
          } catch (e) {
            await host.close(1000);
            throw e;
          }
        },
        async unload(): Promise<void> {
          // Instances close their own processes; anything left (an instance never destroyed) goes now.
          await Promise.all([...hosts].map((h) => h.close(o.finalizeTimeoutMs)));
        },
      };
    },
  };
}

async function checkModelFile(path: string): Promise<void> {
  try {
    const st = await stat(path);
    if (!st.isFile()) throw new InvalidArgError(`python model '${path}' is not a file`);
  } catch (e) {
    if (e instanceof NereidError) throw e;
    throw new NotFoundError(`python model file '${path}' does not exist`, { cause: e });
  }
}

/** `<model>/<version>/model.py` → `<model>`. */
function modelDirOf(modelPath: string): string {
  return modelPath.replace(/\/[^/]+\/[^/]+$/, '');
}

/**
 * What auto_complete_config may change (Triton: max_batch_size, inputs, outputs, the dynamic batcher and the
 * transaction policy), taken from its answer; everything else stays as the config had it (the answer is the
 * config's JSON form with every default filled in, which must not turn "unset" into "" or 0).
 */
function completedBy(config: ModelConfig, done: ModelConfig): ModelConfig {
  const out: ModelConfig = { ...config };
  if ((done.max_batch_size ?? 0) !== (config.max_batch_size ?? 0)) out.max_batch_size = done.max_batch_size;
  if ((done.input?.length ?? 0) > 0) out.input = done.input;
  if ((done.output?.length ?? 0) > 0) out.output = done.output;
  if (done.dynamic_batching !== undefined) out.dynamic_batching = done.dynamic_batching;
  if (
    done.model_transaction_policy?.decoupled !== undefined &&
    done.model_transaction_policy.decoupled !== (config.model_transaction_policy?.decoupled ?? false)
  ) {
    out.model_transaction_policy = { decoupled: done.model_transaction_policy.decoupled };
  }
  return out;
}
