import type { ModelSignature, TensorSignature } from './contract.js';
import {
  maxBatchOf,
  type ConfigDataType,
  type ModelConfig,
  type ModelInput,
  type ModelOutput,
} from '../config/model-config.js';
import { scheduledInputNames, stateOutputNames } from '../config/sequence-names.js';
import { DATATYPES, dataTypeFromConfig } from '../core/datatypes.js';
import { InvalidArgError } from '../core/errors.js';

/**
 * Triton's onnxruntime auto-complete, then the check that the config and the model file agree.
 * Pure: the caller reads the signature from the backend.
 */

export interface CompleteOptions {
  /** Fill inputs/outputs/max_batch_size/dynamic_batching from the model (off with --disable-auto-complete-config). */
  autoComplete: boolean;
  /** `default-max-batch-size` from backend-config (Triton's default 4). */
  defaultMaxBatchSize: number;
  /** Receives what the operator should read (Triton logs it as a warning). */
  warn: (message: string) => void;
  /**
   * Inputs a request may leave out because the model has a default for them (onnxruntime's overridable
   * initializers): never auto-filled, but a config may declare them (Triton: as `optional: true` inputs).
   */
  optionalInputs?: readonly TensorSignature[];
}

const fmt = (d: readonly number[]): string => `[${d.join(',')}]`;

function configType(t: TensorSignature): ConfigDataType {
  return DATATYPES[t.datatype].configName as ConfigDataType;
}

/** Dims without the batch dim when batching; an empty dims list becomes [1] with reshape [] (Triton). */
function completeTensor(t: TensorSignature, batching: boolean): ModelInput & ModelOutput {
  const dims = batching ? t.dims.slice(1) : [...t.dims];
  if (dims.length === 0) return { name: t.name, data_type: configType(t), dims: [1], reshape: { shape: [] } };
  return { name: t.name, data_type: configType(t), dims };
}

/** Returns a new config completed from the signature (when allowed) and checked against it. */
export function completeConfig(
  input: ModelConfig,
  sig: ModelSignature,
  modelName: string,
  opts: CompleteOptions,
): ModelConfig {
  const config: ModelConfig = structuredClone(input);
  const hasInputs = (config.input?.length ?? 0) > 0;
  const hasOutputs = (config.output?.length ?? 0) > 0;
  if (opts.autoComplete && !(hasInputs && hasOutputs)) {
    const all = [...sig.inputs, ...sig.outputs];
    const canBatch = all.length > 0 && all.every((t) => t.dims.length > 0 && t.dims[0] === -1);
    const mbs = maxBatchOf(config);
    if (canBatch && mbs === 0 && opts.defaultMaxBatchSize === 0) {
      // Triton's rule: 0 fills nothing in. Said once, so that the unbatched shapes are no surprise.
      opts.warn(
        `model '${modelName}' supports batching, but default-max-batch-size is 0: max_batch_size stays 0 (no batching) and its inputs and outputs keep their first dim (-1) in every request; set max_batch_size in config.pbtxt or a default-max-batch-size above 0 to batch`,
      );
    } else if (canBatch && mbs === 0) {
      config.max_batch_size = opts.defaultMaxBatchSize;
      opts.warn(
        `autofilled max_batch_size to ${opts.defaultMaxBatchSize} for model '${modelName}' since batching is supported but no max_batch_size is specified in model configuration; set max_batch_size: 0 to disable batching`,
      );
    } else if (!canBatch && mbs !== 0) {
      throw new InvalidArgError(
        `model '${modelName}': the model file does not support batching (not every input and output has a dynamic first dim), but config.pbtxt sets max_batch_size: ${mbs}; set max_batch_size: 0`,
      );
    }
    const batching = maxBatchOf(config) > 0;
    // Sequence control and state tensors are the sequence batcher's, not the client's.
    const scheduled = scheduledInputNames(config);
    const states = stateOutputNames(config);
    if (!hasInputs)
      config.input = sig.inputs.filter((t) => !scheduled.has(t.name)).map((t) => completeTensor(t, batching));
    if (!hasOutputs)
      config.output = sig.outputs.filter((t) => !states.has(t.name)).map((t) => completeTensor(t, batching));
    // Like Triton's onnxruntime backend, only inside auto-complete: a config that already declares every input
    // and output keeps the scheduler it names (none = no batching).
    if (maxBatchOf(config) > 1 && !config.dynamic_batching && !config.sequence_batching) {
      config.dynamic_batching = {};
    }
  }
  checkAgainstModel(config, sig, modelName, opts.optionalInputs);
  return config;
}

