import { DATATYPES, type DataType } from './datatypes.js';
import { InvalidArgError } from './errors.js';
import { decodeBytes, elementCount, viewFixed, type TensorData } from './tensor.js';

/**
 * Turns the raw bytes of one input (HTTP binary blob, gRPC `raw_input_contents` entry, a shared-memory slice) into
 * tensor data: the byte length is checked against shape × datatype before any view, with Triton's message (clients
 * match on "input byte size mismatch"). BYTES elements carry 4-byte little-endian length prefixes.
 * Fixed-size data is a view of `raw` unless alignment forces one copy. Nothing is allocated from the shape before
 * the bytes are known to hold it. It lives in core/ because both the protocol codecs and server/shm decode inputs,
 * and server/ may not import protocol/.
 */
export function rawToTensorData(
  name: string,
  datatype: DataType,
  shape: readonly number[],
  raw: Uint8Array,
  model: string,
): TensorData {
  const count = elementCount(shape, `input '${name}'`);
  if (datatype === 'BYTES') {
    // Every element carries a 4-byte length: a shape claiming more elements than the bytes can hold is refused
    // before the element list is allocated (a 200-byte request once allocated 250 MB for shape [1, 33000000], and
    // shapes of 2^32 elements and more threw "Invalid array length").
    if (count > raw.byteLength / 4) {
      throw new InvalidArgError(
        `unexpected number of string elements for input '${name}' for model '${model}': shape [${shape.join(',')}] has ${count} elements, but ${raw.byteLength} bytes hold at most ${Math.floor(raw.byteLength / 4)}`,
      );
    }
    return decodeBytes(raw, count, name);
  }
  checkFixedByteSize(name, datatype, count, raw.byteLength, model);
  return viewFixed(datatype, raw);
}

/**
 * Checks that `byteLength` bytes are exactly what `count` elements of a fixed-size input need, with Triton's
 * wording. Also used for inputs whose data stays on a device: no bytes to view there, but the size still counts.
 */
export function checkFixedByteSize(
  name: string,
  datatype: DataType,
  count: number,
  byteLength: number,
  model: string,
): void {
  const expected = count * DATATYPES[datatype].byteSize;
  if (byteLength !== expected) {
    throw new InvalidArgError(
      `input byte size mismatch for input '${name}' for model '${model}'. Expected ${expected}, got ${byteLength}`,
    );
  }
}
