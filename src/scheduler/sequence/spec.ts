import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { ModelConfig, NormalizedConfig } from '../../config/model-config.js';
import { DATATYPES, dataTypeFromConfig, type DataType } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import { decodeBytes, viewFixed, type TensorData } from '../../core/tensor.js';

/**
 * `sequence_batching` resolved once at load into what the sequence batcher reads: the control inputs with their
 * false/true values, the implicit states with their initial data, the strategy and its numbers (Triton's defaults
 * filled: idle 1 s, one slot per batch row, oldest's preferred size = max_batch_size). Load errors use Triton's
 * wording where Triton has one.
 */

/** Folder of a model holding `initial_state { data_file }` files (Triton's `initial_state/`). */
export const INITIAL_STATE_FOLDER = 'initial_state';
/** Triton's default `max_sequence_idle_microseconds`. */
export const DEFAULT_IDLE_US = 1_000_000;
/**
 * The model parameter (`parameters { key: "max_sequence_backlog" value { string_value: "N" } }`) bounding how many
 * sequences may wait for a slot; a new sequence beyond them is refused UNAVAILABLE. Triton's backlog has no bound,
 * so abandoned STARTs pile up there (issue 22, item 7); Nereid's default is DEFAULT_MAX_BACKLOG.
 */
export const MAX_BACKLOG_PARAM = 'max_sequence_backlog';
/** Sequences waiting for a slot at most, by default: each holds its queued requests' tensors. */
export const DEFAULT_MAX_BACKLOG = 1024;

/** A START / END / READY control: a one-element tensor holding `falseValue` or `trueValue`. */
export interface BoolControl {
  readonly name: string;
  readonly datatype: 'INT32' | 'FP32' | 'BOOL';
  readonly falseValue: number;
  readonly trueValue: number;
}

export type CorrIdType = 'UINT64' | 'INT64' | 'UINT32' | 'INT32' | 'BYTES';

export interface CorrIdControl {
  readonly name: string;
  readonly datatype: CorrIdType;
}

/** One implicit state: fed as `inputName`, taken back from `outputName`. */
export interface StateSpec {
  readonly inputName: string;
  readonly outputName: string;
  readonly datatype: DataType;
  /** Config dims (without the batch dim); -1 variable. */
  readonly dims: readonly number[];
  /** Shape (without the batch dim) and data of a sequence's first state; copied for each new sequence. */
  readonly initialShape: readonly number[];
  readonly initialData: TensorData;
}

export interface SequenceSpec {
  readonly modelName: string;
  readonly strategy: 'direct' | 'oldest';
  readonly idleUs: number;
  /** max_batch_size; 0 = the model has no batch dim (control tensors are [1] instead of [1, 1]). */
  readonly maxBatchSize: number;
  /** Sequence slots per instance: max(1, max_batch_size), or oldest's max_candidate_sequences. */
  readonly slotsPerInstance: number;
  /** Sequences that may wait in the backlog for a slot (MAX_BACKLOG_PARAM). */
  readonly maxBacklog: number;
  readonly start?: BoolControl;
  readonly end?: BoolControl;
  readonly ready?: BoolControl;
  readonly corrid?: CorrIdControl;
  readonly states: readonly StateSpec[];
  /** Names the scheduler feeds (controls and state inputs): a client must not send them. */
  readonly scheduledInputs: ReadonlySet<string>;
  /** direct: wait up to this long for `minSlotUtilization` of the slots to have a request (0 = never wait). */
  readonly delayUs: number;
  readonly minSlotUtilization: number;
  /** oldest: preferred batch sizes, ascending. */
  readonly preferred: readonly number[];
  /**
   * `iterative_sequence`: one request is a whole sequence (START and END implied) that the model may release for
   * rescheduling after each iteration (batcher.ts); its slot is held until the request is answered.
   */
  readonly iterative: boolean;
}

type Obj = Record<string, unknown>;
const asObj = (v: unknown): Obj => (typeof v === 'object' && v !== null ? (v as Obj) : {});
const asArray = (v: unknown): Obj[] => (Array.isArray(v) ? (v as Obj[]) : []);
const num = (v: unknown, d = 0): number => (typeof v === 'number' ? v : d);

const CORRID_TYPES: readonly CorrIdType[] = ['UINT64', 'INT64', 'UINT32', 'INT32', 'BYTES'];

