import { AlreadyExistsError, InvalidArgError, NotFoundError, UnsupportedError } from '../../core/errors.js';
import type { CudaIpcSpan } from '../../core/device.js';
import { CUDA_IPC_HANDLE_BYTES, loadCudaRuntime, type CudaRuntime, type CudaUnavailable } from '../../native/cudart.js';
import { checkSlice, CLIENT_SHM_DISABLED, MAX_REGIONS, unregisterHeld, type RegionSlice } from './regions.js';

/**
 * Client CUDA shared memory (Triton's cuda_shared_memory extension): GPU buffers another process allocated and
 * shared as a cudaIpcMemHandle_t, opened here with cudaIpcOpenMemHandle and read for inputs / written for outputs.
 *
 * Ownership: this class owns every opened handle. A region is closed (cudaIpcCloseMemHandle) at unregister when no
 * request holds it, else when its last holder releases it (Triton's awaiting_unregister): a request's slice stays
 * mapped until the request is done, and until then the region serves new requests too, as Triton's does.
 * Threading: main thread only;
 * the CUDA calls are synchronous (src/native/cudart.ts says why).
 *
 * Safety rules, as Triton's: the handle must be exactly 64 bytes; the registered byte_size must fit in the
 * allocation the driver reports behind the handle; every request slice is checked against the registered size in
 * 64-bit arithmetic (offset, overflow, bounds) before any copy; the device must be one CUDA shows this process.
 */

/** Triton's answer when the server cannot use CUDA (a build or a machine without GPUs). */
function gpusNotSupported(name: string): InvalidArgError {
  return new InvalidArgError(`failed to register CUDA shared memory region: '${name}', GPUs not supported`);
}

export interface CudaRegionStatus {
  name: string;
  device_id: number;
  byte_size: number;
}

interface Region {
  /** Unique per registration (see CudaIpcSpan.region). */
  readonly id: number;
  readonly name: string;
  readonly device: number;
  readonly byteSize: bigint;
  /** Base address of the opened handle in this process. */
  readonly pointer: bigint;
  /** A copy of the client's handle: child processes open it themselves (process transport). */
  readonly handle: Uint8Array;
  /** Aborted when the region is closed here: children close their own mappings then. */
  readonly closed: AbortController;
  users: number;
  unregistered: boolean;
}

/** A checked slice of a CUDA region: its device address, for engines that take device memory. */
export interface CudaSlice extends RegionSlice {
  readonly device: number;
  readonly pointer: bigint;
  /** The slice as another process reaches it: the region's handle and the slice's offset from its base. */
  readonly ipc: CudaIpcSpan;
  /** `read`, synchronously: a device-to-host cudaMemcpy into a fresh, owned buffer. */
  readNow(): Uint8Array;
}

export class CudaSharedMemory {
  readonly #enabled: boolean;
  readonly #regions = new Map<string, Region>();
  /** Names registered as system shared memory: Triton keeps one namespace for both kinds. */
  readonly #systemHas: (name: string) => boolean;
  readonly #load: () => CudaRuntime | CudaUnavailable;
  #runtime: CudaRuntime | undefined;
  #nextId = 1;

  /**
   * `runtime` loads the CUDA runtime (default: libcudart through koffi, on first registration); tests without a
   * GPU pass a test double of the GPU boundary here.
   */
  constructor(opts: {
    enabled: boolean;
    systemHas: (name: string) => boolean;
    runtime?: () => CudaRuntime | CudaUnavailable;
  }) {
    this.#enabled = opts.enabled;
    this.#systemHas = opts.systemHas;
    this.#load = opts.runtime ?? loadCudaRuntime;
  }

  has(name: string): boolean {
    return this.#regions.has(name);
  }

