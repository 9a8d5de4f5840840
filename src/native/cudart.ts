import koffi, { type IKoffiLib, type KoffiFunction } from 'koffi';
import { registerAddressable } from './addressable.js';
import { configureKoffi } from './koffi.js';

/**
 * The few CUDA calls client CUDA shared memory needs (Triton's cuda_shared_memory extension), through koffi:
 * libcudart for the device, IPC handles and copies; libcuda (the driver) for the size of the allocation behind an
 * opened handle, so a registration can be checked against it (Triton checks the same, with cuMemGetAddressRange).
 *
 * `CudaRuntime` is the GPU boundary: the server's shared-memory code sees only this interface, so tests on a
 * machine without a GPU can put a test double behind it (test/helpers/fake-cudart.ts, named as such).
 *
 * Threading: every call runs on the calling (main) thread and is synchronous. CUDA's current device is per host
 * thread, and a copy must run on the thread whose device was just set: koffi runs each `.async` call on any libuv
 * pool thread, so cudaSetDevice then cudaMemcpy as two pool calls may land on two threads. cudaMemcpyDefault infers
 * the direction from the addresses, but on a thread with no current device the runtime makes device 0's primary
 * context current (creating it, ~0.5 GB, on a server that uses another GPU), and CUDA does not promise that memory
 * opened by cudaIpcOpenMemHandle in one device's context is reachable from another's; cudaMemcpyAsync is
 * synchronous anyway for pageable host memory. So copies stay synchronous here, and rare: an onnxruntime KIND_GPU
 * instance on the region's device reads and writes the client's memory in place (backends/device-placement.ts);
 * only other instances (CPU, another GPU, engines without device memory) get copies, made at dispatch.
 * Opening a handle costs a few ms once per registration; a copy blocks the event loop for its transfer, not measured
 * here (no GPU): at 10-25 GB/s for pageable host memory, 40-100 µs per MiB.
 */

/** The size of a cudaIpcMemHandle_t: 64 opaque bytes. */
export const CUDA_IPC_HANDLE_BYTES = 64;

/** Environment variable naming the libcudart file to load (a CUDA runtime outside the loader's path). */
export const CUDART_LIBRARY_ENV = 'NEREID_CUDART_LIBRARY';

/** Sonames tried in order: CUDA 13 (what the CUDA provider of onnxruntime 1.30 links), then 12. */
const CUDART_SONAMES = ['libcudart.so.13', 'libcudart.so.12', 'libcudart.so'];

/** cudaStreamCaptureMode: cudaStreamCaptureModeThreadLocal. */
const CUDA_STREAM_CAPTURE_MODE_THREAD_LOCAL = 1;

/** cudaMemcpyKind: with unified addressing the runtime tells host from device by the address itself. */
const CUDA_MEMCPY_DEFAULT = 4;
/** cudaIpcMemLazyEnablePeerAccess: a handle from another device's memory is opened with peer access. */
const CUDA_IPC_MEM_LAZY_ENABLE_PEER_ACCESS = 1;

/** A CUDA call that failed: its function, error code and CUDA's text for it. */
export class CudaError extends Error {
  readonly code: number;
  constructor(call: string, code: number, text: string) {
    super(`${call} failed: ${text} (CUDA error ${code})`);
    this.name = 'CudaError';
    this.code = code;
  }
}