/** Resolves `config.sequence_batching`; reads initial-state files from `<modelDir>/initial_state/`. */
export async function loadSequenceSpec(config: NormalizedConfig, modelDir: string): Promise<SequenceSpec> {
  const model = config.name;
  const sb = asObj(config.sequence_batching);
  const maxBatchSize = config.max_batch_size;
  const controls = controlsOf(sb, model);
  for (const c of [controls.start, controls.end, controls.ready, controls.corrid]) {
    if (c && (config.input ?? []).some((i) => i.name === c.name)) {
      throw new InvalidArgError(
        `model '${model}': sequence_batching control input '${c.name}' is also declared in 'input'; the sequence batcher supplies it, so remove it from 'input'`,
      );
    }
  }
  const states: StateSpec[] = [];
  for (const s of asArray(sb.state)) states.push(await stateOf(s, config, modelDir));
  const oldest = sb.oldest !== undefined ? asObj(sb.oldest) : undefined;
  const direct = asObj(sb.direct);
  const candidates = num(oldest?.max_candidate_sequences);
  const preferred = asArray(oldest?.preferred_batch_size) as unknown as number[];
  const minUtil = num(direct.minimum_slot_utilization);
  if (minUtil < 0 || minUtil > 1) {
    throw new InvalidArgError(`sequence batching minimum slot utilization must be in range (0.0, 1.0] for ${model}`);
  }
  const scheduled = new Set<string>();
  for (const c of [controls.start, controls.end, controls.ready, controls.corrid]) if (c) scheduled.add(c.name);
  for (const s of states) scheduled.add(s.inputName);
  return Object.freeze({
    modelName: model,
    strategy: oldest !== undefined ? 'oldest' : 'direct',
    idleUs: num(sb.max_sequence_idle_microseconds) > 0 ? num(sb.max_sequence_idle_microseconds) : DEFAULT_IDLE_US,
    maxBatchSize,
    slotsPerInstance: oldest !== undefined && candidates > 0 ? candidates : Math.max(1, maxBatchSize),
    maxBacklog: maxBacklogOf(config, model),
    ...controls,
    states,
    scheduledInputs: scheduled,
    delayUs: oldest !== undefined ? num(oldest.max_queue_delay_microseconds) : num(direct.max_queue_delay_microseconds),
    minSlotUtilization: minUtil,
    preferred: [...(preferred.length > 0 ? preferred : maxBatchSize > 0 ? [maxBatchSize] : [])].sort((a, b) => a - b),
    iterative: sb.iterative_sequence === true,
  });
}

function maxBacklogOf(config: ModelConfig, model: string): number {
  const text = config.parameters?.[MAX_BACKLOG_PARAM]?.string_value;
  if (text === undefined) return DEFAULT_MAX_BACKLOG;
  const n = Number(text);
  if (!/^\d+$/.test(text.trim()) || !Number.isSafeInteger(n)) {
    throw new InvalidArgError(
      `model '${model}': parameter '${MAX_BACKLOG_PARAM}' must be a non-negative integer (sequences that may wait for a slot), got '${text}'`,
    );
  }
  return n;
}

function controlsOf(
  sb: Obj,
  model: string,
): { start?: BoolControl; end?: BoolControl; ready?: BoolControl; corrid?: CorrIdControl } {
  const out: { start?: BoolControl; end?: BoolControl; ready?: BoolControl; corrid?: CorrIdControl } = {};
  for (const ci of asArray(sb.control_input)) {
    const name = String(ci.name ?? '');
    for (const c of asArray(ci.control)) {
      const kind = (c.kind as string | undefined) ?? 'CONTROL_SEQUENCE_START';
      const key = { CONTROL_SEQUENCE_START: 'start', CONTROL_SEQUENCE_END: 'end', CONTROL_SEQUENCE_READY: 'ready' }[
        kind
      ] as 'start' | 'end' | 'ready' | undefined;
      if (kind === 'CONTROL_SEQUENCE_CORRID') {
        if (out.corrid) throw duplicate(kind, model);
        const dt = dataTypeFromConfig((c.data_type as string | undefined) ?? 'TYPE_INVALID');
        if (dt === undefined || !(CORRID_TYPES as readonly string[]).includes(dt)) {
          throw new InvalidArgError(
            `unexpected data type for control CONTROL_SEQUENCE_CORRID for ${model}. Allowed data types are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING`,
          );
        }
        out.corrid = Object.freeze({ name, datatype: dt as CorrIdType });
        continue;
      }
      if (key === undefined) throw new InvalidArgError(`model '${model}': unknown sequence control kind '${kind}'`);
      if (out[key]) throw duplicate(kind, model);
      out[key] = boolControl(name, c, kind, model);
    }
  }
  return out;
}

function duplicate(kind: string, model: string): InvalidArgError {
  return new InvalidArgError(`sequence batching specifies multiple ${kind} tensors for ${model}`);
}

function boolControl(name: string, c: Obj, kind: string, model: string): BoolControl {
  const lists: [BoolControl['datatype'], unknown[]][] = [
    ['INT32', asArray(c.int32_false_true)],
    ['FP32', asArray(c.fp32_false_true)],
    ['BOOL', asArray(c.bool_false_true)],
  ];
  const set = lists.filter(([, l]) => l.length > 0);
  if (set.length !== 1 || set[0][1].length !== 2) {
    throw new InvalidArgError(
      `sequence batching control ${kind} for ${model} must specify exactly one of int32_false_true, fp32_false_true or bool_false_true with two values [false, true]`,
    );
  }
  const [datatype, [f, t]] = set[0];
  const value = (v: unknown): number => (typeof v === 'boolean' ? (v ? 1 : 0) : Number(v));
  return Object.freeze({ name, datatype, falseValue: value(f), trueValue: value(t) });
}