/** A config that contradicts the model file is a load error naming both sides. */
export function checkAgainstModel(
  config: ModelConfig,
  sig: ModelSignature,
  modelName: string,
  optionalInputs: readonly TensorSignature[] = [],
): void {
  const batching = maxBatchOf(config) > 0;
  const side = (kind: 'input' | 'output', cfg: (ModelInput | ModelOutput)[], model: TensorSignature[]): void => {
    const byName = new Map(model.map((t) => [t.name, t]));
    for (const c of cfg) {
      const m = byName.get(c.name ?? '');
      if (!m) {
        throw new InvalidArgError(
          `model '${modelName}': config.pbtxt declares ${kind} '${c.name}', but the model file's ${kind}s are [${model.map((t) => `'${t.name}'`).join(', ')}]`,
        );
      }
      const dt = dataTypeFromConfig(c.data_type ?? 'TYPE_INVALID');
      if (dt !== m.datatype) {
        throw new InvalidArgError(
          `model '${modelName}': ${kind} '${c.name}' is ${m.datatype} in the model file, but config.pbtxt says data_type: ${c.data_type}`,
        );
      }
      const cdims = c.reshape ? (c.reshape.shape ?? []) : (c.dims ?? []);
      const full = batching ? [-1, ...cdims] : cdims;
      // A dynamic model dim accepts anything the config says; a fixed one must be repeated exactly
      // (so the batch dim, -1 in `full`, needs a dynamic first dim in the model).
      const ok = full.length === m.dims.length && full.every((d, i) => m.dims[i] === -1 || d === m.dims[i]);
      if (!ok) {
        throw new InvalidArgError(
          `model '${modelName}': ${kind} '${c.name}' has shape ${fmt(m.dims)} in the model file, but config.pbtxt gives ${fmt(full)} (dims ${fmt(cdims)}${batching ? ` with max_batch_size ${config.max_batch_size} adding the batch dim` : ''})`,
        );
      }
    }
  };
  side('input', config.input ?? [], [...sig.inputs, ...optionalInputs]);
  side('output', config.output ?? [], sig.outputs);
  const scheduled = scheduledInputNames(config);
  const declared = new Set([...(config.input ?? []).map((i) => i.name), ...scheduled]);
  const missing = sig.inputs.filter((t) => !declared.has(t.name));
  const fileInputs = new Set(sig.inputs.map((t) => t.name));
  const fileOutputs = new Set(sig.outputs.map((t) => t.name));
  for (const name of scheduled) {
    if (!fileInputs.has(name)) {
      throw new InvalidArgError(
        `model '${modelName}': sequence_batching feeds input '${name}', but the model file's inputs are [${sig.inputs.map((t) => `'${t.name}'`).join(', ')}]`,
      );
    }
  }
  for (const name of stateOutputNames(config)) {
    if (!fileOutputs.has(name)) {
      throw new InvalidArgError(
        `model '${modelName}': sequence_batching state output '${name}' is not an output of the model file (its outputs are [${sig.outputs.map((t) => `'${t.name}'`).join(', ')}])`,
      );
    }
  }
  if (missing.length > 0) {
    throw new InvalidArgError(
      `model '${modelName}': the model file needs input(s) [${missing.map((t) => `'${t.name}'`).join(', ')}] that config.pbtxt does not declare`,
    );
  }
}
