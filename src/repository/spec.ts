import type { ModelInput, ModelOutput, NormalizedConfig } from '../config/model-config.js';
import { dataTypeFromConfig, type DataType } from '../core/datatypes.js';
import { InvalidArgError } from '../core/errors.js';
import type { EnsembleGraph } from '../scheduler/ensemble/graph.js';
import type { SequenceSpec } from '../scheduler/sequence/spec.js';

/**
 * A model's config resolved once at load into what the hot path reads: no optional fields, no `?? 0`, maps
 * built once. Immutable; validation, scheduling and responses all use it.
 */

export interface TensorSpec {
  readonly name: string;
  readonly datatype: DataType;
  /** The config's dims (without the batch dim). */
  readonly dims: readonly number[];
  /** What a request must send: dims with -1 in front when the model batches. */
  readonly fullDims: readonly number[];
  /** `reshape` dims (without the batch dim), or undefined. */
  readonly reshape: readonly number[] | undefined;
  readonly optional: boolean;
  readonly ragged: boolean;
}

export interface ModelSpec {
  readonly name: string;
  /** The final config, frozen (the /config answer). */
  readonly config: Readonly<NormalizedConfig>;
  readonly platform: string;
  readonly backend: string;
  /** 0 when the model does not batch. */
  readonly maxBatchSize: number;
  /**
   * max_batch_size came from auto-complete (the model file batches, config.pbtxt set none): a request over it is
   * told so, and how to raise it, since the user never wrote that number.
   */
  readonly maxBatchSizeAutoCompleted: boolean;
  readonly batching: boolean;
  readonly inputs: ReadonlyMap<string, TensorSpec>;
  /** Position of each input in the config: requests reach the engine with their inputs in this order. */
  readonly inputOrder: ReadonlyMap<string, number>;
  readonly outputs: ReadonlyMap<string, TensorSpec>;
  /** Output names in config order (every output, when a request names none). */
  readonly outputNames: readonly string[];
  readonly requiredInputs: readonly string[];
  /** Class labels per output name, from `label_filename`. */
  readonly labels: ReadonlyMap<string, readonly string[]>;
  /** `sequence_batching` resolved; undefined for a model without it. */
  readonly sequence: SequenceSpec | undefined;
  /** An ensemble's steps; undefined for a model run by a backend. */
  readonly ensemble: EnsembleGraph | undefined;
}

/** What `resolveSpec` is given beyond the config (read from files by the loader). */
export interface SpecExtras {
  labels: ReadonlyMap<string, readonly string[]>;
  sequence?: SequenceSpec;
  ensemble?: EnsembleGraph;
  /** See ModelSpec.maxBatchSizeAutoCompleted. */
  maxBatchSizeAutoCompleted?: boolean;
}

function tensorSpec(t: ModelInput | ModelOutput, batching: boolean, kind: string): TensorSpec {
  const datatype = dataTypeFromConfig(t.data_type ?? 'TYPE_INVALID');
  if (datatype === undefined) throw new InvalidArgError(`${kind} '${t.name}' has no valid data_type`);
  const dims = Object.freeze([...(t.dims ?? [])]);
  return Object.freeze({
    name: t.name as string,
    datatype,
    dims,
    fullDims: Object.freeze(batching ? [-1, ...dims] : [...dims]),
    reshape: t.reshape ? Object.freeze([...(t.reshape.shape ?? [])]) : undefined,
    optional: 'optional' in t ? Boolean(t.optional) : false,
    ragged: 'allow_ragged_batch' in t ? Boolean(t.allow_ragged_batch) : false,
  });
}

export function resolveSpec(config: NormalizedConfig, extras: SpecExtras): ModelSpec {
  const maxBatchSize = config.max_batch_size;
  const batching = maxBatchSize > 0;
  const inputs = new Map(config.input.map((t) => [t.name as string, tensorSpec(t, batching, 'input')]));
  const outputs = new Map(config.output.map((t) => [t.name as string, tensorSpec(t, batching, 'output')]));
  return Object.freeze({
    name: config.name as string,
    config: Object.freeze(config),
    platform: config.platform ?? config.backend ?? '',
    backend: config.backend ?? '',
    maxBatchSize,
    maxBatchSizeAutoCompleted: extras.maxBatchSizeAutoCompleted === true && batching,
    batching,
    inputs,
    inputOrder: new Map([...inputs.keys()].map((n, i) => [n, i])),
    outputs,
    outputNames: Object.freeze([...outputs.keys()]),
    requiredInputs: Object.freeze([...inputs.values()].filter((t) => !t.optional).map((t) => t.name)),
    labels: extras.labels,
    sequence: extras.sequence,
    ensemble: extras.ensemble,
  });
}
