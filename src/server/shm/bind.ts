import { DATATYPES, type FixedTypedArray } from '../../core/datatypes.js';
import { InvalidArgError } from '../../core/errors.js';
import type { InferOutput, InferRequest, InferResponse } from '../../core/inference.js';
import { decodeBytes, elementCount, encodeBytes, fixedBytes, viewFixed, type TensorData } from '../../core/tensor.js';
import type { RegionSlice, SystemSharedMemory } from './regions.js';

/**
 * One request's use of client shared memory: its input slices read into tensors before validation, its output
 * slices written after the response is made. The regions are held (not closed by an unregister) from `bind` until
 * `release`, which the caller runs in a `finally`.
 */
export interface SharedMemoryBinding {
  /** The request with every shared-memory input's data read. */
  request: InferRequest;
  /** Writes outputs asked for in shared memory; those carry no data in the returned response. */
  finish(response: InferResponse): InferResponse;
  release(): void;
}

export function usesSharedMemory(request: InferRequest): boolean {
  return (
    request.inputs.some((i) => i.sharedMemory !== undefined) ||
    (request.outputs ?? []).some((o) => o.sharedMemory !== undefined)
  );
}

export async function bindSharedMemory(shm: SystemSharedMemory, request: InferRequest): Promise<SharedMemoryBinding> {
  const held: RegionSlice[] = [];
  const release = (): void => {
    for (const s of held.splice(0)) shm.release(s);
  };
  try {
    // Inputs first, then outputs: the order Triton checks them in, so the first bad slice is the one it names.
    const slices = request.inputs.map((input) => {
      if (input.sharedMemory === undefined) return undefined;
      const slice = shm.acquire(input.sharedMemory.region, input.sharedMemory.offset, input.sharedMemory.byteSize);
      held.push(slice);
      return slice;
    });
    const outputs = new Map<string, RegionSlice>();
    for (const o of request.outputs ?? []) {
      if (o.sharedMemory === undefined) continue;
      if (o.classCount !== undefined && o.classCount > 0) {
        throw new InvalidArgError("Output can't set both 'shared_memory_region' and 'classification'");
      }
      const slice = shm.acquire(o.sharedMemory.region, o.sharedMemory.offset, o.sharedMemory.byteSize);
      held.push(slice);
      outputs.set(o.name, slice);
    }
    const inputs = await Promise.all(
      request.inputs.map(async (input, i) => {
        const slice = slices[i];
        if (slice === undefined) return input;
        const data = toTensorData(input.name, input.datatype, input.shape, await slice.read(), request.model);
        return { ...input, data };
      }),
    );
    return {
      request: { ...request, inputs },
      finish: (response) => ({
        ...response,
        outputs: response.outputs.map((t) => writeOutput(t, outputs.get(t.name))),
      }),
      release,
    };
  } catch (err) {
    release();
    throw err;
  }
}

function writeOutput(t: InferOutput, slice: RegionSlice | undefined): InferOutput {
  if (slice === undefined) return t;
  const bytes = Array.isArray(t.data) ? encodeBytes(t.data) : fixedBytes(t.data as FixedTypedArray);
  if (bytes.byteLength > slice.byteSize) {
    // Triton: INTERNAL; the client asked for too small a slice, so Nereid answers 400.
    throw new InvalidArgError(
      `shared memory size specified with the request for output '${t.name}' (${slice.byteSize} bytes) should be at least ${bytes.byteLength} bytes to hold the results`,
    );
  }
  slice.write(bytes);
  return {
    name: t.name,
    datatype: t.datatype,
    shape: t.shape,
    data: new Uint8Array(0),
    sharedMemory: { region: slice.region, offset: BigInt(slice.position), byteSize: BigInt(bytes.byteLength) },
  };
}

/**
 * The bytes of one input as tensor data, checked like a binary input (the wording clients match on: "input byte
 * size mismatch"); the element count is checked against the bytes before anything is allocated from the shape.
 */
function toTensorData(
  name: string,
  datatype: keyof typeof DATATYPES,
  shape: readonly number[],
  bytes: Uint8Array,
  model: string,
): TensorData {
  const count = elementCount(shape, `input '${name}'`);
  if (datatype === 'BYTES') {
    if (count > bytes.byteLength / 4) {
      throw new InvalidArgError(
        `unexpected number of string elements for input '${name}' for model '${model}': shape [${shape.join(',')}] has ${count} elements, but ${bytes.byteLength} bytes hold at most ${Math.floor(bytes.byteLength / 4)}`,
      );
    }
    return decodeBytes(bytes, count, name);
  }
  const expected = count * DATATYPES[datatype].byteSize;
  if (bytes.byteLength !== expected) {
    throw new InvalidArgError(
      `input byte size mismatch for input '${name}' for model '${model}'. Expected ${expected}, got ${bytes.byteLength}`,
    );
  }
  return viewFixed(datatype, bytes);
}