/** What the server asks of CUDA. Pointers are device addresses as bigint (never dereferenced in JavaScript). */
export interface CudaRuntime {
  /** The library that was loaded (for messages). */
  readonly library: string;
  /** GPUs CUDA shows this process (CUDA_VISIBLE_DEVICES applied); 0 without a usable driver. */
  deviceCount(): number;
  /**
   * Opens another process's cudaIpcMemHandle_t on `device`: the mapped base address, and the size of the
   * allocation behind it as the driver reports it (undefined when the driver cannot tell).
   */
  openIpcHandle(device: number, handle: Uint8Array): { pointer: bigint; allocationBytes: bigint | undefined };
  closeIpcHandle(device: number, pointer: bigint): void;
  /** Copies `dst.byteLength` bytes from device address `src` into host memory. */
  copyToHost(device: number, dst: Uint8Array, src: bigint): void;
  /** Copies `src` (host memory) to device address `dst`. */
  copyToDevice(device: number, dst: bigint, src: Uint8Array): void;
  /** Copies `bytes` between device addresses. */
  copyOnDevice(device: number, dst: bigint, src: bigint, bytes: number): void;
  /** cudaMalloc on `device`: a device buffer of `bytes` the caller frees. */
  malloc(device: number, bytes: number): bigint;
  /** cudaFree of what `malloc` gave. */
  free(device: number, pointer: bigint): void;
  /**
   * cudaMallocHost: `bytes` of page-locked host memory (copies from the device land in it at the bus's speed, not
   * through the driver's staging of pageable memory), as a view the caller must drop before `freeHost(view)`.
   */
  mallocHost(bytes: number): Uint8Array;
  /** cudaFreeHost of what `mallocHost` gave; the view must not be used after. */
  freeHost(view: Uint8Array): void;
  /**
   * Waits for the copies issued on `device`'s legacy default stream (cudaStreamSynchronize(0)): a host-to-device
   * cudaMemcpy from pageable memory may return before its DMA lands, and onnxruntime's streams do not wait for it.
   */
  synchronize(device: number): void;
  /**
   * The calling thread ignores other threads' stream captures (cudaThreadExchangeStreamCaptureMode, thread-local):
   * onnxruntime captures CUDA graphs in CUDA's global mode, in which a cudaMalloc or a synchronous copy made by any
   * other thread meanwhile fails and breaks the capture. An engine thread that sets this only stops at captures of
   * its own.
   */
  ignoreOtherCaptures(): void;
}

/** Why no CUDA runtime could be bound: the libraries tried and the loader's last message. */
export interface CudaUnavailable {
  reason: string;
}

let loaded: CudaRuntime | CudaUnavailable | undefined;

/**
 * The process's CUDA runtime, loaded on first use (a CPU-only server never loads it). A machine without libcudart
 * or without a driver answers CudaUnavailable, which is an ordinary state, not an error.
 */
export function loadCudaRuntime(): CudaRuntime | CudaUnavailable {
  loaded ??= bind();
  return loaded;
}

function open(): { lib: IKoffiLib; path: string } | CudaUnavailable {
  const override = process.env[CUDART_LIBRARY_ENV];
  const candidates = override !== undefined && override !== '' ? [override] : CUDART_SONAMES;
  const reasons: string[] = [];
  configureKoffi();
  for (const path of candidates) {
    try {
      return { lib: koffi.load(path), path };
    } catch (err) {
      reasons.push(`${path}: ${err instanceof Error ? err.message : String(err)}`);
    }
  }
  return { reason: `no CUDA runtime library could be loaded (${reasons.join('; ')})` };
}

