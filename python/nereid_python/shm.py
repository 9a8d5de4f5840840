"""Shared-memory segments under /dev/shm, as the host's transport lays them out.

Two sets of segments per process, each written by one side only:

- host segments (``<prefix>h<id>``): created and written by the host (request inputs, BLS outputs). Mapped here
  lazily, the first time a message names the id. A block is handed back to the host (``free``) when the last numpy
  array viewing it is garbage collected, so a model that keeps an input array past ``execute`` stays correct.
- child segments (``<prefix>c<id>``): created and written here (responses, BLS inputs). The host copies a block
  out as soon as it reads the message naming it, then hands it back with ``free``.

Threading: ``ChildArena.alloc``/``free`` take a lock (responses may come from a model's own threads); finalizers
may run on any thread, so pending frees are kept under a lock too.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import struct
import threading
import weakref

import numpy as np

ALIGN = 64
SHM_DIR = "/dev/shm"


def align(n: int) -> int:
    return (n + ALIGN - 1) & ~(ALIGN - 1)


def _map(path: str, size: int | None, create: bool) -> mmap.mmap:
    flags = os.O_RDWR | (os.O_CREAT | os.O_EXCL if create else 0)
    fd = os.open(path, flags, 0o600)
    try:
        if create:
            # Reserve the pages now: a sparse file on a full /dev/shm would fault (SIGBUS) on first write.
            os.posix_fallocate(fd, 0, size)
        else:
            size = os.fstat(fd).st_size
        return mmap.mmap(fd, size)
    except BaseException:
        if create:
            os.unlink(path)
        raise
    finally:
        os.close(fd)


class _Segment:
    __slots__ = ("id", "size", "mm", "array", "free", "used", "path")

    def __init__(self, seg_id: int, path: str, size: int) -> None:
        self.id = seg_id
        self.path = path
        self.size = size
        self.mm = _map(path, size, create=True)
        self.array = np.frombuffer(self.mm, dtype=np.uint8)
        self.free = [(0, size)]  # sorted (offset, size) holes
        self.used: dict[int, int] = {}

    def alloc(self, n: int) -> int | None:
        for i, (off, size) in enumerate(self.free):
            if size >= n:
                if size == n:
                    del self.free[i]
                else:
                    self.free[i] = (off + n, size - n)
                self.used[off] = n
                return off
        return None

    def release(self, off: int) -> None:
        n = self.used.pop(off, None)
        if n is None:
            return
        holes = self.free
        i = 0
        while i < len(holes) and holes[i][0] < off:
            i += 1
        holes.insert(i, (off, n))
        # Coalesce with the next, then the previous hole.
        if i + 1 < len(holes) and off + n == holes[i + 1][0]:
            holes[i] = (off, n + holes[i + 1][1])
            del holes[i + 1]
        if i > 0 and holes[i - 1][0] + holes[i - 1][1] == off:
            holes[i - 1] = (holes[i - 1][0], holes[i - 1][1] + holes[i][1])
            del holes[i]


class ChildArena:
    """The segments this process writes. Grows by whole segments as Triton's shm-growth-byte-size; never moves."""

    def __init__(self, prefix: str, default_size: int, growth: int) -> None:
        self._prefix = prefix
        self._default = max(ALIGN, default_size)
        self._growth = max(ALIGN, growth)
        self._segments: list[_Segment] = []
        self._lock = threading.Lock()

    def alloc(self, n: int) -> tuple[int, int, np.ndarray]:
        """A block of ``n`` bytes: (segment id, offset, writable uint8 view)."""
        n = align(max(n, 1))
        with self._lock:
            for seg in self._segments:
                off = seg.alloc(n)
                if off is not None:
                    return seg.id, off, seg.array[off : off + n]
            seg_id = len(self._segments)
            size = self._default if seg_id == 0 else self._growth
            seg = _Segment(seg_id, f"{SHM_DIR}/{self._prefix}c{seg_id}", max(size, align(n)))
            self._segments.append(seg)
            off = seg.alloc(n)
            assert off is not None
            return seg.id, off, seg.array[off : off + n]

    def span(self, seg_id: int) -> tuple[int, int]:
        """(address, size) of a whole segment: what an engine pins once for copies into its blocks."""
        with self._lock:
            array = self._segments[seg_id].array
        return array.ctypes.data, array.nbytes

    def free(self, seg_id: int, off: int) -> None:
        with self._lock:
            if 0 <= seg_id < len(self._segments):
                self._segments[seg_id].release(off)

    def unlink_all(self) -> None:
        for seg in self._segments:
            try:
                os.unlink(seg.path)
            except FileNotFoundError:
                pass


