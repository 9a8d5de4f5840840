"""Client CUDA shared memory in this process: the regions the host names in ``exec`` messages (server-unique id,
device, the client's raw 64-byte cudaIpcMemHandle_t), opened here with cudaIpcOpenMemHandle — never copied
through the host (src/backends/runtime/process/device.ts is the host side).

The GPU boundary is ``CudaRuntime``: ``LibCudart`` (ctypes on libcudart) on a GPU machine; tests on machines
without a GPU put a TEST DOUBLE behind it (``set_runtime``, or the environment variable
``NEREID_CUDA_RUNTIME_TEST_DOUBLE`` naming a Python file whose ``make_runtime()`` returns one, for child processes
a test starts).

``Regions`` caches one mapping per handle: a region is opened on first use and closed when the host says the
server closed it (``cuda_close``); a handle registered again under a new region id (the same client allocation)
shares the mapping, which CUDA opens once per process. Process exit unmaps the rest.

Threading: ``Regions`` is used by instance threads (open on first use) and by the channel's reader (close); one
lock guards it. CUDA's current device is per thread, so every call sets it first.
"""

from __future__ import annotations

import base64
import ctypes
import importlib.util
import os
import threading
from typing import Protocol

from .dlpack import KDL_CUDA

#: Environment variable naming the libcudart to load (the server's NEREID_CUDART_LIBRARY, inherited).
CUDART_LIBRARY_ENV = "NEREID_CUDART_LIBRARY"
TEST_DOUBLE_ENV = "NEREID_CUDA_RUNTIME_TEST_DOUBLE"
#: CUDA 13 first (torch's wheels and onnxruntime's CUDA provider), then 12. When torch is imported its libcudart
#: is already loaded, and dlopen of the same soname returns that one.
_SONAMES = ("libcudart.so.13", "libcudart.so.12", "libcudart.so")
_MEMCPY_DEFAULT = 4  # cudaMemcpyDefault: the direction follows from the (unified) addresses
_IPC_LAZY_ENABLE_PEER_ACCESS = 1
HANDLE_BYTES = 64


class CudaRuntime(Protocol):
    """What this process asks of CUDA. Pointers are ints (device addresses)."""

    #: DLPack device type of the memory ``open_ipc_handle`` maps (kDLCUDA; a test double over host memory: kDLCPU).
    dlpack_device_type: int

    def open_ipc_handle(self, device: int, handle: bytes) -> int: ...

    def close_ipc_handle(self, device: int, pointer: int) -> None: ...

    def copy(self, device: int, dst: int, src: int, nbytes: int) -> None:
        """cudaMemcpy with cudaMemcpyDefault: device to device, host to device or device to host."""
        ...

    def synchronize(self, device: int) -> None:
        """Waits for all work on ``device`` (a model's kernels on any stream, before its outputs are copied)."""
        ...


class CudaError(RuntimeError):
    pass


class _IpcHandle(ctypes.Structure):
    # Bytes, not c_char: a c_char array field set from bytes stops at the first NUL (ctypes' strlen), and a
    # handle is full of them — the driver then answers "invalid argument" (found on the H200).
    _fields_ = [("reserved", ctypes.c_ubyte * HANDLE_BYTES)]

    @classmethod
    def of(cls, handle: bytes) -> "_IpcHandle":
        if len(handle) != HANDLE_BYTES:
            raise CudaError(f"a cudaIpcMemHandle_t has {HANDLE_BYTES} bytes, got {len(handle)}")
        return cls.from_buffer_copy(handle)


class LibCudart:
    """``CudaRuntime`` over libcudart with ctypes. Every call is synchronous on the calling thread."""

    dlpack_device_type = KDL_CUDA

    def __init__(self) -> None:
        override = os.environ.get(CUDART_LIBRARY_ENV)
        names = [override] if override else list(_SONAMES)
        errors = []
        lib = None
        for name in names:
            try:
                lib = ctypes.CDLL(name)
                break
            except OSError as e:
                errors.append(f"{name}: {e}")
        if lib is None:
            raise CudaError(f"no CUDA runtime library could be loaded ({'; '.join(errors)})")
        self.library = name
        self._set = lib.cudaSetDevice
        self._set.argtypes = [ctypes.c_int]
        self._open = lib.cudaIpcOpenMemHandle
        self._open.argtypes = [ctypes.POINTER(ctypes.c_void_p), _IpcHandle, ctypes.c_uint]
        self._close = lib.cudaIpcCloseMemHandle
        self._close.argtypes = [ctypes.c_void_p]
        self._memcpy = lib.cudaMemcpy
        self._memcpy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
        self._sync = lib.cudaDeviceSynchronize
        self._sync.argtypes = []
        self._text = lib.cudaGetErrorString
        self._text.restype = ctypes.c_char_p
        self._text.argtypes = [ctypes.c_int]

    def _check(self, call: str, code: int) -> None:
        if code != 0:
            raise CudaError(f"{call} failed: {self._text(code).decode(errors='replace')} (CUDA error {code})")

    def open_ipc_handle(self, device: int, handle: bytes) -> int:
        self._check(f"cudaSetDevice({device})", self._set(device))
        out = ctypes.c_void_p()
        self._check("cudaIpcOpenMemHandle", self._open(ctypes.byref(out), _IpcHandle.of(handle), _IPC_LAZY_ENABLE_PEER_ACCESS))
        return int(out.value or 0)

    def close_ipc_handle(self, device: int, pointer: int) -> None:
        self._check(f"cudaSetDevice({device})", self._set(device))
        self._check("cudaIpcCloseMemHandle", self._close(pointer))

    def copy(self, device: int, dst: int, src: int, nbytes: int) -> None:
        if nbytes == 0:
            return
        self._check(f"cudaSetDevice({device})", self._set(device))
        self._check("cudaMemcpy", self._memcpy(dst, src, nbytes, _MEMCPY_DEFAULT))

    def synchronize(self, device: int) -> None:
        self._check(f"cudaSetDevice({device})", self._set(device))
        self._check("cudaDeviceSynchronize", self._sync())


