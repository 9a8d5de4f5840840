import type { FixedTypedArray } from '../../../core/datatypes.js';
import type { ErrorData } from '../../../core/errors.js';
import { NereidError } from '../../../core/errors.js';
import { decodeBytes, encodeBytes, type Tensor } from '../../../core/tensor.js';
import type { EngineRequest, EngineResponse } from '../../contract.js';

/**
 * Tensors and batches as they cross between the main thread and an engine thread (postMessage). Plain data:
 * errors travel as code + message (Error subclasses do not survive structured clone with their class).
 *
 * Ownership: every ArrayBuffer listed in a message's transfer list belongs to that message: the sender never
 * touches it again (the host never reuses input buffers after execute; engines give their outputs away).
 * Requests of a batch travel as ONE buffer per input (the batch concatenated, one copy on the host); the
 * engine side sees each request's input as a view into it, so an engine that wants one tensor for the batch
 * gets it back without a copy (`joinInputs`).
 */
export interface WireTensor {
  name: string;
  datatype: Tensor['datatype'];
  shape: number[];
  /** Fixed-size data, or BYTES in wire form (4-byte little-endian length, then the bytes, per element). */
  data: FixedTypedArray | Uint8Array;
}

export interface WireBatch {
  /** One tensor per input name: the requests' data back to back, in request order. */
  inputs: WireTensor[];
  /** Per request: its shape of each input (same order as `inputs`). */
  shapes: number[][][];
  outputs: string[][];
  batchSizes: number[];
  ids: (string | undefined)[];
  parameters: (EngineRequest['parameters'] | undefined)[];
  correlationIds: (EngineRequest['correlationId'] | undefined)[];
}

/** Errors cross as core/errors.ts's plain data (an engine fault keeps its cause and stack for the log). */
export type WireError = ErrorData;

/** True when `a` spans its whole (non-shared) ArrayBuffer, so transferring the buffer detaches nothing else. */
export function ownsBuffer(a: ArrayBufferView): a is ArrayBufferView & { buffer: ArrayBuffer } {
  return a.buffer instanceof ArrayBuffer && a.byteOffset === 0 && a.byteLength === a.buffer.byteLength;
}

const count = (shape: readonly number[]): number => shape.reduce((a, b) => a * b, 1);

/**
 * Packs a batch for postMessage. One request: an input spanning its whole buffer is sent as is (transferred:
 * detached in the caller afterwards), any other view is copied once. Several requests: each input is
 * concatenated into one fresh buffer (the one copy a batch costs). BYTES are packed into their wire form.
 */
export function packBatch(requests: readonly EngineRequest[]): { batch: WireBatch; transfer: ArrayBuffer[] } {
  const transfer = new Set<ArrayBuffer>();
  const first = requests[0];
  const inputs = first.inputs.map((proto, k): WireTensor => {
    const parts = requests.map((r) => r.inputs[k]);
    for (const p of parts) {
      if (p.name !== proto.name)
        throw new NereidError('INTERNAL', 'requests of a batch list their inputs in different orders');
    }
    let data: FixedTypedArray | Uint8Array;
    if (Array.isArray(proto.data)) {
      data = encodeBytes(parts.flatMap((p) => p.data as Uint8Array[]));
    } else if (parts.length === 1) {
      const d = proto.data;
      data = d.buffer instanceof SharedArrayBuffer || ownsBuffer(d) ? d : d.slice();
    } else {
      const fixed = parts.map((p) => p.data as FixedTypedArray);
      const Ctor = fixed[0].constructor as new (n: number) => FixedTypedArray;
      data = new Ctor(fixed.reduce((n, f) => n + f.length, 0));
      let at = 0;
      for (const f of fixed) {
        (data as Uint8Array).set(f as Uint8Array, at);
        at += f.length;
      }
    }
    if (data.buffer instanceof ArrayBuffer) transfer.add(data.buffer);
    // Several requests travel flat (their own shapes are in `shapes`; ragged inputs may differ beyond dim 0).
    const shape = parts.length === 1 ? proto.shape : [parts.reduce((n, p) => n + count(p.shape), 0)];
    return { name: proto.name, datatype: proto.datatype, shape, data };
  });
  return {
    batch: {
      inputs,
      shapes: requests.map((r) => r.inputs.map((t) => t.shape)),
      outputs: requests.map((r) => [...r.outputs]),
      batchSizes: requests.map((r) => r.batchSize),
      ids: requests.map((r) => r.id),
      parameters: requests.map((r) => r.parameters),
      correlationIds: requests.map((r) => r.correlationId),
    },
    transfer: [...transfer],
  };
}

/** The engine side's view of a packed batch: each request's inputs are views into the batch's buffers. */
export function unpackBatch(batch: WireBatch): EngineRequest[] {
  const offsets = batch.inputs.map(() => 0);
  const elems = batch.inputs.map((t) =>
    t.datatype === 'BYTES' ? decodeBytes(t.data as Uint8Array, count(t.shape), t.name) : undefined,
  );
  return batch.shapes.map((shapes, i) => ({
    inputs: batch.inputs.map((t, k): Tensor => {
      const n = count(shapes[k]);
      const at = offsets[k];
      offsets[k] += n;
      const all = elems[k];
      const data = all !== undefined ? all.slice(at, at + n) : (t.data as FixedTypedArray).subarray(at, at + n);
      return { name: t.name, datatype: t.datatype, shape: shapes[k], data };
    }),
    outputs: batch.outputs[i],
    batchSize: batch.batchSizes[i],
    id: batch.ids[i],
    parameters: batch.parameters[i],
    correlationId: batch.correlationIds[i],
  }));
}

/** Responses to postMessage form: BYTES packed; every distinct plain buffer transferred once. */
export function packResponses(responses: readonly EngineResponse[], transfer: Set<ArrayBuffer>): WireTensor[][] {
  return responses.map((r) =>
    r.outputs.map((t): WireTensor => {
      let data: FixedTypedArray | Uint8Array;
      if (Array.isArray(t.data)) data = encodeBytes(t.data);
      else data = t.data;
      if (data.buffer instanceof ArrayBuffer) transfer.add(data.buffer);
      return { name: t.name, datatype: t.datatype, shape: t.shape, data };
    }),
  );
}

/** Copies every tensor into its own buffer: the fallback when a buffer cannot be transferred (Node's pool). */
export function copyTensors(tensors: WireTensor[][]): { tensors: WireTensor[][]; transfer: ArrayBuffer[] } {
  const copied = tensors.map((ts) => ts.map((t) => ({ ...t, data: t.data.slice() })));
  return { tensors: copied, transfer: copied.flatMap((ts) => ts.map((t) => t.data.buffer as ArrayBuffer)) };
}

/** Wire tensors back to Tensors: BYTES elements become views into the one received buffer (no copy). */
export function unpackTensors(wire: readonly WireTensor[]): Tensor[] {
  return wire.map((w) =>
    w.datatype !== 'BYTES'
      ? { name: w.name, datatype: w.datatype, shape: w.shape, data: w.data }
      : {
          name: w.name,
          datatype: w.datatype,
          shape: w.shape,
          data: decodeBytes(w.data as Uint8Array, count(w.shape), w.name),
        },
  );
}
