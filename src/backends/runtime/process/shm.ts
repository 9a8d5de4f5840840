import { closeSync, fstatSync, openSync, readdirSync, unlinkSync } from 'node:fs';
import koffi from 'koffi';
import { InternalError, UnavailableError } from '../../../core/errors.js';
import { registerAddressable } from '../../../native/addressable.js';
import { configureKoffi } from '../../../native/koffi.js';
import { BlockAllocator, alignUp } from './allocator.js';

/**
 * Shared-memory segments under /dev/shm, mapped into this process with libc's `mmap` through koffi.
 *
 * Why koffi's mmap and not fs reads/writes of the /dev/shm file: Node has no mmap, and `pread`/`pwrite` would copy
 * every tensor through a syscall in each direction (and block the event loop for large ones). With the mapping,
 * `koffi.view` gives an ArrayBuffer over the very pages the child maps, so inputs are written once (from the
 * request buffer straight into shared memory) and read by numpy in place, and outputs are copied once out of the
 * child's pages. koffi is already a dependency (onnxruntime's C API, NVML); the calls used here (`mmap`, `munmap`,
 * `posix_fallocate`) are made once per segment, never per request.
 *
 * Ownership: a segment is written by one side only. `HostArena` owns the segments the host writes (`<prefix>h<n>`);
 * `PeerSegments` maps the child's (`<prefix>c<n>`) read-only. After `close()` no view of a mapping may be used (the
 * pages are unmapped): callers copy out what they keep.
 */

const PROT_READ = 0x1;
const PROT_WRITE = 0x2;
const MAP_SHARED = 0x1;
const MAP_FAILED = 0xffffffffffffffffn;

export const SHM_DIR = '/dev/shm';

interface Libc {
  mmap: (addr: null, length: number, prot: number, flags: number, fd: number, offset: number) => unknown;
  munmap: (addr: unknown, length: number) => number;
  posixFallocate: (fd: number, offset: number, len: number) => number;
  flock: (fd: number, operation: number) => number;
}

let libc: Libc | undefined;

function lib(): Libc {
  if (libc !== undefined) return libc;
  configureKoffi();
  const c = koffi.load('libc.so.6');
  libc = {
    mmap: c.func('void *mmap(void *addr, size_t length, int prot, int flags, int fd, int64_t offset)'),
    munmap: c.func('int munmap(void *addr, size_t length)'),
    posixFallocate: c.func('int posix_fallocate(int fd, int64_t offset, int64_t len)'),
    flock: c.func('int flock(int fd, int operation)'),
  };
  return libc;
}

const LOCK_EX = 2;
const LOCK_NB = 4;

/**
 * Takes an exclusive flock(2) on `fd`: waits for it, or with `wait: false` answers false when another open file
 * holds it. flock locks belong to the open file (not the process) and are dropped by the kernel when the holder
 * dies, whatever pid namespace it ran in: what tells a dead server's segments from a live one's (owner.ts).
 */
export function lockFile(fd: number, wait: boolean): boolean {
  return lib().flock(fd, LOCK_EX | (wait ? 0 : LOCK_NB)) === 0;
}

/** One mapped segment file. */
class Mapping {
  readonly path: string;
  readonly size: number;
  #ptr: unknown;
  /** A view of the whole mapping; undefined once unmapped. */
  bytes: Uint8Array | undefined;

