import type { DataType, FixedTypedArray } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import { decodeBytes, encodeBytes, type Tensor } from '../../core/tensor.js';

/**
 * Tensors as they cross between the main thread and an instance's worker thread. No onnxruntime import
 * here: both sides use this file, and only the worker loads the native addon.
 *
 * Ownership: every buffer in a WireTensor is owned by the message that carries it and is transferred
 * (postMessage transfer list), so neither side copies on the way and neither side touches it afterwards.
 * BYTES travel in Triton's wire form (4-byte little-endian length, then the bytes) in one fresh buffer,
 * because a JS string[] would be copied by structured clone and Uint8Array[] elements are usually views
 * into a larger request body that we must not detach.
 */
export interface WireTensor {
  name: string;
  datatype: DataType;
  shape: number[];
  /** Fixed-size data, or BYTES in wire form. */
  data: FixedTypedArray | Uint8Array;
}

/** True when `a` spans its whole (non-shared) ArrayBuffer, so transferring the buffer detaches nothing else. */
export function ownsBuffer(a: ArrayBufferView): a is ArrayBufferView & { buffer: ArrayBuffer } {
  return a.buffer instanceof ArrayBuffer && a.byteOffset === 0 && a.byteLength === a.buffer.byteLength;
}

/**
 * Prepares tensors for postMessage: returns the wire tensors and the list of buffers to transfer.
 * A view that spans its whole ArrayBuffer is sent as is and its buffer transferred (once, even when several
 * tensors share it); any other view (a slice of a request body, of a batch buffer, or of Node's Buffer pool)
 * is copied into a fresh buffer first, so we never detach memory that belongs to someone else.
 * SharedArrayBuffer views are neither copied nor transferred: structured clone shares them.
 *
 * After the message is posted the transferred buffers are detached in the caller: the backend takes ownership
 * of input buffers that span their whole ArrayBuffer.
 */
export function toWire(tensors: readonly Tensor[]): { wire: WireTensor[]; transfer: ArrayBuffer[] } {
  const transfer = new Set<ArrayBuffer>();
  const wire = tensors.map((t): WireTensor => {
    let data: FixedTypedArray | Uint8Array;
    if (Array.isArray(t.data)) {
      data = encodeBytes(t.data);
    } else if (t.data.buffer instanceof SharedArrayBuffer || ownsBuffer(t.data)) {
      data = t.data;
    } else {
      data = t.data.slice();
    }
    if (data.buffer instanceof ArrayBuffer) transfer.add(data.buffer);
    return { name: t.name, datatype: t.datatype, shape: t.shape, data };
  });
  return { wire, transfer: [...transfer] };
}

/** Copies every non-owned view so that the result can be transferred (the fallback when a transfer fails). */
export function copyWire(tensors: readonly WireTensor[]): { wire: WireTensor[]; transfer: ArrayBuffer[] } {
  const wire = tensors.map((t) => ({ ...t, data: t.data.slice() }));
  return { wire, transfer: wire.map((t) => t.data.buffer as ArrayBuffer) };
}

/** Wire tensors back to Tensors: BYTES elements become views into the one received buffer (no copy). */
export function fromWire(wire: readonly WireTensor[]): Tensor[] {
  return wire.map((w) => {
    if (w.datatype !== 'BYTES') return { name: w.name, datatype: w.datatype, shape: w.shape, data: w.data };
    const count = w.shape.reduce((a, b) => a * b, 1);
    return {
      name: w.name,
      datatype: w.datatype,
      shape: w.shape,
      data: decodeBytes(w.data as Uint8Array, count, w.name),
    };
  });
}

const utf8 = new TextDecoder('utf-8', { fatal: true });
const encoder = new TextEncoder();

/**
 * BYTES wire form → strings for an ORT string tensor. ORT's string tensors hold text, so an element that is
 * not valid UTF-8 is an INVALID_ARG rather than being silently replaced with U+FFFD.
 */
export function wireToStrings(w: WireTensor): string[] {
  const count = w.shape.reduce((a, b) => a * b, 1);
  const elems = decodeBytes(w.data as Uint8Array, count, w.name);
  return elems.map((e, i) => {
    // onnxruntime-node copies strings as C strings: an element with a NUL byte would come back cut short.
    if (e.includes(0)) {
      throw new InvalidArgError(
        `input '${w.name}': element ${i} contains a NUL byte, which onnxruntime string tensors cannot carry (it would be cut short)`,
      );
    }
    try {
      return utf8.decode(e);
    } catch (err) {
      throw new InvalidArgError(
        `input '${w.name}': element ${i} is not valid UTF-8; onnxruntime string tensors carry text only`,
        { cause: err },
      );
    }
  });
}

/** Strings of an ORT string tensor → BYTES wire form (UTF-8), in one fresh buffer. */
export function stringsToWire(strings: readonly string[]): Uint8Array {
  return encodeBytes(strings.map((s) => encoder.encode(s)));
}
