import { DATATYPES, type DataType, type FixedTypedArray } from '../../core/datatypes.js';
import { DEVICE_ALIGNMENT, type DeviceBuffer } from '../../core/device.js';
import { InternalError, InvalidArgError } from '../../core/errors.js';
import type { InferInput, InferOutput, InferRequest, InferResponse } from '../../core/inference.js';
import { checkFixedByteSize, rawToTensorData } from '../../core/raw-tensor.js';
import { elementCount, encodeBytes, fixedBytes, type TensorData } from '../../core/tensor.js';
import type { CudaSharedMemory, CudaSlice } from './cuda.js';
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

/** Where a request's slices come from: one namespace of region names over both kinds (Triton's). */
export interface SliceSource {
  acquire(name: string, offset: bigint, byteSize: bigint): RegionSlice;
  release(slice: RegionSlice): void;
}

/**
 * System and CUDA regions as one source. CUDA slices bound without `deviceTensors` are read and written with
 * cudaMemcpy (device to host for inputs, host to device for outputs): what Triton does for a backend that asks for
 * its tensors in CPU memory. With it, they stay on the device (see BindOptions).
 */
export function sliceSource(system: SystemSharedMemory, cuda: CudaSharedMemory): SliceSource {
  return {
    acquire: (name, offset, byteSize) =>
      cuda.has(name) ? cuda.acquire(name, offset, byteSize) : system.acquire(name, offset, byteSize),
    release: (slice) => (cuda.owns(slice) ? cuda.release(slice) : system.release(slice)),
  };
}

export interface BindOptions {
  /**
   * CUDA slices may stay on the device (core/device.ts): inputs become device tensors (the instance that runs the
   * request reads them in place, or the host copies them for one that cannot), outputs become buffers an engine may
   * write into. False (the default): every CUDA slice is copied through host memory here, as system memory is read.
   */
  deviceTensors?: boolean;
}

function isCuda(slice: RegionSlice): slice is CudaSlice {
  return 'pointer' in slice;
}

/** The slice as a device buffer when it may stay on the device: a CUDA slice, aligned for any kernel. */
function onDevice(slice: RegionSlice, opts: BindOptions): DeviceBuffer | undefined {
  if (opts.deviceTensors !== true || !isCuda(slice) || slice.pointer % DEVICE_ALIGNMENT !== 0n) return undefined;
  return { kind: 'cuda', device: slice.device, address: slice.pointer, byteSize: slice.byteSize, ipc: slice.ipc };
}

export async function bindSharedMemory(
  shm: SliceSource,
  request: InferRequest,
  opts: BindOptions = {},
): Promise<SharedMemoryBinding> {
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
    // Device buffers handed out for this request, and the slice each lies in (for host copies and checks).
    const device = new Map<DeviceBuffer, CudaSlice>();
    const inputs = await Promise.all(
      request.inputs.map(async (input, i): Promise<InferInput> => {
        const slice = slices[i];
        if (slice === undefined) return input;
        const buffer = input.datatype === 'BYTES' ? undefined : onDevice(slice, opts);
        if (buffer !== undefined) {
          device.set(buffer, slice as CudaSlice);
          return deviceInput(input, buffer, request.model);
        }
        const data = rawToTensorData(input.name, input.datatype, input.shape, await slice.read(), request.model);
        return { ...input, data };
      }),
    );
    const deviceOutputs = new Map<string, DeviceBuffer>();
    for (const [name, slice] of outputs) {
      const buffer = onDevice(slice, opts);
      if (buffer === undefined) continue;
      device.set(buffer, slice as CudaSlice);
      deviceOutputs.set(name, buffer);
    }
    const bound: InferRequest = { ...request, inputs };
    if (device.size > 0) {
      bound.device = {
        outputs: deviceOutputs,
        toHost: (b) => {
          const slice = device.get(b);
          if (slice === undefined) throw new InternalError('a device buffer this request was not given');
          return slice.readNow();
        },
      };
    }
    return {
      request: bound,
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

/**
 * Runs `run` on the request with the client's regions bound: inputs read from them, outputs written into them; the
 * regions stay open until the request is done.
 */
export async function withSharedMemory(
  shm: SliceSource,
  request: InferRequest,
  opts: BindOptions,
  run: (bound: InferRequest) => Promise<InferResponse>,
): Promise<InferResponse> {
  const bound = await bindSharedMemory(shm, request, opts);
  try {
    return bound.finish(await run(bound.request));
  } finally {
    bound.release();
  }
}

function writeOutput(t: InferOutput, slice: RegionSlice | undefined): InferOutput {
  if (t.device !== undefined) return writtenOnDevice(t, slice);
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

/** An output the engine ran straight into the client's device buffer: nothing to copy, only the reference. */
function writtenOnDevice(t: InferOutput, slice: RegionSlice | undefined): InferOutput {
  const d = t.device as DeviceBuffer;
  if (slice === undefined || !isCuda(slice) || d.address !== slice.pointer || d.byteSize > slice.byteSize) {
    throw new InternalError(`output '${t.name}' was written to device memory it was not given`);
  }
  return {
    name: t.name,
    datatype: t.datatype,
    shape: t.shape,
    data: new Uint8Array(0),
    sharedMemory: { region: slice.region, offset: BigInt(slice.position), byteSize: BigInt(d.byteSize) },
  };
}

/** A device input: its size checked like a binary input's, its data left on the device (`data` empty). */
function deviceInput(input: InferInput, buffer: DeviceBuffer, model: string): InferInput {
  const count = elementCount(input.shape, `input '${input.name}'`);
  checkFixedByteSize(input.name, input.datatype, count, buffer.byteSize, model);
  return { ...input, data: emptyOf(input.datatype), device: buffer };
}

function emptyOf(datatype: DataType): TensorData {
  const Ctor = DATATYPES[datatype].array;
  return Ctor === undefined ? [] : new Ctor(0);
}