  constructor(path: string, fd: number, size: number, writable: boolean) {
    this.path = path;
    this.size = size;
    const ptr = lib().mmap(null, size, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
    if (ptr === null || koffi.address(ptr) === MAP_FAILED) {
      throw new InternalError(`cannot map shared memory '${path}' (${size} bytes): errno ${koffi.errno()}`);
    }
    this.#ptr = ptr;
    this.bytes = new Uint8Array(koffi.view(ptr, size));
    // A front-end thread writes a lent output from these pages itself (the lease keeps them mapped).
    registerAddressable(this.bytes.buffer as ArrayBuffer, koffi.address(ptr));
  }

  unmap(): void {
    if (this.bytes === undefined) return;
    this.bytes = undefined;
    lib().munmap(this.#ptr, this.size);
    this.#ptr = undefined;
  }
}

/** Creates `/dev/shm/<name>` with its pages reserved, and maps it read-write. */
function createMapping(name: string, size: number): Mapping {
  const path = `${SHM_DIR}/${name}`;
  const fd = openSync(path, 'wx+', 0o600);
  try {
    // Reserve the pages now: writing into a sparse file on a full /dev/shm would kill the server with SIGBUS.
    const err = lib().posixFallocate(fd, 0, size);
    if (err !== 0) {
      throw new UnavailableError(
        `cannot reserve ${size} bytes of shared memory in ${SHM_DIR} (errno ${err}): free space there or raise its size (docker --shm-size)`,
      );
    }
    return new Mapping(path, fd, size, true);
  } catch (e) {
    unlinkQuietly(path);
    throw e;
  } finally {
    closeSync(fd);
  }
}

function unlinkQuietly(path: string): void {
  try {
    unlinkSync(path);
  } catch {
    // already gone
  }
}

export interface ShmOptions {
  /** File name prefix of every segment of one child process (unique per process). */
  prefix: string;
  /** First segment's size (Triton's shm-default-byte-size). */
  defaultByteSize: number;
  /** Size of each further segment, or the block size when larger (Triton's shm-growth-byte-size). */
  growthByteSize: number;
}

/** A block the host wrote: where it is, and a view to write through. */
export interface HostBlock {
  seg: number;
  off: number;
  size: number;
  bytes: Uint8Array;
}

/**
 * The segments the host writes (request inputs, BLS outputs). Grows by whole new segments, never remaps, so a
 * block's place stays valid while the child reads it; the child hands blocks back (`free`) when done.
 */
export class HostArena {
  readonly #opts: ShmOptions;
  readonly #segments: { map: Mapping; alloc: BlockAllocator }[] = [];

  constructor(opts: ShmOptions) {
    this.#opts = opts;
  }

  /** A block of at least `n` bytes. Throws UNAVAILABLE when /dev/shm has no room for a new segment. */
  alloc(n: number): HostBlock {
    const size = alignUp(Math.max(n, 1));
    for (let seg = 0; seg < this.#segments.length; seg++) {
      const s = this.#segments[seg];
      const off = s.alloc.alloc(size);
      if (off >= 0) return { seg, off, size, bytes: s.map.bytes!.subarray(off, off + size) };
    }
    const seg = this.#segments.length;
    const segSize = Math.max(seg === 0 ? this.#opts.defaultByteSize : this.#opts.growthByteSize, size);
    const map = createMapping(`${this.#opts.prefix}h${seg}`, alignUp(segSize));
    const alloc = new BlockAllocator(map.size);
    this.#segments.push({ map, alloc });
    const off = alloc.alloc(size);
    return { seg, off, size, bytes: map.bytes!.subarray(off, off + size) };
  }

  free(seg: number, off: number): void {
    this.#segments[seg]?.alloc.free(off);
  }

  /** Bytes allocated and bytes mapped, for tests and logs. */
  usage(): { used: number; mapped: number; segments: number } {
    let used = 0;
    let mapped = 0;
    for (const s of this.#segments) {
      used += s.alloc.used;
      mapped += s.map.size;
    }
    return { used, mapped, segments: this.#segments.length };
  }

  /** Unmaps and unlinks every segment. Only after the child is gone or no longer reads them. */
  close(): void {
    for (const s of this.#segments) {
      s.map.unmap();
      unlinkQuietly(s.map.path);
    }
    this.#segments.length = 0;
  }
}

/** The child's segments, mapped read-only on first use. */
export class PeerSegments {
  readonly #prefix: string;
  readonly #maps: Mapping[] = [];
  /** Blocks whose bytes the host's tensors still view (lent): the mappings outlive close() until they are back. */
  #held = 0;
  #closed = false;

  constructor(prefix: string) {
    this.#prefix = prefix;
  }

  /** A view of `[off, off + size)` of child segment `seg`; throws INTERNAL for a place outside it. */
  view(seg: number, off: number, size: number): Uint8Array {
    if (!Number.isSafeInteger(seg) || seg < 0 || seg > 1 << 20) {
      throw new InternalError(`the child named shared-memory segment ${seg}, which it cannot have`);
    }
    let map = this.#maps[seg];
    if (map === undefined) {
      const path = `${SHM_DIR}/${this.#prefix}c${seg}`;
      const fd = openSync(path, 'r');
      try {
        map = new Mapping(path, fd, fstatSync(fd).size, false);
      } finally {
        closeSync(fd);
      }
      this.#maps[seg] = map;
    }
    if (!Number.isSafeInteger(off) || !Number.isSafeInteger(size) || off < 0 || size < 0 || off + size > map.size) {
      throw new InternalError(`the child named bytes [${off}, ${off + size}) of a ${map.size}-byte segment`);
    }
    return map.bytes!.subarray(off, off + size);
  }

  /** A block is lent to tensors: unmapping waits for its `unhold` (a view of unmapped memory would crash). */
  hold(): void {
    this.#held++;
  }

  unhold(): void {
    if (--this.#held === 0 && this.#closed) this.#unmap();
  }

  /** Blocks lent now (tests and leak checks). */
  get held(): number {
    return this.#held;
  }

  /** Unlinks the segments now; unmaps them now, or when the last lent block is given back. */
  close(): void {
    this.#closed = true;
    for (const m of this.#maps) if (m !== undefined) unlinkQuietly(m.path);
    if (this.#held === 0) this.#unmap();
  }

  #unmap(): void {
    for (const m of this.#maps) m?.unmap();
    this.#maps.length = 0;
  }
}

/** Removes every segment file of a prefix (a child that died after creating segments the host never mapped). */
export function unlinkSegments(prefix: string): void {
  let names: string[];
  try {
    names = readdirSync(SHM_DIR);
  } catch {
    return;
  }
  for (const n of names) if (n.startsWith(prefix)) unlinkQuietly(`${SHM_DIR}/${n}`);
}

/**
 * Removes segments left by servers that died without cleaning up: names `<base><pid>_...` whose pid is not alive.
 * Called once when a backend starts.
 */
export function unlinkStaleSegments(base: string): void {
  let names: string[];
  try {
    names = readdirSync(SHM_DIR);
  } catch {
    return;
  }
  for (const n of names) {
    if (!n.startsWith(base)) continue;
    const pid = Number(n.slice(base.length).split('_')[0]);
    if (!Number.isSafeInteger(pid) || pid <= 0 || pid === process.pid) continue;
    try {
      process.kill(pid, 0);
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ESRCH') unlinkQuietly(`${SHM_DIR}/${n}`);
    }
  }
}