async function stateOf(s: Obj, config: ModelConfig, modelDir: string): Promise<StateSpec> {
  const model = config.name ?? '';
  const inputName = String(s.input_name ?? '');
  const outputName = String(s.output_name ?? '');
  const datatype = dataTypeFromConfig((s.data_type as string | undefined) ?? 'TYPE_INVALID');
  if (datatype === undefined) throw new InvalidArgError(`model '${model}': state '${inputName}' needs a data_type`);
  const dims = (asArray(s.dims) as unknown as number[]).map(Number);
  if (s.use_growable_memory === true) {
    throw new InvalidArgError(
      `'use_growable_memory' can only work with KIND_GPU model instances, which Nereid does not run; set 'use_growable_memory' to false for state input '${inputName}'.`,
    );
  }
  const initials = asArray(s.initial_state);
  if (initials.length > 1) {
    throw new InvalidArgError(
      `initial_state field for state input '${inputName}' must contain exactly one or zero element. Found '${initials.length}' elements.`,
    );
  }
  if ((config.input ?? []).some((i) => i.name === inputName)) {
    throw new InvalidArgError(
      `model '${model}': state input '${inputName}' is also declared in 'input'; the sequence batcher feeds it, so remove it from 'input'`,
    );
  }
  if ((config.output ?? []).some((o) => o.name === outputName)) {
    throw new InvalidArgError(
      `model '${model}': state output '${outputName}' is also declared in 'output'; implicit state is not returned to clients, so remove it from 'output'`,
    );
  }
  if (initials.length === 0) {
    // Triton: variable dims start at 1, the data at zero.
    const shape = dims.map((d) => (d === -1 ? 1 : d));
    return Object.freeze({
      inputName,
      outputName,
      datatype,
      dims,
      initialShape: shape,
      initialData: zeros(datatype, shape),
    });
  }
  const { initDims, data } = await initialState(initials[0], datatype, dims, inputName, model, modelDir);
  return Object.freeze({ inputName, outputName, datatype, dims, initialShape: initDims, initialData: data });
}

/** A state's `initial_state`: its dims against the state's, and its data (zeros, or a file of the model's). */
async function initialState(
  init: Obj,
  datatype: DataType,
  dims: readonly number[],
  inputName: string,
  model: string,
  modelDir: string,
): Promise<{ initDims: number[]; data: TensorData }> {
  const initType = dataTypeFromConfig((init.data_type as string | undefined) ?? 'TYPE_INVALID');
  if (initType !== datatype) {
    throw new InvalidArgError(
      `The data type used for 'initial_state' field of state '${inputName}' does not match the state data type.`,
    );
  }
  if (!init.name) {
    throw new InvalidArgError(`Field 'name' must be set when using initial_state for state input '${inputName}'.`);
  }
  const initDims = (asArray(init.dims) as unknown as number[]).map(Number);
  if (initDims.length !== dims.length) {
    throw new InvalidArgError(
      `Number of dimensions in 'initial_state' doesn't match the size of 'state' dimensions for state input '${inputName}'. ${initDims.length} != ${dims.length}`,
    );
  }
  initDims.forEach((d, i) => {
    if (d === -1) {
      throw new InvalidArgError(
        `'initial_state' field for state input name '${inputName}' contains variable dimensions.`,
      );
    }
    if (dims[i] !== -1 && d !== dims[i]) {
      throw new InvalidArgError(
        `'initial_state' dim for input name '${inputName}' doesn't match 'state' dim description. ${d} != ${dims[i]}`,
      );
    }
  });
  let data: TensorData;
  if (init.data_file !== undefined) {
    const file = join(modelDir, INITIAL_STATE_FOLDER, String(init.data_file));
    const bytes = await readFile(file).catch((err: NodeJS.ErrnoException) => {
      throw new InvalidArgError(
        `model '${model}': initial_state '${String(init.name)}' of state '${inputName}': cannot read ${file}: ${err.code === 'ENOENT' ? 'no such file' : err.message}`,
      );
    });
    data = fileData(datatype, initDims, bytes, String(init.data_file), inputName);
  } else if (init.zero_data === true) {
    data = zeros(datatype, initDims);
  } else {
    throw new InvalidArgError(`initial_state setting expects state'${inputName}' to have state_data set`);
  }
  return { initDims, data };
}

const count = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

function zeros(datatype: DataType, shape: readonly number[]): TensorData {
  const n = count(shape);
  const Ctor = DATATYPES[datatype].array;
  return Ctor === undefined ? Array.from({ length: n }, () => new Uint8Array(0)) : new Ctor(n);
}

/** Raw little-endian values, or BYTES in Triton's serialized form (4-byte length, then the bytes, per element). */
function fileData(datatype: DataType, shape: number[], bytes: Buffer, file: string, input: string): TensorData {
  const n = count(shape);
  const data = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (datatype === 'BYTES') return decodeBytes(data, n, `initial_state of '${input}'`).map((e) => e.slice());
  const size = n * DATATYPES[datatype].byteSize;
  if (size > data.byteLength) {
    throw new InvalidArgError(
      `initial_state setting expects ${size} bytes, but the data provided from ${file} only has ${data.byteLength} bytes.`,
    );
  }
  return viewFixed(datatype, data.slice(0, size));
}
