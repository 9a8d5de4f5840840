import { DATATYPES } from '../../core/datatypes.js';
import type { Tensor, TensorData } from '../../core/tensor.js';
import type { BoolControl, CorrIdControl, SequenceSpec, StateSpec } from './spec.js';

/**
 * The tensors the sequence batcher adds to a request: control inputs (START, END, READY, CORRID) and implicit
 * state inputs. Every tensor made here is fresh (a transport may detach what it is given), one row each:
 * `[1, ...]` when the model batches, else without the batch dim.
 */

export type CorrelationId = bigint | string;

/** Which control values a row gets. A null row (padding in a direct batch) is not READY. */
export interface RowFlags {
  start: boolean;
  end: boolean;
  ready: boolean;
  correlationId: CorrelationId;
}

const encoder = new TextEncoder();

/** A map key that keeps numeric and string ids apart (`1` and `"1"` are different sequences, as in Triton). */
export function correlationKey(id: CorrelationId): string {
  return typeof id === 'bigint' ? `#${id}` : `"${id}`;
}

/** The id as Triton prints it in messages. */
export function correlationText(id: CorrelationId): string {
  return typeof id === 'bigint' ? id.toString() : id;
}

function boolTensor(c: BoolControl, value: boolean, batching: boolean): Tensor {
  const v = value ? c.trueValue : c.falseValue;
  const data =
    c.datatype === 'INT32' ? Int32Array.of(v) : c.datatype === 'FP32' ? Float32Array.of(v) : Uint8Array.of(v ? 1 : 0);
  return { name: c.name, datatype: c.datatype, shape: batching ? [1, 1] : [1], data };
}

/** CORRID as its configured type: integers keep their low bits (Triton copies the leading bytes). */
function corridTensor(c: CorrIdControl, id: CorrelationId, batching: boolean): Tensor {
  let data: TensorData;
  const n = typeof id === 'bigint' ? id : 0n;
  switch (c.datatype) {
    case 'BYTES':
      data = [encoder.encode(typeof id === 'string' ? id : '')];
      break;
    case 'UINT64':
      data = BigUint64Array.of(BigInt.asUintN(64, n));
      break;
    case 'INT64':
      data = BigInt64Array.of(BigInt.asIntN(64, n));
      break;
    case 'UINT32':
      data = Uint32Array.of(Number(BigInt.asUintN(32, n)));
      break;
    default:
      data = Int32Array.of(Number(BigInt.asIntN(32, n)));
  }
  return { name: c.name, datatype: c.datatype, shape: batching ? [1, 1] : [1], data };
}

/** The control tensors of one row, in a fixed order (START, END, READY, CORRID) so a batch's rows line up. */
export function controlTensors(spec: SequenceSpec, flags: RowFlags): Tensor[] {
  const batching = spec.maxBatchSize > 0;
  const out: Tensor[] = [];
  // A row that is not ready carries no sequence: every boolean control false, CORRID zero (Triton).
  if (spec.start) out.push(boolTensor(spec.start, flags.ready && flags.start, batching));
  if (spec.end) out.push(boolTensor(spec.end, flags.ready && flags.end, batching));
  if (spec.ready) out.push(boolTensor(spec.ready, flags.ready, batching));
  if (spec.corrid) out.push(corridTensor(spec.corrid, flags.ready ? flags.correlationId : 0n, batching));
  return out;
}

/** A copy of `data` (BYTES elements copied too): state kept by the scheduler is never shared with a transport. */
export function copyData(data: TensorData): TensorData {
  return Array.isArray(data) ? data.map((e) => e.slice()) : data.slice();
}

/** One stored state: its shape without the batch dim, and its data. */
export interface StoredState {
  shape: readonly number[];
  data: TensorData;
}

/** A sequence's first states (fresh copies of the initial data). */
export function initialStates(spec: SequenceSpec): Map<string, StoredState> {
  return new Map(spec.states.map((s) => [s.inputName, { shape: s.initialShape, data: copyData(s.initialData) }]));
}

/** The state inputs of one row (copies: the stored state survives a failed execution). */
export function stateTensors(spec: SequenceSpec, states: ReadonlyMap<string, StoredState>): Tensor[] {
  const batching = spec.maxBatchSize > 0;
  return spec.states.map((s: StateSpec): Tensor => {
    const st = states.get(s.inputName) as StoredState;
    return {
      name: s.inputName,
      datatype: s.datatype,
      shape: batching ? [1, ...st.shape] : [...st.shape],
      data: copyData(st.data),
    };
  });
}

/** A row of zeros shaped like `proto` (padding rows of a direct batch). */
export function zerosLike(proto: Tensor): Tensor {
  const n = proto.data.length;
  const Ctor = DATATYPES[proto.datatype].array;
  const data: TensorData = Ctor === undefined ? Array.from({ length: n }, () => new Uint8Array(0)) : new Ctor(n);
  return { name: proto.name, datatype: proto.datatype, shape: [...proto.shape], data };
}
