import type { ExecuteRequest, ExecuteResult } from '../backends/backend.js';
import { DATATYPES, type FixedTypedArray } from '../core/datatypes.js';
import { InternalError } from '../core/errors.js';
import type { BytesData, Tensor, TensorData } from '../core/tensor.js';

/**
 * Batch assembly for the dynamic batcher, pure functions: which requests may share a batch, how their
 * inputs are concatenated along dim 0, and how the batch's outputs are split back.
 */

/** A request as the batcher sees it: its tensors and how many batch rows it brings. */
export interface BatchMember {
  request: ExecuteRequest;
  batchSize: number;
}

/**
 * True when `b` may join a batch started by `a`: same inputs with equal non-batch dims (Triton's
 * RequiredEqualInputs), except inputs declared `allow_ragged_batch`, whose shapes may differ.
 */
export function canMerge(a: ExecuteRequest, b: ExecuteRequest, ragged: ReadonlySet<string>): boolean {
  if (a.inputs.length !== b.inputs.length) return false;
  for (const x of a.inputs) {
    const y = b.inputs.find((t) => t.name === x.name);
    if (!y || y.datatype !== x.datatype) return false;
    if (ragged.has(x.name)) continue;
    if (x.shape.length !== y.shape.length) return false;
    for (let i = 1; i < x.shape.length; i++) if (x.shape[i] !== y.shape[i]) return false;
  }
  return true;
}

/**
 * One ExecuteRequest for the whole batch. Each input is copied into ONE fresh allocation (so the backend
 * may transfer it to its worker without another copy); a batch of one is passed through as it is.
 * Outputs are the union of the members' requested outputs, in first-seen order.
 */
export function assembleBatch(members: readonly BatchMember[], ragged: ReadonlySet<string>): ExecuteRequest {
  if (members.length === 1) return members[0].request;
  const outputs: string[] = [];
  const seen = new Set<string>();
  for (const m of members) {
    for (const o of m.request.outputs) {
      if (!seen.has(o)) {
        seen.add(o);
        outputs.push(o);
      }
    }
  }
  const first = members[0].request;
  const inputs = first.inputs.map((proto): Tensor => {
    const parts = members.map((m) => m.request.inputs.find((t) => t.name === proto.name) as Tensor);
    const rows = members.reduce((n, m) => n + m.batchSize, 0);
    const data = concatData(parts.map((p) => p.data));
    // A ragged input is handed over flat (Triton gives the backend all elements back to back; the model
    // finds each request's part through batch_input).
    const shape = ragged.has(proto.name) ? [data.length] : [rows, ...proto.shape.slice(1)];
    return { name: proto.name, datatype: proto.datatype, shape, data };
  });
  return { inputs, outputs };
}

function concatData(parts: readonly TensorData[]): TensorData {
  if (Array.isArray(parts[0])) return (parts as BytesData[]).flat();
  const fixed = parts as FixedTypedArray[];
  const total = fixed.reduce((n, p) => n + p.length, 0);
  const Ctor = fixed[0].constructor as new (n: number) => FixedTypedArray;
  const out = new Ctor(total);
  let at = 0;
  for (const p of fixed) {
    // Same constructor on both sides, so set() is a memcpy (bigint arrays included).
    (out as Uint8Array).set(p as Uint8Array, at);
    at += p.length;
  }
  return out;
}

/**
 * Splits a batch result back into one result per member, in member order. Each member gets views
 * (subarray) into the batch's one output allocation — no copy — sliced along dim 0 by its batch size,
 * and only the outputs it asked for, in its order.
 */
export function splitBatch(
  members: readonly BatchMember[],
  batch: ExecuteRequest,
  result: ExecuteResult,
): ExecuteResult[] {
  if (members.length === 1) return [result];
  const byName = new Map(batch.outputs.map((n, i) => [n, result.outputs[i]]));
  const rows = members.reduce((n, m) => n + m.batchSize, 0);
  let row = 0;
  return members.map((m) => {
    const outputs = m.request.outputs.map((name): Tensor => {
      const t = byName.get(name);
      if (!t) throw new InternalError(`backend returned no output '${name}' for a batch`);
      if (t.shape[0] !== rows) {
        throw new InternalError(
          `output '${name}' has ${t.shape[0]} rows for a batch of ${rows}; a batching model must keep dim 0`,
        );
      }
      const per = t.data.length / rows;
      const start = row * per;
      const end = start + m.batchSize * per;
      const data = Array.isArray(t.data) ? t.data.slice(start, end) : (t.data as FixedTypedArray).subarray(start, end);
      return { name, datatype: t.datatype, shape: [m.batchSize, ...t.shape.slice(1)], data };
    });
    row += m.batchSize;
    return { outputs, timings: result.timings };
  });
}

/** Total bytes of fixed-size inputs (for the debug line). */
export function batchBytes(req: ExecuteRequest): number {
  let n = 0;
  for (const t of req.inputs) n += Array.isArray(t.data) ? 0 : t.data.length * DATATYPES[t.datatype].byteSize;
  return n;
}