  status(name?: string): CudaRegionStatus[] {
    const show = (r: Region): CudaRegionStatus => ({
      name: r.name,
      device_id: r.device,
      byte_size: Number(r.byteSize),
    });
    if (name === undefined || name === '') return [...this.#regions.values()].map(show);
    const r = this.#regions.get(name);
    if (r !== undefined) return [show(r)];
    if (this.#systemHas(name)) {
      throw new NotFoundError(
        `The region named '${name}' is registered as system shared memory, not CUDA shared memory`,
      );
    }
    throw new NotFoundError(`Unable to find cuda shared memory region: '${name}'`);
  }

  /** The refusals that come before a registration's body is read (Triton's order): disabled, no region name. */
  checkRegister(name: string): void {
    if (!this.#enabled) throw new UnsupportedError(CLIENT_SHM_DISABLED);
    if (name === '') throw new InvalidArgError("'region name' is necessary to register cuda shared memory region");
  }

  register(name: string, rawHandle: Uint8Array, deviceId: bigint, byteSize: bigint): void {
    this.checkRegister(name);
    if (rawHandle.byteLength !== CUDA_IPC_HANDLE_BYTES) {
      throw new InvalidArgError("'raw_handle' must be a valid base64 encoded cudaIpcMemHandle_t");
    }
    if (this.#regions.has(name) || this.#systemHas(name)) {
      throw new AlreadyExistsError(`shared memory region '${name}' already in manager`);
    }
    const rt = this.#cuda(name);
    const count = rt.deviceCount();
    if (deviceId < 0n || deviceId >= BigInt(count)) {
      throw new InvalidArgError(
        `failed to register shared memory region '${name}': invalid args (device_id ${deviceId}: this server sees ${count} GPU${count === 1 ? '' : 's'}, 0 to ${count - 1})`,
      );
    }
    if (this.#regions.size >= MAX_REGIONS) {
      throw new InvalidArgError(
        `failed to register shared memory region '${name}': ${MAX_REGIONS} CUDA regions are registered already; unregister some first`,
      );
    }
    const device = Number(deviceId);
    let opened: { pointer: bigint; allocationBytes: bigint | undefined };
    try {
      opened = rt.openIpcHandle(device, rawHandle);
    } catch (err) {
      // Triton answers the client "invalid args" and logs CUDA's reason; CUDA's text names no server path.
      throw new InvalidArgError(
        `failed to register shared memory region: invalid args (${err instanceof Error ? err.message : String(err)})`,
        { cause: err },
      );
    }
    // The allocation must hold what the client registers: else a request could reach past it (Triton's check).
    if (opened.allocationBytes === undefined || byteSize > opened.allocationBytes) {
      closeQuietly(rt, device, opened.pointer);
      throw new InvalidArgError(`failed to register shared memory region '${name}': invalid args`);
    }
    this.#regions.set(name, {
      id: this.#nextId++,
      name,
      device,
      byteSize,
      pointer: opened.pointer,
      handle: rawHandle.slice(),
      closed: new AbortController(),
      users: 0,
      unregistered: false,
    });
  }

  /** Unregisters one region (an unknown name is fine, as in Triton) or all; regions in use close when released. */
  unregister(name?: string): void {
    if (!this.#enabled) throw new UnsupportedError(CLIENT_SHM_DISABLED);
    unregisterHeld(this.#regions, name, (r) => this.#close(r));
  }

  /** Checks a request's slice in Triton's order and wording, and holds the region until `release`. */
  acquire(name: string, offset: bigint, byteSize: bigint): CudaSlice {
    const r = this.#regions.get(name);
    if (r === undefined) throw new NotFoundError(`Unable to find shared memory region: '${name}'`);
    checkSlice(name, r.byteSize, offset, byteSize);
    const rt = this.#runtime;
    if (rt === undefined) throw gpusNotSupported(name); // unreachable: a region exists only once CUDA was loaded
    r.users++;
    const pointer = r.pointer + offset;
    const size = Number(byteSize);
    const readNow = (): Uint8Array => {
      // An owned ArrayBuffer (never Buffer's pool): engines take inputs by transfer.
      const out = new Uint8Array(Buffer.allocUnsafeSlow(size).buffer, 0, size);
      rt.copyToHost(r.device, out, pointer);
      return out;
    };
    return {
      region: name,
      position: Number(offset),
      byteSize: size,
      device: r.device,
      pointer,
      ipc: { region: r.id, handle: r.handle, offset: Number(offset), closed: r.closed.signal },
      readNow,
      read: () => Promise.resolve(readNow()),
      write: (bytes) => {
        if (bytes.byteLength > size) throw new InvalidArgError('internal: a write larger than its slice');
        rt.copyToDevice(r.device, pointer, bytes);
      },
    };
  }

  /** True for slices this manager handed out (the caller releases each to the manager it came from). */
  owns(slice: RegionSlice): slice is CudaSlice {
    const r = this.#regions.get(slice.region);
    return r !== undefined && 'pointer' in slice;
  }

  release(slice: RegionSlice): void {
    const r = this.#regions.get(slice.region);
    if (r === undefined) return;
    r.users--;
    if (r.users === 0 && r.unregistered) this.#close(r);
  }

  /** Closes every region (server shutdown; no request is running any more). */
  close(): void {
    for (const r of [...this.#regions.values()]) this.#close(r);
  }

  /** The runtime, loaded on first registration; a machine that cannot use CUDA answers Triton's 400. */
  #cuda(name: string): CudaRuntime {
    if (this.#runtime !== undefined) return this.#runtime;
    const loaded = this.#load();
    if ('reason' in loaded || loaded.deviceCount() === 0) throw gpusNotSupported(name);
    this.#runtime = loaded;
    return loaded;
  }

  #close(r: Region): void {
    if (this.#regions.get(r.name) === r) this.#regions.delete(r.name);
    if (this.#runtime !== undefined) closeQuietly(this.#runtime, r.device, r.pointer);
    r.closed.abort();
  }
}

/** Closing a handle fails only if CUDA is already broken; the region is gone from the map either way. */
function closeQuietly(rt: CudaRuntime, device: number, pointer: bigint): void {
  try {
    rt.closeIpcHandle(device, pointer);
  } catch {
    // Nothing to do: the mapping dies with the process.
  }
}
