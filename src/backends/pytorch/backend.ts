import type { ModelConfig, ModelInput, ModelOutput, NormalizedConfig } from '../../config/model-config.js';
import { dataTypeFromConfig, type DataType } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import type { Logger } from '../../core/logger.js';
import type { AutoCompleteContext, Backend, EngineLoadContext, InstanceKind, InstanceSpec } from '../contract.js';
import { processBackend, type PreparedLoad } from '../runtime/process/backend.js';
import { ENGINE_MODEL_PY, gpuUsable, resolveEnvironment } from './environment.js';
import { backendOptions, modelOptions, PYTORCH_PARAMETERS, PYTORCH_SETTING_KEYS } from './options.js';

/**
 * Triton's pytorch backend (`platform: "pytorch_libtorch"`, `backend: "pytorch"`, `model.pt`: TorchScript) over
 * the child-process transport: per model version, ONE Python process per device ('cpu', 'cuda:N') hosting every
 * instance placed there (the process-wide torch settings, INTRA_OP_THREAD_COUNT and the like, are the model's;
 * ENABLE_WEIGHT_SHARING shares one module between them). The engine is python/nereid_python/engines/pytorch. Like
 * Triton, it cannot read inputs and outputs from a TorchScript file: a config must declare them.
 *
 * Threading: main thread only.
 */

/** Datatypes a TorchScript tensor has (and BYTES as List[str]), those Triton's pytorch backend maps. */
const DATATYPES: readonly DataType[] = [
  'BOOL',
  'UINT8',
  'INT8',
  'INT16',
  'INT32',
  'INT64',
  'FP16',
  'FP32',
  'FP64',
  'BF16',
  'BYTES',
];

export interface PyTorchBackendInit {
  /** Instance kinds, preferred first (tests: a machine without a GPU); default from the machine. */
  kinds?: readonly InstanceKind[];
}

export function pytorchBackend(init: PyTorchBackendInit = {}): Backend & { readonly kinds: readonly InstanceKind[] } {
  const kinds = init.kinds ?? (gpuUsable() ? ['KIND_GPU', 'KIND_CPU'] : ['KIND_CPU', 'KIND_GPU']);
  const backend = processBackend({
    name: 'pytorch',
    platforms: ['pytorch_libtorch'],
    defaultModelFilename: 'model.pt',
    datatypes: DATATYPES,
    sections: [],
    // KIND_AUTO takes the first: GPU where one is usable (Triton's rule). KIND_GPU stays accepted elsewhere so that
    // its load fails with torch's own reason (a CPU-only build, no device).
    kinds,
    executesModelFile: true,
    settings: {
      keys: PYTORCH_SETTING_KEYS,
      check: backendOptions,
      parameters: PYTORCH_PARAMETERS,
      ignoredParameters: {
        DISABLE_CUDNN: "Nereid's pytorch engine leaves cuDNN as torch sets it",
      },
    },
    // One process per device: instances restarted after a crash land together in the new one.
    placement: 'device',
    shmPrefix: 'nereid_torch_',
    modelFileKind: 'TorchScript file',

    /**
     * Triton cannot complete a TorchScript model's config (the file has no typed signature to read), and neither
     * can Nereid: a config without inputs or outputs fails here with what it must declare.
     */
    async autoComplete(config: ModelConfig, ctx: AutoCompleteContext): Promise<ModelConfig> {
      await Promise.resolve();
      requireDeclared(config, ctx.modelName);
      modelOptions({ ...config, name: ctx.modelName });
      return config;
    },

    async prepare(ctx: EngineLoadContext & { logger: Logger }): Promise<PreparedLoad> {
      await Promise.resolve();
      const name = ctx.name;
      requireDeclared(ctx.config, name);
      const o = backendOptions(ctx.backendConfig);
      const options = JSON.stringify(modelOptions(ctx.config));
      const env = resolveEnvironment(o);
      ctx.logger.info(
        `model '${name}' version ${ctx.version} runs on PyTorch in ${env.executable} (from ${env.source})`,
      );
      const io = JSON.stringify(ioOf(ctx.config));
      const device = (spec: InstanceSpec): string => (spec.kind === 'KIND_GPU' ? `cuda:${spec.device}` : 'cpu');
      return {
        process: { kind: 'pytorch process', python: env, options: o, setup: 'bash scripts/setup-python.sh --torch' },
        graceMs: 30_000,
        deviceKey: device,
        instance: (spec: InstanceSpec) => ({
          // Inputs of one name lie back to back across the batch: the engine joins them without a copy.
          inputLayout: 'name',
          // Client CUDA memory on the instance's GPU reaches forward() in place (engines/pytorch/instance.py).
          deviceMemory: spec.kind === 'KIND_GPU' ? { kind: 'cuda', device: spec.device } : undefined,
          payload: {
            instance_name: spec.name,
            model_path: ENGINE_MODEL_PY,
            decoupled: false,
            engine: 'pytorch',
            args: {
              model_path: ctx.modelPath,
              model_name: name,
              device: device(spec),
              instance_name: spec.name,
              io,
              options,
            },
          },
        }),
      };
    },
  });
  return { ...backend, kinds };
}

/** A config must declare inputs and outputs (Triton cannot read them from TorchScript either). */
function requireDeclared(config: ModelConfig, model: string): void {
  const missing = [
    (config.input?.length ?? 0) === 0 ? 'input' : '',
    (config.output?.length ?? 0) === 0 ? 'output' : '',
  ].filter((s) => s !== '');
  if (missing.length === 0) return;
  throw new InvalidArgError(
    `model '${model}': a TorchScript model's config cannot be auto-completed (it has no typed signature to read; Triton cannot either), so config.pbtxt must declare max_batch_size and every ${missing.join(' and every ')} with name, data_type and dims. ` +
      `Inputs are named after forward()'s arguments, or INPUT__0, INPUT__1, ... by position; outputs OUTPUT__0, OUTPUT__1, ... by position in what forward() returns (any other names: config order). ` +
      `Example: input [ { name: "INPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ] output [ { name: "OUTPUT__0" data_type: TYPE_FP32 dims: [ -1 ] } ]`,
  );
}

interface IoSpec {
  name: string;
  datatype: string;
  dims: number[];
}

/** What the engine needs of the config: inputs and outputs (datatype, dims as the model sees them). */
function ioOf(config: NormalizedConfig): { inputs: IoSpec[]; outputs: IoSpec[]; max_batch_size: number } {
  const spec = (t: ModelInput | ModelOutput): IoSpec => ({
    name: t.name ?? '',
    datatype: dataTypeFromConfig(t.data_type ?? 'TYPE_INVALID') ?? 'INVALID',
    dims: (t.reshape ? (t.reshape.shape ?? []) : (t.dims ?? [])).map(Number),
  });
  return {
    inputs: config.input.map(spec),
    outputs: config.output.map(spec),
    max_batch_size: config.max_batch_size,
  };
}
