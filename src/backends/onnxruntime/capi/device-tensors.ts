import { DATATYPES, type DataType } from '../../../core/datatypes.js';
import { deviceName, takes, type DeviceBuffer, type DeviceMemory } from '../../../core/device.js';
import { InternalError } from '../../../core/errors.js';
import type { Tensor } from '../../../core/tensor.js';
import { check, ortApi, type Out, type Ptr } from './api.js';
import { elementOf, type InputValue, type OutputBuffer } from './tensors.js';

/** OrtAllocatorType OrtDeviceAllocator and OrtMemType OrtMemTypeDefault: plain device memory of the CUDA provider. */
const ORT_DEVICE_ALLOCATOR = 0;
const ORT_MEM_TYPE_DEFAULT = 0;

/**
 * OrtValues over CUDA memory a client shared (client CUDA shared memory), for a KIND_GPU instance on that device:
 * onnxruntime reads the inputs where they are and writes preallocated outputs straight into the client's buffer —
 * no copy through host memory (onnxruntime copies only for a node its CUDA provider does not run).
 *
 * Ownership: one per instance, owning the "Cuda" OrtMemoryInfo of its device (released with the instance). The
 * OrtValues only borrow the device memory, which the client's region owns and the server holds until the request
 * is answered; the runner releases the values when its run ends. Threading: JavaScript thread.
 *
 * Ordering: the client finished writing its inputs before it sent the request; onnxruntime's Run synchronizes its
 * providers before it returns (its default; the run config `disable_synchronize_execution_providers=1` would
 * break this), so the outputs are complete in the client's memory when the response goes out.
 */
export class CudaTensors {
  readonly memory: DeviceMemory;
  readonly #info: Ptr;
  #released = false;

  constructor(device: number) {
    const out: Out = [null];
    check(ortApi().CreateMemoryInfo('Cuda', ORT_DEVICE_ALLOCATOR, device, ORT_MEM_TYPE_DEFAULT, out));
    this.#info = out[0] as Ptr;
    this.memory = { kind: 'cuda', device };
  }

  /** An input OrtValue over a device tensor's memory. Throws INTERNAL for memory this instance does not take. */
  input(t: Tensor): InputValue {
    const d = this.#check(t.name, t.device);
    const bytes = t.shape.reduce((a, b) => a * b, 1) * DATATYPES[t.datatype].byteSize;
    if (t.datatype === 'BYTES' || bytes !== d.byteSize) {
      throw new InternalError(
        `input '${t.name}': ${t.datatype} ${JSON.stringify(t.shape)} does not fill its device buffer`,
      );
    }
    return { value: this.#value(d.address, bytes, t.shape, t.datatype), borrowed: d };
  }

  /**
   * A preallocated output OrtValue over the client's device buffer, or undefined when the output does not fit it
   * (or is BYTES): the run then gives it host data, which the server copies there (and reports a too small slice).
   */
  output(name: string, datatype: DataType, shape: readonly number[], buffer: DeviceBuffer): OutputBuffer | undefined {
    const d = this.#check(name, buffer);
    const info = DATATYPES[datatype];
    const bytes = shape.reduce((a, b) => a * b, 1) * info.byteSize;
    if (info.array === undefined || bytes > d.byteSize) return undefined;
    const value = this.#value(d.address, bytes, shape, datatype);
    const device: DeviceBuffer = { ...d, byteSize: bytes };
    return { value, tensor: { name, datatype, shape: [...shape], data: new info.array(0), device } };
  }

  /**
   * An OrtValue over device memory this instance owns (CUDA graph buffers, cuda-graphs.ts): the caller keeps the
   * memory alive for the value's life and releases the value.
   */
  valueAt(address: bigint, shape: readonly number[], datatype: DataType): Ptr {
    if (this.#released) throw new InternalError('onnxruntime device tensors used after release');
    const bytes = shape.reduce((a, b) => a * b, 1) * DATATYPES[datatype].byteSize;
    return this.#value(address, bytes, shape, datatype);
  }

  release(): void {
    if (this.#released) return;
    this.#released = true;
    ortApi().ReleaseMemoryInfo(this.#info);
  }

  #check(name: string, d: DeviceBuffer | undefined): DeviceBuffer {
    if (this.#released) throw new InternalError('onnxruntime device tensors used after release');
    if (d === undefined || !takes(this.memory, d)) {
      throw new InternalError(
        `tensor '${name}' is in ${d === undefined ? 'host memory' : deviceName(d)}, not in this instance's ${deviceName(this.memory)}`,
      );
    }
    return d;
  }

  #value(address: bigint, bytes: number, shape: readonly number[], datatype: DataType): Ptr {
    const out: Out = [null];
    const dims = BigInt64Array.from(shape, (n) => BigInt(n));
    const api = ortApi();
    check(
      api.CreateTensorWithDeviceDataAsOrtValue(
        this.#info,
        address,
        bytes,
        dims,
        shape.length,
        elementOf(datatype),
        out,
      ),
    );
    return out[0] as Ptr;
  }
}

/**
 * Whether a KIND_GPU session with these providers may run on client memory: not when it replays CUDA graphs
 * (TensorRT's `trt_cuda_graph_enable`), which read and write the addresses seen at capture, not this run's.
 */
export function runsOnClientMemory(
  providers: ReadonlyArray<{ options: ReadonlyArray<readonly [string, string]> }>,
): boolean {
  return !providers.some((p) =>
    p.options.some(([k, v]) => (k === 'trt_cuda_graph_enable' || k === 'enable_cuda_graph') && v === '1'),
  );
}

/** Where a run's tensors were, for the verbose log: `inputs INPUT0 cuda:0; outputs OUTPUT0 cuda:0, OUTPUT1 host`. */
export function describePlacement(inputs: readonly Tensor[], outputs: readonly Tensor[]): string {
  const where = (t: Tensor): string => `${t.name} ${t.device === undefined ? 'host' : deviceName(t.device)}`;
  return `inputs ${inputs.map(where).join(', ')}; outputs ${outputs.map(where).join(', ')}`;
}
