import type { FixedTypedArray } from '../core/datatypes.js';
import { InternalError } from '../core/errors.js';
import type { BytesData, Tensor, TensorData } from '../core/tensor.js';
import type { EngineRequest, EngineResponse } from './contract.js';

/**
 * Helpers for engines that run a batch as one tensor per input (onnxruntime, TensorRT): join the requests'
 * inputs along dim 0, and split the batch's outputs back into one response per request. Engines that take
 * requests one by one (Python models) do not need them.
 */

/** True when `parts` are views laid back to back, in order, in one buffer: their join is a view, not a copy. */
function adjacent(parts: readonly FixedTypedArray[]): boolean {
  for (let i = 1; i < parts.length; i++) {
    const a = parts[i - 1];
    const b = parts[i];
    if (b.buffer !== a.buffer || b.byteOffset !== a.byteOffset + a.byteLength || b.constructor !== a.constructor) {
      return false;
    }
  }
  return true;
}

/** Memory for a joined input of `bytes` (page-locked staging on a GPU), or undefined for fresh memory. */
export type JoinMemory = (bytes: number) => { buffer: ArrayBuffer; byteOffset: number } | undefined;

function joinData(parts: readonly TensorData[], memory?: JoinMemory): TensorData {
  if (Array.isArray(parts[0])) return (parts as BytesData[]).flat();
  const fixed = parts as FixedTypedArray[];
  const total = fixed.reduce((n, p) => n + p.length, 0);
  const Ctor = fixed[0].constructor as {
    new (n: number): FixedTypedArray;
    new (b: ArrayBufferLike, off: number, len: number): FixedTypedArray;
  };
  if (adjacent(fixed)) return new Ctor(fixed[0].buffer, fixed[0].byteOffset, total);
  const at0 = memory?.(total * fixed[0].BYTES_PER_ELEMENT);
  const out = at0 === undefined ? new Ctor(total) : new Ctor(at0.buffer, at0.byteOffset, total);
  let at = 0;
  for (const p of fixed) {
    // Same constructor on both sides, so set() is a memcpy (bigint arrays included).
    (out as Uint8Array).set(p as Uint8Array, at);
    at += p.length;
  }
  return out;
}

/**
 * One tensor per input for the whole batch, in the first request's input order. A batch of one is passed
 * through; views that already lie back to back in one buffer (the worker transport packs them so) are joined
 * without a copy; otherwise each input is copied once. Inputs in `ragged` are joined flat (all elements back
 * to back, Triton's ragged batching); the others get shape [rows, ...dims]. `memory` places the copies (a GPU
 * instance's page-locked staging: the host-to-device copy is then one DMA).
 */
export function joinInputs(
  requests: readonly EngineRequest[],
  ragged: ReadonlySet<string> = new Set(),
  memory?: JoinMemory,
): Tensor[] {
  if (requests.length === 1) return [...requests[0].inputs];
  return requests[0].inputs.map((proto, k): Tensor => {
    const parts = requests.map((r) => {
      const t = r.inputs[k]?.name === proto.name ? r.inputs[k] : r.inputs.find((x) => x.name === proto.name);
      if (t === undefined) throw new InternalError(`request of a batch lacks input '${proto.name}'`);
      return t;
    });
    const data = joinData(
      parts.map((p) => p.data),
      memory,
    );
    const rows = requests.reduce((n, r) => n + r.batchSize, 0);
    const shape = ragged.has(proto.name) ? [data.length] : [rows, ...proto.shape.slice(1)];
    return { name: proto.name, datatype: proto.datatype, shape, data };
  });
}

/** The union of the requests' output names, in first-seen order: what a batch run must produce. */
export function batchOutputNames(requests: readonly EngineRequest[]): string[] {
  if (requests.length === 1) return [...requests[0].outputs];
  const seen = new Set<string>();
  for (const r of requests) for (const o of r.outputs) seen.add(o);
  return [...seen];
}

/**
 * Splits a batch's outputs back into one response per request, in request order: views (subarray) into the
 * batch's one output allocation, sliced along dim 0 by each request's batch size, only the outputs each
 * request asked for, in its order. Throws INTERNAL when the engine broke the batch dimension.
 */
export function splitOutputs(requests: readonly EngineRequest[], outputs: readonly Tensor[]): EngineResponse[] {
  const byName = new Map(outputs.map((t) => [t.name, t]));
  if (requests.length === 1) {
    return [{ outputs: requests[0].outputs.map((n) => need(byName, n)) }];
  }
  const rows = requests.reduce((n, r) => n + r.batchSize, 0);
  let row = 0;
  return requests.map((r) => {
    const out = r.outputs.map((name): Tensor => {
      const t = need(byName, name);
      if (t.shape[0] !== rows) {
        throw new InternalError(
          `output '${name}' has ${t.shape[0]} rows for a batch of ${rows}; a batching model must keep dim 0`,
        );
      }
      const per = t.data.length / rows;
      const start = row * per;
      const end = start + r.batchSize * per;
      const data = Array.isArray(t.data) ? t.data.slice(start, end) : (t.data as FixedTypedArray).subarray(start, end);
      return { name, datatype: t.datatype, shape: [r.batchSize, ...t.shape.slice(1)], data };
    });
    row += r.batchSize;
    return { outputs: out };
  });
}

function need(byName: ReadonlyMap<string, Tensor>, name: string): Tensor {
  const t = byName.get(name);
  if (t === undefined) throw new InternalError(`the engine returned no output '${name}'`);
  return t;
}
