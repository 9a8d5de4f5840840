import { DATATYPES } from '../../../core/datatypes.js';
import { InternalError } from '../../../core/errors.js';
import type { Tensor } from '../../../core/tensor.js';
import type { CudaRuntime } from '../../../native/cudart.js';
import { ortApi, type Ptr } from './api.js';
import type { CudaTensors } from './device-tensors.js';
import { OutputShapes } from './output-shapes.js';
import { overwrittenArray } from './tensors.js';
import type { PrefaultedBuffers } from './prefaulted.js';

/**
 * CUDA graphs for a KIND_GPU session with the CUDA provider's `enable_cuda_graph`: onnxruntime captures a run's
 * kernels once and replays them, which needs the run's inputs and outputs at the same device addresses every time.
 * So each (input shapes, requested outputs) gets a slot of device buffers of its own and a graph id
 * (`gpu_graph_id`, onnxruntime's run config for several graphs per session): a run copies the request's host
 * inputs into the slot's input buffers, runs on the slot's OrtValues, and copies the outputs out once into
 * JavaScript memory. The first run of a shape runs without a graph (`gpu_graph_id` -1) to learn its output shapes.
 *
 * Padding (Triton's `graph_spec` with `graph_lower_bound`, batching models): a batch of b rows within a spec's
 * [lower bound, batch size] whose other dims are the spec's replays the slot of the spec's batch size B (all
 * outputs) — its b rows copied into the first b rows of the slot's inputs, the first b rows of the requested outputs
 * copied out. Rows b..B hold whatever an earlier batch left there; the dynamic batcher's own rule (rows of a batch
 * are independent) is what makes that safe, and their outputs are never read. Such slots are made at load by
 * `warmUpGraphs` (instance-graphs.ts), so a padded batch never pays a learning run or a capture.
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

/** A graph_spec a batch may be padded up to: its batch size, lower bound and the non-batch dims of every input. */
export interface PaddedBatch {
  batchSize: number;
  lowerBound: number;
  dims: ReadonlyMap<string, readonly number[]>;
}

export class CudaGraphs {
  readonly #cuda: CudaRuntime;
  readonly #device: number;
  readonly #tensors: CudaTensors;
  readonly #slots = new Map<string, GraphSlot | null>();
  #released = false;

  readonly #padded: readonly PaddedBatch[];
  readonly #prefaulted: PrefaultedBuffers | undefined;

  constructor(
    cuda: CudaRuntime,
    device: number,
    tensors: CudaTensors,
    padded: readonly PaddedBatch[] = [],
    prefaulted?: PrefaultedBuffers,
  ) {
    this.#cuda = cuda;
    this.#device = device;
    this.#tensors = tensors;
    this.#padded = [...padded].sort((a, b) => a.batchSize - b.batchSize);
    this.#prefaulted = prefaulted;
  }

  /** The slot key of a run: its input shapes (names in request order) and the outputs it asks for. */
  static key(
    inputs: ReadonlyArray<{ name: string; shape: readonly number[] }>,
    outputNames: readonly string[],
  ): string {
    return `${OutputShapes.key(inputs)}|${outputNames.join(',')}`;
  }

