import type { FixedTypedArray } from '../../core/datatypes.js';
import { InternalError } from '../../core/errors.js';
import type { BytesData, Tensor, TensorData } from '../../core/tensor.js';
import type { EngineRequest, EngineResponse } from '../contract.js';

/**
 * A batch of requests as one run: inputs joined along dim 0, outputs split back into one response per request.
 * (The same job as the lead's src/backends/batching.ts in main; this copy keeps the branch self-contained and can
 * be replaced by it at merge.)
 *
 * Memory: a batch of one passes the request's own tensors (the run reads the request's memory). Otherwise each
 * input is copied once into one fresh allocation, unless the parts already lie back to back in one buffer (then
 * the join is a view). Responses are views into the run's one output allocation per output.
 */

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

function join(parts: readonly TensorData[]): TensorData {
  if (Array.isArray(parts[0])) return (parts as BytesData[]).flat();
  const fixed = parts as FixedTypedArray[];
  const total = fixed.reduce((n, p) => n + p.length, 0);
  const Ctor = fixed[0].constructor as {
    new (n: number): FixedTypedArray;
    new (b: ArrayBufferLike, off: number, len: number): FixedTypedArray;
  };
  if (adjacent(fixed)) return new Ctor(fixed[0].buffer, fixed[0].byteOffset, total);
  const out = new Ctor(total);
  let at = 0;
  for (const p of fixed) {
    // Same constructor on both sides: set() is a memcpy (bigint arrays included).
    (out as Uint8Array).set(p as Uint8Array, at);
    at += p.length;
  }
  return out;
}

/** One tensor per input, in the first request's input order. Inputs in `ragged` are joined flat. */
export function joinInputs(requests: readonly EngineRequest[], ragged: ReadonlySet<string>): Tensor[] {
  if (requests.length === 1) return [...requests[0].inputs];
  const rows = requests.reduce((n, r) => n + r.batchSize, 0);
  return requests[0].inputs.map((proto, k): Tensor => {
    const parts = requests.map((r) => {
      const t = r.inputs[k]?.name === proto.name ? r.inputs[k] : r.inputs.find((x) => x.name === proto.name);
      if (t === undefined) throw new InternalError(`a request of the batch lacks input '${proto.name}'`);
      return t.data;
    });
    const data = join(parts);
    const shape = ragged.has(proto.name) ? [data.length] : [rows, ...proto.shape.slice(1)];
    return { name: proto.name, datatype: proto.datatype, shape, data };
  });
}

/** The union of the requests' outputs, in first-seen order. */
export function batchOutputNames(requests: readonly EngineRequest[]): string[] {
  if (requests.length === 1) return [...requests[0].outputs];
  const seen = new Set<string>();
  for (const r of requests) for (const o of r.outputs) seen.add(o);
  return [...seen];
}

/** One response per request, in request order: views sliced along dim 0 by batch size, in each request's order. */
export function splitOutputs(requests: readonly EngineRequest[], outputs: readonly Tensor[]): EngineResponse[] {
  const byName = new Map(outputs.map((t) => [t.name, t]));
  const need = (name: string): Tensor => {
    const t = byName.get(name);
    if (t === undefined) throw new InternalError(`onnxruntime returned no output '${name}'`);
    return t;
  };
  if (requests.length === 1) return [{ outputs: requests[0].outputs.map(need) }];
  const rows = requests.reduce((n, r) => n + r.batchSize, 0);
  let row = 0;
  return requests.map((r) => {
    const out = r.outputs.map((name): Tensor => {
      const t = need(name);
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
