import { DATATYPES } from '../../../core/datatypes.js';
import { InternalError } from '../../../core/errors.js';
import type { Tensor } from '../../../core/tensor.js';
import type { CudaRuntime } from '../../../native/cudart.js';
import { ortApi, type Ptr } from './api.js';
import type { CudaTensors } from './device-tensors.js';

/**
 * CUDA graphs for a KIND_GPU session with the CUDA provider's `enable_cuda_graph`: onnxruntime captures a run's
 * kernels once and replays them, which needs the run's inputs and outputs at the same device addresses every time.
 * So each (input shapes, requested outputs) gets a slot of device buffers of its own and a graph id
 * (`gpu_graph_id`, onnxruntime's run config for several graphs per session): a run copies the request's host
 * inputs into the slot's input buffers, runs on the slot's OrtValues, and copies the outputs out once into
 * JavaScript memory. The first run of a shape runs without a graph (`gpu_graph_id` -1) to learn its output shapes.
 *
 * Threading: the engine-thread transport only (the instance's own thread calls Run and the copies): CUDA's current
 * device is per thread, and the copies must run on the thread that set it (src/native/cudart.ts).
 * Ownership: the slots' device buffers and OrtValues, and the CudaTensors they are made with, belong to this
 * object; `release` frees them once, after the last run (the runner's release).
 */

/** Graphs kept per session; shapes beyond this run without a graph (each graph holds its buffers and kernels). */
export const MAX_CUDA_GRAPHS = 64;

interface Buffer {
  name: string;
  datatype: Tensor['datatype'];
  shape: number[];
  bytes: number;
  address: bigint;
  value: Ptr | null;
}

export interface GraphSlot {
  id: number;
  inputs: Buffer[];
  outputs: Buffer[];
}

export class CudaGraphs {
  readonly #cuda: CudaRuntime;
  readonly #device: number;
  readonly #tensors: CudaTensors;
  readonly #slots = new Map<string, GraphSlot | null>();
  #released = false;

  constructor(cuda: CudaRuntime, device: number, tensors: CudaTensors) {
    this.#cuda = cuda;
    this.#device = device;
    this.#tensors = tensors;
  }

  /** The slot of a key; undefined before its first (learning) run, null when it runs without a graph. */
  slot(key: string): GraphSlot | null | undefined {
    return this.#slots.get(key);
  }

  /**
   * Makes the slot of `key` from a learning run's tensors (inputs as sent, outputs as onnxruntime gave them), or
   * marks it graph-less when the session has all the graphs it may keep or a tensor cannot live on the device.
   */
  create(key: string, inputs: readonly Tensor[], outputs: readonly Tensor[]): void {
    if (this.#released) throw new InternalError('CUDA graphs used after release');
    const fixed = [...inputs, ...outputs].every((t) => DATATYPES[t.datatype].array !== undefined);
    const graphs = [...this.#slots.values()].filter((s) => s !== null).length;
    if (!fixed || graphs >= MAX_CUDA_GRAPHS) {
      this.#slots.set(key, null);
      return;
    }
    const made: Buffer[] = [];
    try {
      const buffer = (t: Tensor): Buffer => {
        const bytes = t.shape.reduce((a, b) => a * b, 1) * DATATYPES[t.datatype].byteSize;
        // Never a zero-byte allocation: cudaMalloc(0) gives no address a value could point at.
        const address = this.#cuda.malloc(this.#device, Math.max(bytes, 256));
        const b: Buffer = { name: t.name, datatype: t.datatype, shape: [...t.shape], bytes, address, value: null };
        made.push(b);
        b.value = this.#tensors.valueAt(address, t.shape, t.datatype);
        return b;
      };
      const slot: GraphSlot = { id: graphs, inputs: inputs.map(buffer), outputs: outputs.map(buffer) };
      this.#slots.set(key, slot);
    } catch (err) {
      this.#free(made);
      throw err;
    }
  }

  /** Copies the request's host inputs into the slot's device buffers and waits until they landed. */
  /** The slot's OrtValues: inputs in the order the slot was made with, outputs likewise. */
  values(slot: GraphSlot): { inputs: Ptr[]; outputs: Ptr[] } {
    return { inputs: slot.inputs.map((b) => b.value!), outputs: slot.outputs.map((b) => b.value!) };
  }

  upload(slot: GraphSlot, inputs: readonly Tensor[]): void {
    inputs.forEach((t, i) => {
      const b = slot.inputs[i]!;
      const data = t.data as ArrayBufferView;
      if (b.name !== t.name || data.byteLength !== b.bytes) {
        throw new InternalError(`CUDA graph slot ${slot.id}: input '${t.name}' does not match its buffer`);
      }
      this.#cuda.copyToDevice(this.#device, b.address, new Uint8Array(data.buffer, data.byteOffset, b.bytes));
    });
    this.#cuda.synchronize(this.#device);
  }

  /** The slot's outputs copied once into fresh JavaScript memory (onnxruntime synchronized its stream in Run). */
  download(slot: GraphSlot): Tensor[] {
    return slot.outputs.map((b) => {
      const Ctor = DATATYPES[b.datatype].array!;
      const count = b.shape.reduce((a, c) => a * c, 1);
      const data = new Ctor(count);
      this.#cuda.copyToHost(this.#device, new Uint8Array(data.buffer, 0, b.bytes), b.address);
      return { name: b.name, datatype: b.datatype, shape: [...b.shape], data };
    });
  }

  /** Frees every slot's buffers and values. Idempotent; never with a run in flight (the runner's rule). */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    for (const s of this.#slots.values()) if (s !== null) this.#free([...s.inputs, ...s.outputs]);
    this.#slots.clear();
    this.#tensors.release();
  }

  #free(buffers: Buffer[]): void {
    for (const b of buffers) {
      if (b.value !== null) ortApi().ReleaseValue(b.value);
      this.#cuda.free(this.#device, b.address);
    }
  }
}
