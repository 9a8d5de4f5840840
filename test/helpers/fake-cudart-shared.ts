import { closeSync, fstatSync, ftruncateSync, openSync, readSync, rmSync, writeSync } from 'node:fs';
import type { CudaRuntime } from '../../src/native/cudart.js';
import { pinnedAlloc, pinnedFree } from './fake-pinned.js';

/**
 * TEST DOUBLE of the GPU boundary (`CudaRuntime`, src/native/cudart.ts) whose "device memory" is a /dev/shm file,
 * so that a child process (the process transport's python stub) can open the same "IPC handle" with its own test
 * double, test/fixtures/cuda/fake_cudart.py: a handle is `NFCU`, the device (one byte) and the file name. What
 * the server copies through the host (cudaMemcpy to or from host memory) is counted in `hostCopies`; what the
 * child reads and writes in place is not (it never passes through this process). Never the only evidence:
 * scripts/gpu/cudashm-on-device.sh runs the real path on a GPU.
 */
export class SharedFakeCudaRuntime implements CudaRuntime {
  readonly library = 'fake-cudart over /dev/shm (test double)';
  readonly #devices: number;
  readonly #files = new Map<string, { device: number; fd: number; base: bigint; bytes: number }>();
  readonly #open = new Map<bigint, string>();
  readonly #prefix = `nereid_fakecuda_${process.pid}_`;
  #next = 1;
  opened = 0;
  closed = 0;
  hostCopies = 0;

  constructor(devices = 2) {
    this.#devices = devices;
  }

  /** Client side: `bytes` of "device memory" on `device`, its 64-byte handle, and access for the test's checks. */
  allocate(
    device: number,
    bytes: number,
  ): { handle: Uint8Array; read(offset: number, n: number): Buffer; write(offset: number, data: Uint8Array): void } {
    const name = `${this.#prefix}${this.#next}`;
    const fd = openSync(`/dev/shm/${name}`, 'w+');
    ftruncateSync(fd, bytes);
    this.#files.set(name, { device, fd, base: BigInt(this.#next++) << 32n, bytes });
    const handle = new Uint8Array(64);
    handle.set(Buffer.from('NFCU'), 0);
    handle[4] = device;
    handle.set(Buffer.from(name), 5);
    return {
      handle,
      read: (offset, n) => {
        const out = Buffer.alloc(n);
        readSync(fd, out, 0, n, offset);
        return out;
      },
      write: (offset, data) => void writeSync(fd, data, 0, data.byteLength, offset),
    };
  }

  deviceCount(): number {
    return this.#devices;
  }

  openIpcHandle(device: number, handle: Uint8Array): { pointer: bigint; allocationBytes: bigint | undefined } {
    const name = Buffer.from(handle.subarray(5)).toString().replace(/\0+$/, '');
    const f = this.#files.get(name);
    if (f === undefined || Buffer.from(handle.subarray(0, 4)).toString() !== 'NFCU') {
      throw new Error('cudaIpcOpenMemHandle failed: invalid argument');
    }
    if (f.device !== device) throw new Error('cudaIpcOpenMemHandle failed: invalid device context');
    this.opened++;
    this.#open.set(f.base, name);
    return { pointer: f.base, allocationBytes: BigInt(fstatSync(f.fd).size) };
  }

  closeIpcHandle(_device: number, pointer: bigint): void {
    if (!this.#open.delete(pointer)) throw new Error('cudaIpcCloseMemHandle: not open');
    this.closed++;
  }

  copyToHost(_device: number, dst: Uint8Array, src: bigint): void {
    this.hostCopies++;
    const { fd, offset } = this.#at(src, dst.byteLength);
    readSync(fd, dst, 0, dst.byteLength, offset);
  }

  copyToDevice(_device: number, dst: bigint, src: Uint8Array): void {
    this.hostCopies++;
    const { fd, offset } = this.#at(dst, src.byteLength);
    writeSync(fd, src, 0, src.byteLength, offset);
  }

  /** Server side cudaMalloc: a "device" file that is open (reachable) at once. */
  malloc(device: number, bytes: number): bigint {
    return this.openIpcHandle(device, this.allocate(device, bytes).handle).pointer;
  }

  free(device: number, pointer: bigint): void {
    this.closeIpcHandle(device, pointer);
  }

  synchronize(): void {}

  /** Page-locked host memory in use (fake-pinned.ts). */
  readonly pinned = new Set<ArrayBuffer>();
  mallocHost(bytes: number): Uint8Array {
    return pinnedAlloc(this.pinned, bytes);
  }

  freeHost(view: Uint8Array): void {
    pinnedFree(this.pinned, view);
  }

  ignoreOtherCaptures(): void {}

  copyOnDevice(_device: number, dst: bigint, src: bigint, bytes: number): void {
    const from = this.#at(src, bytes);
    const to = this.#at(dst, bytes);
    const tmp = Buffer.alloc(bytes);
    readSync(from.fd, tmp, 0, bytes, from.offset);
    writeSync(to.fd, tmp, 0, bytes, to.offset);
  }

  /** Removes the files (the test's `after`). */
  dispose(): void {
    for (const [name, f] of this.#files) {
      closeSync(f.fd);
      rmSync(`/dev/shm/${name}`, { force: true });
    }
    this.#files.clear();
  }

  #at(address: bigint, bytes: number): { fd: number; offset: number } {
    for (const [base, name] of this.#open) {
      const f = this.#files.get(name)!;
      const offset = Number(address - base);
      if (address >= base && offset + bytes <= f.bytes) return { fd: f.fd, offset };
    }
    throw new Error(`illegal address: ${address} + ${bytes}`);
  }
}
