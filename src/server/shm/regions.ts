import { closeSync, constants, fstatSync, openSync, read, readSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { OWNER_PREFIX, SEGMENT_BASES } from '../../backends/runtime/process/owner.js';
import { usedByProcessTree } from '../../backends/runtime/process/process-tree.js';
import {
  AlreadyExistsError,
  InternalError,
  InvalidArgError,
  NotFoundError,
  UnsupportedError,
} from '../../core/errors.js';

/**
 * Client system shared memory (Triton's system_shared_memory extension): regions a client created with shm_open and
 * registered by key, read for inputs and written for outputs.
 *
 * How the bytes are reached — pread/pwrite on a descriptor kept per region, not mmap. Node has no mmap; koffi could
 * call libc's, but a mapping is a raw pointer in JS: a client that shrinks its shm object after registering makes
 * the next access past the new end a SIGBUS (the server dies), and an unregister racing a request leaves a dangling
 * view. With pread/pwrite the kernel checks every access: a shrunk region is a short read, answered 400. Measured on
 * this machine (node 20, tmpfs): a 64-byte tensor costs 1.4 µs by pread vs 0.1 µs through a koffi view (noise beside
 * a request's ~100 µs); 16 MiB copies at 1.45 GB/s vs 1.66 GB/s (pread into a fresh buffer vs view copy), and writes
 * at 6.8 GB/s vs 14.8 GB/s. Inputs need their own buffer either way: engines take them by transfer to worker threads.
 * Reads up to 1 MiB are synchronous (≤ 0.7 ms); larger ones go through libuv's pool so the event loop keeps serving.
 *
 * Safety rules, as Triton's (CVE-2024-0088/0116): keys are POSIX shm names only (leading slashes, then a name with no
 * slash: never a path), opened without following symlinks (libuv adds O_CLOEXEC); the registered slice must lie inside the object; every
 * request slice is checked against the registered one in 64-bit arithmetic; a region in use by a request is closed
 * only when the last such request has finished (unregister marks it); Triton's reserved prefix is refused.
 *
 * The server's own segments (the process transport's, its children's, whatever their name) are never a client's
 * region: a client that registered one would read and overwrite other requests' tensors. Their name prefixes are
 * refused like Triton's reserved one, and, since a name proves nothing (a hard link, a rename, a segment a Python
 * model made itself), so is any object that this process or a descendant has open or mapped, by device and inode.
 */

/** Where POSIX shm_open keeps its objects on Linux. */
const SHM_DIR = '/dev/shm';

/** Keys with this prefix belong to Triton's Python backend; a client must never map them (CVE-2025-23319). */
export const RESERVED_KEY_PREFIX = 'triton_python_backend_shm_region_';

/** Every reserved prefix: Triton's, then Nereid's segment and owner-file prefixes (owner.ts). */
function reservedPrefixes(): string[] {
  return [RESERVED_KEY_PREFIX, ...SEGMENT_BASES, OWNER_PREFIX];
}

/** At most this many regions at once: each holds a file descriptor. */
export const MAX_REGIONS = 1024;

const UINT64_MAX = 2n ** 64n - 1n;
const SYNC_IO_MAX = 1 << 20;

/** Triton's message when client shared memory is off. */
export const CLIENT_SHM_DISABLED =
  "Client shared memory is disabled. Start the server with '--allow-client-shm=true' to enable.";

/**
 * Triton's check of a request's slice of a region, in its order and wording: offset inside, no 64-bit overflow,
 * end inside. System and CUDA regions alike.
 */
export function checkSlice(name: string, regionBytes: bigint, offset: bigint, byteSize: bigint): void {
  if (offset < 0n || offset >= regionBytes) {
    throw new InvalidArgError(`Invalid offset for shared memory region: '${name}'`);
  }
  if (byteSize < 0n || byteSize > UINT64_MAX - offset) {
    throw new InvalidArgError(
      `Integer overflow detected: byte_size (${byteSize}) + offset (${offset}) exceeds maximum value (${UINT64_MAX}) for region '${name}'`,
    );
  }
  if (offset + byteSize > regionBytes) {
    throw new InvalidArgError(`Invalid offset + byte size for shared memory region: '${name}'`);
  }
}

/**
 * Unregisters one region (an unknown name is fine, as in Triton) or all (no name or ''): each is marked, and closed
 * now unless requests still hold it (their release closes it). System and CUDA regions alike.
 */
export function unregisterHeld<R extends { users: number; unregistered: boolean }>(
  regions: ReadonlyMap<string, R>,
  name: string | undefined,
  close: (r: R) => void,
): void {
  const names = name === undefined || name === '' ? [...regions.keys()] : [name];
  for (const n of names) {
    const r = regions.get(n);
    if (r === undefined || r.unregistered) continue;
    r.unregistered = true;
    if (r.users === 0) close(r);
  }
}

export interface SystemRegionStatus {
  name: string;
  key: string;
  offset: number;
  byte_size: number;
}

interface Region {
  readonly name: string;
  readonly key: string;
  readonly offset: bigint;
  readonly byteSize: bigint;
  readonly fd: number;
  /** Requests holding the region now. */
  users: number;
  /** Unregistered while in use: closed when the last user releases it. */
  unregistered: boolean;
}

/** A checked slice of a region, held by one request until it releases it. */
export interface RegionSlice {
  readonly region: string;
  /** Position in the shm object (registered offset + request offset). */
  readonly position: number;
  readonly byteSize: number;
  read(): Promise<Uint8Array>;
  /** Writes `bytes` at the start of the slice; they must fit. */
  write(bytes: Uint8Array): void;
}

export class SystemSharedMemory {
  readonly #regions = new Map<string, Region>();
  readonly #enabled: boolean;

  constructor(opts: { enabled: boolean }) {
    this.#enabled = opts.enabled;
  }

  get enabled(): boolean {
    return this.#enabled;
  }

  /** Status of every region, or of one (NOT_FOUND when unknown). Allowed when client shared memory is off. */
  status(name?: string): SystemRegionStatus[] {
    const show = (r: Region): SystemRegionStatus => ({
      name: r.name,
      key: r.key,
      offset: Number(r.offset),
      byte_size: Number(r.byteSize),
    });
    if (name === undefined || name === '') return [...this.#regions.values()].map(show);
    const r = this.#regions.get(name);
    if (r === undefined) throw new NotFoundError(`Unable to find system shared memory region: '${name}'`);
    return [show(r)];
  }

  /** The refusals that come before a registration's body is read (Triton's order): disabled, no region name. */
  checkRegister(name: string): void {
    if (!this.#enabled) throw new UnsupportedError(CLIENT_SHM_DISABLED);
    if (name === '') {
      throw new InvalidArgError("'region name' is necessary to register system shared memory region");
    }
  }

  register(name: string, key: string, offset: bigint, byteSize: bigint): void {
    this.checkRegister(name);
    const file = checkKey(name, key);
    if (this.#regions.has(name)) throw new AlreadyExistsError(`shared memory region '${name}' already in manager`);
    if (this.#regions.size >= MAX_REGIONS) {
      throw new InvalidArgError(
        `failed to register shared memory region '${name}': ${MAX_REGIONS} regions are registered already; unregister some first`,
      );
    }
    if (offset < 0n || byteSize < 0n || offset + byteSize > UINT64_MAX) {
      throw new InvalidArgError(`failed to register shared memory region '${name}': invalid args`);
    }
    let fd: number;
    try {
      fd = openSync(join(SHM_DIR, file), constants.O_RDWR | constants.O_NOFOLLOW);
    } catch (err) {
      // Triton's code and words (shm_open failing is INTERNAL there); tritonclient's tests expect them.
      throw new InternalError(`Unable to open shared memory region: '${key}'`, { cause: err });
    }
    try {
      const st = fstatSync(fd, { bigint: true });
      if (!st.isFile()) throw new InternalError(`Invalid shared memory region: '${key}'`);
      // Our own descriptors are left out: this one, and those of client regions (a key may back several regions).
      const ours = new Set([fd, ...[...this.#regions.values()].map((r) => r.fd)]);
      if (usedByProcessTree({ dev: st.dev, ino: st.ino }, ours)) {
        throw new InvalidArgError(
          `cannot register shared memory region '${name}' with key '${key}' as the key names shared memory that the server uses`,
        );
      }
      if (offset + byteSize > st.size) {
        throw new InvalidArgError(`failed to register shared memory region '${name}': invalid args`);
      }
    } catch (err) {
      closeSync(fd);
      throw err;
    }
    this.#regions.set(name, { name, key, offset, byteSize, fd, users: 0, unregistered: false });
  }

  /**
   * Unregisters one region (unknown names are fine, as in Triton) or all; in-use regions close when released, and
   * until then stay listed, usable and their names taken (Triton's awaiting_unregister).
   */
  unregister(name?: string): void {
    if (!this.#enabled) throw new UnsupportedError(CLIENT_SHM_DISABLED);
    unregisterHeld(this.#regions, name, (r) => this.#close(r));
  }

  /**
   * Checks a request's slice (Triton's order and wording: offset, 64-bit overflow, bounds) and holds the region until
   * `release` is called. A region being unregistered still serves new requests until the last holder releases it:
   * Triton's GetMemoryInfo ignores its awaiting_unregister mark, and the region stays in its map until then.
   */
  acquire(name: string, offset: bigint, byteSize: bigint): RegionSlice {
    const r = this.#regions.get(name);
    if (r === undefined) throw new NotFoundError(`Unable to find shared memory region: '${name}'`);
    checkSlice(name, r.byteSize, offset, byteSize);
    r.users++;
    const position = Number(r.offset + offset);
    const size = Number(byteSize);
    return {
      region: name,
      position,
      byteSize: size,
      read: () => readRegion(r, position, size),
      write: (bytes) => writeRegion(r, position, size, bytes),
    };
  }

  release(slice: RegionSlice): void {
    const r = this.#regions.get(slice.region);
    if (r === undefined) return;
    r.users--;
    if (r.users === 0 && r.unregistered) this.#close(r);
  }

  /** Closes every region (server shutdown; no request is running any more). */
  close(): void {
    for (const r of this.#regions.values()) this.#close(r);
  }

  #close(r: Region): void {
    if (this.#regions.get(r.name) === r) this.#regions.delete(r.name);
    try {
      closeSync(r.fd);
    } catch {
      // Already closed: nothing holds it.
    }
  }
}

/** The file name under /dev/shm for a POSIX shm key, with Triton's key checks; throws INVALID_ARG, or INTERNAL for a name shm_open cannot open. */
function checkKey(name: string, key: string): string {
  const file = key.replace(/^\/+/, '');
  if (file === '')
    throw new InvalidArgError(`cannot register shared memory region '${name}' - invalid shm key '${key}'`);
  const reserved = reservedPrefixes().find((p) => file.startsWith(p));
  if (reserved !== undefined) {
    throw new InvalidArgError(
      `cannot register shared memory region '${name}' with key '${key}' as the key contains the reserved prefix '${reserved}'`,
    );
  }
  // shm_open names hold no further slash: anything else would be a path under /dev/shm (or out of it). shm_open
  // fails on these, so Triton's answer is its INTERNAL "Unable to open".
  if (file.includes('/') || file === '.' || file === '..' || file.includes('\0') || Buffer.byteLength(file) > 255) {
    throw new InternalError(`Unable to open shared memory region: '${key}'`);
  }
  return file;
}

function shrunk(r: Region): InvalidArgError {
  return new InvalidArgError(
    `shared memory region '${r.name}' holds fewer bytes than were registered (its shm object '${r.key}' was shrunk)`,
  );
}

async function readRegion(r: Region, position: number, size: number): Promise<Uint8Array> {
  // An owned ArrayBuffer (never Buffer's pool): engines take inputs by transfer.
  const out = Buffer.allocUnsafeSlow(size);
  let done = 0;
  while (done < size) {
    const n =
      size <= SYNC_IO_MAX
        ? readSync(r.fd, out, done, size - done, position + done)
        : await new Promise<number>((resolve, reject) =>
            read(r.fd, out, done, size - done, position + done, (err, bytes) => (err ? reject(err) : resolve(bytes))),
          );
    if (n === 0) throw shrunk(r);
    done += n;
  }
  return out;
}

function writeRegion(r: Region, position: number, size: number, bytes: Uint8Array): void {
  if (bytes.byteLength > size) throw new InvalidArgError('internal: a write larger than its slice'); // checked by caller
  // pwrite past the end would grow the object again; a client that shrank its region gets an error instead.
  if (fstatSync(r.fd).size < position + bytes.byteLength) throw shrunk(r);
  let done = 0;
  while (done < bytes.byteLength) {
    done += writeSync(r.fd, bytes, done, bytes.byteLength - done, position + done);
  }
}