_runtime: CudaRuntime | None = None
_runtime_lock = threading.Lock()


def set_runtime(rt: CudaRuntime | None) -> None:
    """Puts a runtime behind the seam (tests: a test double); None loads the default on next use."""
    global _runtime
    with _runtime_lock:
        _runtime = rt


def runtime() -> CudaRuntime:
    """The process's CUDA runtime, loaded on first use (a process that never sees client CUDA memory never loads it)."""
    global _runtime
    with _runtime_lock:
        if _runtime is None:
            path = os.environ.get(TEST_DOUBLE_ENV)
            if path:
                spec = importlib.util.spec_from_file_location("_nereid_cuda_test_double", path)
                assert spec is not None and spec.loader is not None
                module = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(module)
                _runtime = module.make_runtime()
            else:
                _runtime = LibCudart()
        return _runtime


class Slot:
    """A span of client device memory in this process: ``pointer`` (opened base + offset) on ``device``, and the
    DLPack device type of tensors over it (the runtime's)."""

    __slots__ = ("device", "pointer", "nbytes", "dlpack_type")

    def __init__(self, device: int, pointer: int, nbytes: int, dlpack_type: int) -> None:
        self.device = device
        self.pointer = pointer
        self.nbytes = nbytes
        self.dlpack_type = dlpack_type


class Regions:
    """Client regions this process was told about and the mappings it opened (one per distinct handle)."""

    def __init__(self, rt=runtime) -> None:
        self._rt = rt
        self._lock = threading.Lock()
        #: region id -> (device, handle bytes)
        self._known: dict[int, tuple[int, bytes]] = {}
        #: (device, handle bytes) -> [base pointer, region ids using it]
        self._open: dict[tuple[int, bytes], list] = {}
        self.opened = 0
        self.closed = 0

    def learn(self, table) -> None:
        """An ``exec``'s ``cuda`` table: ``[region, device, base64 handle]`` rows."""
        with self._lock:
            for region, device, handle in table:
                if region not in self._known:
                    raw = base64.b64decode(handle)
                    if len(raw) != HANDLE_BYTES:
                        raise CudaError(f"region {region}: a CUDA IPC handle is {HANDLE_BYTES} bytes, got {len(raw)}")
                    self._known[region] = (int(device), raw)

    def slot(self, region: int, offset: int, nbytes: int) -> Slot:
        """The span at ``offset`` in ``region``, opening the region's handle on first use."""
        with self._lock:
            known = self._known.get(region)
            if known is None:
                raise CudaError(f"client CUDA region {region} was not named to this process")
            rt = self._rt()
            entry = self._open.get(known)
            if entry is None:
                base = rt.open_ipc_handle(known[0], known[1])
                self.opened += 1
                entry = self._open[known] = [base, set()]
            entry[1].add(region)
            return Slot(known[0], entry[0] + offset, nbytes, rt.dlpack_device_type)

    def close(self, regions) -> None:
        """The server closed these regions: their mapping is closed once no other region id shares it."""
        failures = []
        with self._lock:
            for region in regions:
                known = self._known.pop(region, None)
                entry = self._open.get(known) if known is not None else None
                if entry is None:
                    continue
                entry[1].discard(region)
                if not entry[1]:
                    del self._open[known]
                    try:
                        self._rt().close_ipc_handle(known[0], entry[0])
                        self.closed += 1
                    except Exception as e:  # noqa: BLE001 - a broken context: the mapping dies with the process
                        failures.append(str(e))
        if failures:
            raise CudaError("; ".join(failures))

    @property
    def open_count(self) -> int:
        with self._lock:
            return len(self._open)


#: The process's regions (the stub's reader closes, instance threads open).
REGIONS = Regions()
