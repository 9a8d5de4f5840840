import { readFile } from 'node:fs/promises';
import { modelConfigFromJson, modelConfigToJson } from '../../config/index.js';
import { maxBatchOf, type ModelConfig } from '../../config/model-config.js';
import { ALL_DATATYPES } from '../../core/datatypes.js';
import { InvalidArgError, UnavailableError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { AutoCompleteContext, Backend, EngineLoadContext, InstanceSpec } from '../contract.js';
import { checkModelFile, processBackend, type PreparedLoad } from '../runtime/process/backend.js';
import type { ServiceHandler } from '../runtime/process/child.js';
import { segmentPrefix } from '../runtime/process/owner.js';
import { startEngineProcess } from '../runtime/process/shared-hosts.js';
import { blsService, type ModelCaller } from './bls.js';
import { CustomMetrics } from '../../core/custom-metrics.js';
import { metricsService } from './custom-metrics.js';
import { isModelController, modelControlService } from './model-control.js';
import { childEnv } from '../runtime/process/python-env.js';
import type { ChildProcessHost } from '../runtime/process/child.js';
import type { FromChild } from '../runtime/process/protocol.js';
import { resolveInterpreter, type Interpreter } from './interpreter.js';
import {
  executeTimeoutMs,
  forceCpuOnlyInputs,
  PYTHON_SETTING_KEYS,
  pythonOptions,
  type PythonOptions,
} from './options.js';

/**
 * Triton's python backend (`backend: "python"`, `model.py` with `TritonPythonModel`), one stub process per
 * instance over the child-process transport. The stub and `triton_python_backend_utils` are python/.
 */

/** A python backend plus the hook the server uses to let models call models (BLS). */
export interface PythonBackend extends Backend {
  /** Gives BLS calls a way into the server; until then they fail UNAVAILABLE. */
  attachModelCaller(caller: ModelCaller): void;
}

// Long: a declaration (descriptor, auto-complete, prepare) whose parts are each short; see runtime/process/backend.ts.
export function pythonBackend(
  opts: {
    caller?: ModelCaller;
    customMetrics?: CustomMetrics;
    /** Why models may not load or unload models (a restricted model-repository API; serve-options.ts). */
    modelRepositoryRestriction?: string;
  } = {},
): PythonBackend {
  let caller = opts.caller;
  // Custom metrics (pb_utils.MetricFamily) go to the server's store when it has one to export, else stay here.
  const customMetrics = opts.customMetrics ?? new CustomMetrics();
  const metrics = metricsService(() => customMetrics);
  const stub = (interp: Interpreter, o: PythonOptions): PreparedLoad['process'] => ({
    kind: 'python process',
    python: { executable: interp.executable, source: interp.source, env: childEnv() },
    args: ['--spin-us', String(o.stubSpinUs)],
    options: {
      shmDefaultByteSize: o.shmDefaultByteSize,
      shmGrowthByteSize: o.shmGrowthByteSize,
      startTimeoutMs: o.stubTimeoutMs,
    },
    setup: 'bash scripts/setup-python.sh',
  });

  const backend = processBackend({
    name: 'python',
    platforms: [],
    defaultModelFilename: 'model.py',
    datatypes: ALL_DATATYPES,
    // Only what runs end to end: the sequence batcher, warm-up and the response cache are not built yet, and a
    // section claimed here would be silently ignored instead of failing the load.
    sections: ['decoupled'],
    // Triton passes the kind to the model (args['model_instance_kind']); the model decides where it runs.
    kinds: ['KIND_GPU', 'KIND_CPU', 'KIND_MODEL'],
    executesModelFile: true,
    // No parameter list: a python model's parameters are its own (args['model_config']), never checked.
    settings: { keys: PYTHON_SETTING_KEYS, check: pythonOptions },
    placement: 'instance',
    shmPrefix: 'nereid_python_',
    modelFileKind: 'python model file',

    /**
     * Runs the model's static `auto_complete_config` in a short-lived stub (Triton: an interpreter destroyed
     * afterwards). With auto-complete off, the config is taken as it is.
     */
    async autoComplete(config: ModelConfig, ctx: AutoCompleteContext): Promise<ModelConfig> {
      if (!ctx.autoComplete) return config;
      await checkModelFile(ctx.modelPath, 'python model file', ctx.modelName);
      // A model.py that never mentions it has nothing to run: no process to start (half a second per load).
      if (!(await readFile(ctx.modelPath, 'utf8')).includes('auto_complete_config')) return config;
      const o = pythonOptions(ctx.backendConfig);
      const interp = await resolveInterpreter(config, modelDirOf(ctx.modelPath), o);
      const host = await startEngineProcess(
        { ...stub(interp, o), shmPrefix: segmentPrefix('nereid_python_'), logger: ctx.logger },
        ctx.signal,
      );
      host.services = refuseInAutoComplete;
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

    async prepare(ctx: EngineLoadContext & { logger: Logger }): Promise<PreparedLoad> {
      const o = pythonOptions(ctx.backendConfig);
      const interp = await resolveInterpreter(ctx.config, ctx.modelDir, o);
      const cpuOnlyInputs = forceCpuOnlyInputs(ctx.config);
      const decoupled = ctx.config.model_transaction_policy?.decoupled === true;
      const configJson = JSON.stringify(modelConfigToJson(ctx.config));
      return {
        process: stub(interp, o),
        services: stubServices(
          childServices(() => caller, ctx, opts.modelRepositoryRestriction),
          metrics,
        ),
        graceMs: o.finalizeTimeoutMs,
        executeTimeoutMs: executeTimeoutMs(ctx.config, o),
        started: (host) =>
          ctx.logger.info(
            `model '${ctx.name}' runs on python ${String(host.info.python)} (${interp.executable}, from ${interp.source}; numpy ${String(host.info.numpy)})`,
          ),
        instance: (spec: InstanceSpec) => ({
          // Client CUDA memory reaches the model as GPU tensors only when it asked for them (Triton's rule).
          deviceMemory: spec.kind === 'KIND_GPU' && !cpuOnlyInputs ? { kind: 'cuda', device: spec.device } : undefined,
          payload: {
            instance_name: spec.name,
            model_path: ctx.modelPath,
            decoupled,
            // request.set_release_flags(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) needs an iterative sequence batcher.
            iterative: ctx.config.sequence_batching?.iterative_sequence === true,
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
        }),
      };
    },
  });
  return {
    ...backend,
    attachModelCaller(c: ModelCaller): void {
      caller = c;
    },
  };
}

/**
 * The auto-complete stub serves no model yet: a BLS call or custom metric made from `auto_complete_config` is
 * answered with an error at once instead of waiting for an answer that never comes.
 */
function refuseInAutoComplete(msg: FromChild, host: ChildProcessHost): void {
  const what = msg.op === 'bls' ? 'BLS calls are' : 'custom metrics are';
  const e = { c: 'UNSUPPORTED' as const, m: `${what} not available in auto_complete_config` };
  if (msg.op === 'bls') host.send({ op: 'bls_resp', call: msg.call, fin: true, e });
  else if (msg.op === 'metric' && msg.call !== undefined) host.send({ op: 'metric_resp', call: msg.call, e });
}

/** Routes a stub's service messages: custom metrics to their store, the rest (BLS) to `bls`. */
function stubServices(
  bls: (msg: FromChild, host: ChildProcessHost) => void,
  metrics: ReturnType<typeof metricsService>,
): (msg: FromChild, host: ChildProcessHost) => void {
  return (msg, host) => (msg.op === 'metric' ? metrics(msg, host) : bls(msg, host));
}

/** A load's child → host calls: BLS (bls.ts) and the model loading API (model-control.ts). */
function childServices(
  getCaller: () => ModelCaller | undefined,
  ctx: EngineLoadContext & { logger: Logger },
  restriction: string | undefined,
): ServiceHandler {
  const bls = blsService(getCaller, ctx.logger);
  const control = modelControlService(
    () => {
      const c = getCaller();
      return isModelController(c) ? c : undefined;
    },
    { name: ctx.name, version: ctx.version },
    restriction,
  );
  return (msg, host) => (msg.op === 'mctl' ? control(msg, host) : bls(msg, host));
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
  if (maxBatchOf(done) !== maxBatchOf(config)) out.max_batch_size = done.max_batch_size;
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