class _Block:
    """Owner of one host block as numpy sees it: every array made from it (and every view of those) keeps it
    alive, so its finalizer runs when the last one dies. (A finalizer on a plain slice would fire too early:
    numpy points views at the array that owns the memory, not at the slice they came from.)"""

    __slots__ = ("__array_interface__", "__weakref__")

    def __init__(self, address: int, size: int) -> None:
        self.__array_interface__ = {"data": (address, False), "shape": (size,), "typestr": "|u1", "version": 3}


class _BlockRef(weakref.ref):
    """Weak reference to a block's owner that remembers where the block is (cheaper than weakref.finalize)."""

    __slots__ = ("seg", "off")


class HostSegments:
    """The host's segments, mapped on first use; blocks handed back when their last view dies."""

    def __init__(self, prefix: str) -> None:
        self._prefix = prefix
        # segment id -> (mapping, base address, size); the ctypes export pins the mapping for the process's life.
        self._maps: dict[int, tuple[mmap.mmap, int, int]] = {}
        # Re-entrant: a garbage collection run inside drain() may fire a block's callback on the same thread.
        self._lock = threading.RLock()
        self._frees: list[list[int]] = []
        self._live: set[_BlockRef] = set()

    def _segment(self, seg_id: int) -> tuple[mmap.mmap, int, int]:
        entry = self._maps.get(seg_id)
        if entry is None:
            with self._lock:
                entry = self._maps.get(seg_id)
                if entry is None:
                    mm = _map(f"{SHM_DIR}/{self._prefix}h{seg_id}", None, create=False)
                    entry = (mm, ctypes.addressof(ctypes.c_char.from_buffer(mm)), len(mm))
                    self._maps[seg_id] = entry
        return entry

    def block(self, seg_id: int, off: int, size: int) -> np.ndarray:
        """A writable uint8 view of a host block; the host gets the block back once no view of it is alive."""
        _, address, seg_size = self._segment(seg_id)
        if off < 0 or size < 0 or off + size > seg_size:
            raise ValueError(f"host block [{off}, {off + size}) is outside segment {seg_id} ({seg_size} bytes)")
        owner = _Block(address + off, size)
        ref = _BlockRef(owner, self._release)
        ref.seg = seg_id
        ref.off = off
        self._live.add(ref)
        return np.asarray(owner)

    def _release(self, ref: _BlockRef) -> None:
        with self._lock:
            self._live.discard(ref)
            self._frees.append([ref.seg, ref.off])

    def drain(self) -> list[list[int]]:
        """Blocks to hand back to the host, piggybacked on the next message sent."""
        if not self._frees:
            return []
        with self._lock:
            out, self._frees = self._frees, []
        return out


_LEN = struct.Struct("<I")


def encode_bytes_elements(flat) -> bytes:
    """Triton's BYTES wire form: per element a 4-byte little-endian length, then the bytes (str as UTF-8)."""
    parts = []
    for e in flat:
        if isinstance(e, (bytes, bytearray, memoryview)):
            b = bytes(e)
        elif isinstance(e, str):
            b = e.encode("utf-8")
        elif isinstance(e, np.ndarray):
            b = e.tobytes()
        else:
            b = str(e).encode("utf-8")
        parts.append(_LEN.pack(len(b)))
        parts.append(b)
    return b"".join(parts)


def decode_bytes_elements(buf: np.ndarray, count: int) -> np.ndarray:
    """Triton's BYTES wire form -> an object array of ``bytes`` (copies: the block can go back at once)."""
    mv = memoryview(buf)
    out = np.empty(count, dtype=np.object_)
    off = 0
    total = len(mv)
    for i in range(count):
        if off + 4 > total:
            raise ValueError(f"BYTES element {i}: length prefix past the end of the data")
        (n,) = _LEN.unpack_from(mv, off)
        off += 4
        if off + n > total:
            raise ValueError(f"BYTES element {i}: {n} bytes past the end of the data")
        out[i] = bytes(mv[off : off + n])
        off += n
    return out
