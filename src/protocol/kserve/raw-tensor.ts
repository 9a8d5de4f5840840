import { DATATYPES, type DataType } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import { decodeBytes, elementCount, viewFixed, type TensorData } from '../../core/tensor.js';

/**
 * Turns the raw bytes of one input (HTTP binary blob, gRPC `raw_input_contents` entry) into tensor data:
 * the byte length is checked against shape × datatype before any view, with Triton's message (clients
 * match on "input byte size mismatch"). BYTES elements carry 4-byte little-endian length prefixes.
 * Fixed-size data is a view of `raw` unless alignment forces one copy. Nothing is allocated from the shape before
 * the bytes are known to hold it.
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
  const expected = count * DATATYPES[datatype].byteSize;
  if (raw.byteLength !== expected) {
    throw new InvalidArgError(
      `input byte size mismatch for input '${name}' for model '${model}'. Expected ${expected}, got ${raw.byteLength}`,
    );
  }
  return viewFixed(datatype, raw);
}