// Long: the table of libcudart functions bound through koffi, one line each.
function bind(): CudaRuntime | CudaUnavailable {
  const opened = open();
  if ('reason' in opened) return opened;
  const { lib, path } = opened;
  const handleType = koffi.struct('nereid_cudaIpcMemHandle_t', {
    reserved: koffi.array('uint8', CUDA_IPC_HANDLE_BYTES),
  });
  const fn = (decl: string): KoffiFunction => lib.func(decl);
  const errorString = fn('const char *cudaGetErrorString(int error)');
  const getDeviceCount = fn('int cudaGetDeviceCount(_Out_ int *count)');
  const setDevice = fn('int cudaSetDevice(int device)');
  const ipcOpen = lib.func('cudaIpcOpenMemHandle', 'int', ['_Out_ uint64_t *', handleType, 'uint']);
  const ipcClose = fn('int cudaIpcCloseMemHandle(uint64_t devPtr)');
  // cudaMemcpy, declared once per direction: host memory is passed as a buffer, device memory as an address.
  const toHost = lib.func('cudaMemcpy', 'int', ['void *', 'uint64_t', 'size_t', 'int']);
  const toDevice = lib.func('cudaMemcpy', 'int', ['uint64_t', 'void *', 'size_t', 'int']);
  const onDevice = lib.func('cudaMemcpy', 'int', ['uint64_t', 'uint64_t', 'size_t', 'int']);
  const cudaMalloc = fn('int cudaMalloc(_Out_ uint64_t *devPtr, size_t size)');
  const cudaFree = fn('int cudaFree(uint64_t devPtr)');
  const cudaMallocHost = fn('int cudaMallocHost(_Out_ void **ptr, size_t size)');
  const cudaFreeHost = fn('int cudaFreeHost(void *ptr)');
  /** Page-locked views by their memory, for cudaFreeHost. */
  const hostPointers = new WeakMap<ArrayBuffer, unknown>();
  const streamSync = lib.func('cudaStreamSynchronize', 'int', ['void *']);
  const exchangeCaptureMode = fn('int cudaThreadExchangeStreamCaptureMode(_Inout_ int *mode)');
  const addressRange = driverAddressRange();

  const check = (call: string, code: number): void => {
    if (code !== 0) throw new CudaError(call, code, errorString(code) as string);
  };
  const onDeviceOf = (device: number): void => check(`cudaSetDevice(${device})`, setDevice(device) as number);

  return {
    library: path,
    deviceCount() {
      const out = [0];
      // No driver, or no GPU: CUDA answers an error here; both mean no device to open a handle on.
      return (getDeviceCount(out) as number) === 0 ? out[0] : 0;
    },
    openIpcHandle(device, handle) {
      onDeviceOf(device);
      const out = [0n];
      check('cudaIpcOpenMemHandle', ipcOpen(out, { reserved: handle }, CUDA_IPC_MEM_LAZY_ENABLE_PEER_ACCESS) as number);
      const pointer = BigInt(out[0]);
      return { pointer, allocationBytes: addressRange?.(pointer) };
    },
    closeIpcHandle(device, pointer) {
      onDeviceOf(device);
      check('cudaIpcCloseMemHandle', ipcClose(pointer) as number);
    },
    copyToHost(device, dst, src) {
      if (dst.byteLength === 0) return;
      onDeviceOf(device);
      check('cudaMemcpy (device to host)', toHost(dst, src, dst.byteLength, CUDA_MEMCPY_DEFAULT) as number);
    },
    copyToDevice(device, dst, src) {
      if (src.byteLength === 0) return;
      onDeviceOf(device);
      check('cudaMemcpy (host to device)', toDevice(dst, src, src.byteLength, CUDA_MEMCPY_DEFAULT) as number);
    },
    copyOnDevice(device, dst, src, bytes) {
      if (bytes === 0) return;
      onDeviceOf(device);
      check('cudaMemcpy (device to device)', onDevice(dst, src, bytes, CUDA_MEMCPY_DEFAULT) as number);
    },
    malloc(device, bytes) {
      onDeviceOf(device);
      const out = [0n];
      check(`cudaMalloc(${bytes})`, cudaMalloc(out, bytes) as number);
      return BigInt(out[0]);
    },
    free(device, pointer) {
      onDeviceOf(device);
      check('cudaFree', cudaFree(pointer) as number);
    },
    mallocHost(bytes) {
      const out: unknown[] = [null];
      check(`cudaMallocHost(${bytes})`, cudaMallocHost(out, Math.max(bytes, 1)) as number);
      const memory = koffi.view(out[0], Math.max(bytes, 1));
      hostPointers.set(memory, out[0]);
      // A front-end thread writes a lent output from these pages itself (the lease keeps them allocated).
      registerAddressable(memory, koffi.address(out[0]));
      return new Uint8Array(memory, 0, bytes);
    },
    freeHost(view) {
      const pointer = hostPointers.get(view.buffer as ArrayBuffer);
      if (pointer === undefined) throw new Error('cudaFreeHost: not memory cudaMallocHost gave');
      hostPointers.delete(view.buffer as ArrayBuffer);
      check('cudaFreeHost', cudaFreeHost(pointer) as number);
    },
    synchronize(device) {
      onDeviceOf(device);
      check('cudaStreamSynchronize', streamSync(null) as number);
    },
    ignoreOtherCaptures() {
      const mode = [CUDA_STREAM_CAPTURE_MODE_THREAD_LOCAL];
      check('cudaThreadExchangeStreamCaptureMode', exchangeCaptureMode(mode) as number);
    },
  };
}

/**
 * The driver's cuMemGetAddressRange_v2: the size of the allocation an address lies in. It needs a current context
 * on the calling thread, which cudaIpcOpenMemHandle has just made current. Undefined where libcuda cannot be bound.
 */
function driverAddressRange(): ((pointer: bigint) => bigint | undefined) | undefined {
  let getRange: KoffiFunction;
  try {
    const lib = koffi.load('libcuda.so.1');
    getRange = lib.func('int cuMemGetAddressRange_v2(_Out_ uint64_t *base, _Out_ size_t *size, uint64_t dptr)');
  } catch {
    return undefined;
  }
  return (pointer) => {
    const base = [0n];
    const size = [0n];
    if ((getRange(base, size, pointer) as number) !== 0) return undefined;
    // The handle may point into the middle of an allocation: what lies past the pointer is what can be used.
    return BigInt(size[0]) - (pointer - BigInt(base[0]));
  };
}
