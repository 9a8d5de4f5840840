import type { CudaRuntime } from '../../src/native/cudart.js';
import { pinnedAlloc, pinnedFree } from './fake-pinned.js';

/**
 * TEST DOUBLE of the GPU boundary (`CudaRuntime`, src/native/cudart.ts) for machines without a GPU: "device
 * memory" is host Buffers, an IPC handle is 64 bytes naming one of them. It plays both sides: `allocate` is what
 * a client process does (cudaMalloc + cudaIpcGetMemHandle), the CudaRuntime methods are what the server calls.
 * It records opens and closes so tests can check a handle is closed exactly when the server should close it.
 * Never the only evidence: scripts/gpu/cudashm-on-device.sh runs tritonclient's CUDA flow on a real GPU.
 */
export class FakeCudaRuntime implements CudaRuntime {
  readonly library = 'fake-cudart (test double)';
  readonly #devices: number;
  /** Allocations by id; each lives at a made-up, 256-aligned device address. */
  readonly #allocations = new Map<number, { device: number; base: bigint; memory: Buffer }>();
  readonly #open = new Map<bigint, number>();
  #next = 1;
  opened = 0;
  closed = 0;
  /** Copies between host and device, counted (the onnxruntime GPU path must not make any). */
  hostCopies = 0;

  constructor(devices = 1) {
    this.#devices = devices;
  }

  /** Client side: a device buffer of `bytes` on `device` and its 64-byte IPC handle. */
  allocate(device: number, bytes: number): { handle: Uint8Array; memory: Buffer } {
    const id = this.#next++;
    const memory = Buffer.alloc(bytes);
    this.#allocations.set(id, { device, base: BigInt(id) << 32n, memory });
    const handle = new Uint8Array(64);
    new DataView(handle.buffer).setUint32(0, id, true);
    handle.fill(0xab, 4); // the rest is opaque in a real handle
    return { handle, memory };
  }

  /** Open handles now (each open is closed exactly once by the server). */
  get openCount(): number {
    return this.#open.size;
  }

  deviceCount(): number {
    return this.#devices;
  }

  openIpcHandle(device: number, handle: Uint8Array): { pointer: bigint; allocationBytes: bigint | undefined } {
    const id = new DataView(handle.buffer, handle.byteOffset, 64).getUint32(0, true);
    const a = this.#allocations.get(id);
    if (a === undefined || handle[4] !== 0xab) throw new Error('cudaIpcOpenMemHandle failed: invalid argument');
    if (a.device !== device) throw new Error('cudaIpcOpenMemHandle failed: invalid device context');
    this.opened++;
    this.#open.set(a.base, id);
    return { pointer: a.base, allocationBytes: BigInt(a.memory.byteLength) };
  }

  closeIpcHandle(_device: number, pointer: bigint): void {
    if (!this.#open.delete(pointer)) throw new Error('cudaIpcCloseMemHandle: not open');
    this.closed++;
  }

  copyToHost(_device: number, dst: Uint8Array, src: bigint): void {
    this.hostCopies++;
    dst.set(this.#span(src, dst.byteLength));
  }

  copyToDevice(_device: number, dst: bigint, src: Uint8Array): void {
    this.hostCopies++;
    this.#span(dst, src.byteLength).set(src);
  }

  /** Server side cudaMalloc: an allocation that is open (reachable) at once. */
  malloc(device: number, bytes: number): bigint {
    const { handle } = this.allocate(device, bytes);
    return this.openIpcHandle(device, handle).pointer;
  }

  free(device: number, pointer: bigint): void {
    this.closeIpcHandle(device, pointer);
  }

  synchronize(): void {}

  /** Threads that asked to ignore other threads' captures (one per engine thread with CUDA graphs). */
  captureOptOuts = 0;
  /** Page-locked host memory in use (fake-pinned.ts). */
  readonly pinned = new Set<ArrayBuffer>();
  mallocHost(bytes: number): Uint8Array {
    return pinnedAlloc(this.pinned, bytes);
  }

  freeHost(view: Uint8Array): void {
    pinnedFree(this.pinned, view);
  }

  ignoreOtherCaptures(): void {
    this.captureOptOuts++;
  }

  copyOnDevice(_device: number, dst: bigint, src: bigint, bytes: number): void {
    this.#span(dst, bytes).set(this.#span(src, bytes));
  }

  /**
   * What a kernel on the device sees at `address` (not a host copy, so not counted): test-double engines that take
   * device memory read their inputs and write their outputs through it.
   */
  deviceView(address: bigint, bytes: number): Buffer {
    return this.#span(address, bytes);
  }

  /** The bytes at a device address, refusing any access outside an open allocation (as a real GPU would fault). */
  #span(address: bigint, bytes: number): Buffer {
    const id = Number(address >> 32n);
    const a = this.#allocations.get(id);
    const offset = Number(address - (BigInt(id) << 32n));
    if (a === undefined || !this.#open.has(a.base) || offset + bytes > a.memory.byteLength) {
      throw new Error(`illegal address: ${address} + ${bytes}`);
    }
    return a.memory.subarray(offset, offset + bytes);
  }
}