  /**
   * The made slot of the smallest graph_spec covering a batch of these inputs (`allOutputs`: every output of the
   * session, which such slots are made with), and the batch's rows; undefined when none covers it.
   */
  padded(inputs: readonly Tensor[], allOutputs: readonly string[]): { slot: GraphSlot; rows: number } | undefined {
    const rows = inputs[0]?.shape[0];
    if (rows === undefined) return undefined;
    for (const p of this.#padded) {
      if (rows < p.lowerBound || rows > p.batchSize) continue;
      const fits =
        inputs.length === p.dims.size &&
        inputs.every((t) => {
          const dims = p.dims.get(t.name);
          return dims !== undefined && t.shape[0] === rows && sameDims(t.shape.slice(1), dims);
        });
      if (!fits) continue;
      // The slot was made (warmUpGraphs) with the inputs in the order of `dims`, whatever the request's order.
      const shapes = [...p.dims].map(([name, dims]) => ({ name, shape: [p.batchSize, ...dims] }));
      const slot = this.#slots.get(CudaGraphs.key(shapes, allOutputs));
      // Rows are sliced along dim 0 of every output: a model whose outputs lack the batch dim is not padded.
      if (slot && slot.outputs.every((b) => b.shape[0] === p.batchSize)) return { slot, rows };
    }
    return undefined;
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

  /** The slot's OrtValues: inputs in the order the slot was made with, outputs likewise. */
  values(slot: GraphSlot): { inputs: Ptr[]; outputs: Ptr[] } {
    return { inputs: slot.inputs.map((b) => b.value!), outputs: slot.outputs.map((b) => b.value!) };
  }

  /**
   * Copies the request's host inputs into the slot's device buffers (the first `rows` rows of a padded slot) and
   * waits until they landed.
   */
  upload(slot: GraphSlot, inputs: readonly Tensor[], rows?: number): void {
    inputs.forEach((t) => {
      const b = slot.inputs.find((x) => x.name === t.name);
      const data = t.data as ArrayBufferView;
      const bytes = b === undefined ? -1 : rowBytes(b, rows);
      if (b === undefined || data.byteLength !== bytes || inputs.length !== slot.inputs.length) {
        throw new InternalError(`CUDA graph slot ${slot.id}: input '${t.name}' does not match its buffer`);
      }
      this.#cuda.copyToDevice(this.#device, b.address, new Uint8Array(data.buffer, data.byteOffset, bytes));
    });
    this.#cuda.synchronize(this.#device);
  }

  /**
   * The slot's outputs (those named, in that order; all by default) copied once into fresh JavaScript memory, the
   * first `rows` rows of a padded slot (onnxruntime synchronized its stream in Run).
   */
  download(slot: GraphSlot, rows?: number, names?: readonly string[]): Tensor[] {
    const outputs = names === undefined ? slot.outputs : names.map((n) => slot.outputs.find((b) => b.name === n));
    return outputs.map((b, i) => {
      if (b === undefined) throw new InternalError(`CUDA graph slot ${slot.id} has no output '${names![i]}'`);
      const bytes = rowBytes(b, rows);
      const count = bytes / DATATYPES[b.datatype].byteSize;
      // Memory of the slot's whole size (any row count fits), its pages already mapped when one is ready.
      const ready = this.#prefaulted?.take(b.bytes);
      const data =
        ready === undefined ? overwrittenArray(b.datatype, count) : new DATATYPES[b.datatype].array!(ready, 0, count);
      const into = new Uint8Array(data.buffer, 0, bytes);
      const stage = this.#staging(bytes);
      if (stage === undefined) {
        this.#cuda.copyToHost(this.#device, into, b.address);
      } else {
        this.#cuda.copyToHost(this.#device, stage, b.address);
        into.set(stage);
      }
      const shape = rows === undefined ? [...b.shape] : [rows, ...b.shape.slice(1)];
      return { name: b.name, datatype: b.datatype, shape, data };
    });
  }

  /**
   * One page-locked buffer of the instance, grown to the largest output copied out: a copy from the device into
   * page-locked memory runs at the bus's speed, then one memcpy into the output's own memory — measured on the
   * H200, a batch-32 BERT output (6.3 MB) took 1.3–1.5 ms copied straight into pageable memory. Undefined (copy
   * straight) when page-locked memory cannot be had.
   */
  #stage: Uint8Array | undefined;
  #stageFailed = false;

  #staging(bytes: number): Uint8Array | undefined {
    if (this.#stageFailed || bytes === 0) return undefined;
    if (this.#stage === undefined || this.#stage.byteLength < bytes) {
      if (this.#stage !== undefined) this.#cuda.freeHost(this.#stage);
      this.#stage = undefined;
      try {
        this.#stage = this.#cuda.mallocHost(bytes);
      } catch {
        this.#stageFailed = true;
        return undefined;
      }
    }
    return this.#stage.subarray(0, bytes);
  }

  /** Frees every slot's buffers and values. Idempotent; never with a run in flight (the runner's rule). */
  release(): void {
    if (this.#released) return;
    this.#released = true;
    if (this.#stage !== undefined) this.#cuda.freeHost(this.#stage);
    this.#stage = undefined;
    this.#prefaulted?.close();
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

/** Bytes of a buffer's first `rows` rows (all of it when rows is undefined); -1 when it has no such rows. */
function rowBytes(b: Buffer, rows: number | undefined): number {
  if (rows === undefined) return b.bytes;
  const total = b.shape[0] ?? 0;
  if (b.shape.length === 0 || rows > total || rows < 1) return -1;
  return (b.bytes / total) * rows;
}

function sameDims(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((d, i) => d === b[i]);
}
