/**
 * Tensors whose bytes live in accelerator memory (client CUDA shared memory), as plain data.
 *
 * A request reaches an engine with device tensors only when the instance that runs it said it takes memory on that
 * device (`deviceMemory` of the instance, backends/contract.ts); every other instance gets host copies, made by the
 * host just before `execute` (backends/device-placement.ts). Addresses are never dereferenced in JavaScript.
 *
 * Ownership: the memory belongs to the client's registered region. The server holds the region (an unregister
 * waits) from the moment the request is bound until its response was made; engines BORROW the memory until
 * `execute` settles, like any input.
 */

/** A span of device memory: where a tensor's bytes are (input) or may be written (output). */
export interface DeviceBuffer {
  readonly kind: 'cuda';
  /** CUDA device ordinal in this process (CUDA_VISIBLE_DEVICES applied). */
  readonly device: number;
  /** Device address in this process's unified address space. */
  readonly address: bigint;
  readonly byteSize: number;
  /**
   * How another process reaches the buffer (client CUDA shared memory): engines behind the process transport open
   * the region's IPC handle themselves, once per region, and never see this process's `address`.
   */
  readonly ipc?: CudaIpcSpan;
}

/**
 * A buffer's place in a client's CUDA IPC allocation, for a process that opens the handle itself. Ownership: the
 * handle bytes are the server's copy (never mutated); `closed` belongs to the server's region.
 */
export interface CudaIpcSpan {
  /** Server-unique id of the registration: a name registered again after an unregister gets a new id. */
  readonly region: number;
  /** The raw 64-byte cudaIpcMemHandle_t the client registered. */
  readonly handle: Uint8Array;
  /** Byte offset of the buffer from the base the handle opens at. */
  readonly offset: number;
  /**
   * Aborts when the server closes the region (unregistered and no request holds it): a process that opened the
   * handle closes its mapping then, so the client's memory is not kept mapped by the server's children.
   */
  readonly closed: AbortSignal;
}

/** What an instance can read inputs from and write outputs into directly. */
export interface DeviceMemory {
  readonly kind: 'cuda';
  readonly device: number;
}

/**
 * Alignment a device buffer needs to be handed to an engine: what cudaMalloc (and onnxruntime's own CUDA allocator)
 * guarantee, so every kernel that runs on engine-allocated memory runs on it too (vectorized loads fault on less:
 * a sticky CUDA error would end the instance). A slice at another offset is copied through the host instead.
 */
export const DEVICE_ALIGNMENT = 256n;

/**
 * A request's device tensors: outputs the client placed in device memory, and how the host reads a device input
 * when the instance that runs the request cannot (a synchronous device-to-host copy; see native/cudart.ts).
 * Set by the server on requests that have device tensors; the host strips it before an instance that takes none.
 */
export interface RequestDeviceMemory {
  /**
   * Outputs to write into device memory, by name. An engine that takes that device may run the output straight
   * into the buffer and answer the tensor with `device` set (and empty `data`); otherwise it answers host data and
   * the server copies it there.
   */
  readonly outputs: ReadonlyMap<string, DeviceBuffer>;
  /** The bytes of a device input in host memory (a fresh, owned buffer). Host side only. */
  toHost(buffer: DeviceBuffer): Uint8Array;
}

/** True when `buffer` lies in memory that `memory` (an instance's) can use directly. */
export function takes(memory: DeviceMemory | undefined, buffer: DeviceBuffer): boolean {
  return memory !== undefined && memory.kind === buffer.kind && memory.device === buffer.device;
}

/** `cuda:0` for messages and logs. */
export function deviceName(b: DeviceMemory): string {
  return `${b.kind}:${b.device}`;
}
