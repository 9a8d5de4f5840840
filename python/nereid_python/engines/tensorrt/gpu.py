"""Checked CUDA runtime calls through ``cuda-bindings`` (``cuda.bindings.runtime``). Named ``gpu`` and not ``cuda``:
the stub puts this folder first on sys.path (it loads model.py from here), where a ``cuda.py`` would hide the package.

Every call returns ``(error, value...)`` there; here a failure raises ``CudaError`` naming the call and CUDA's own
message. Also: pinning the transport's shared-memory segments (``cudaHostRegister``, once per segment, so copies
from and to them are DMA without a staging copy).

Threading: CUDA's current device is per thread, so every thread that works for an instance calls ``set_device``
first (instances of one process share the process's GPU). ``HostPinning`` takes a lock.
"""

from __future__ import annotations

import threading

try:
    from cuda.bindings import runtime as rt
except ImportError:  # older cuda-python
    try:
        from cuda import cudart as rt  # type: ignore[no-redef]
    except ImportError:
        rt = None  # type: ignore[assignment]


class CudaError(RuntimeError):
    pass


def available() -> str | None:
    """None when the CUDA runtime bindings import, else what to install."""
    if rt is None:
        return "the CUDA runtime bindings are not installed: pip install cuda-bindings (NVIDIA's cuda-python)"
    return None


def _require():
    if rt is None:
        raise CudaError(available())
    return rt


def _message(err) -> str:
    r = _require()
    try:
        _, name = r.cudaGetErrorName(err)
        _, text = r.cudaGetErrorString(err)
        return f"{name.decode() if isinstance(name, bytes) else name}: {text.decode() if isinstance(text, bytes) else text}"
    except Exception:  # noqa: BLE001 - the error itself is what matters
        return str(err)


def check(result, call: str):
    """``(err, *values)`` -> the value(s); raises CudaError for anything but cudaSuccess."""
    r = _require()
    if isinstance(result, tuple):
        err, rest = result[0], result[1:]
    else:
        err, rest = result, ()
    if err != r.cudaError_t.cudaSuccess:
        raise CudaError(f"{call} failed: {_message(err)}")
    if len(rest) == 0:
        return None
    return rest[0] if len(rest) == 1 else rest


def _driver_present() -> bool:
    import ctypes

    try:
        ctypes.CDLL("libcuda.so.1")
        return True
    except OSError:
        return False


def device_count() -> int:
    r = _require()
    result = r.cudaGetDeviceCount()
    err = result[0] if isinstance(result, tuple) else result
    # CUDA says "driver version is insufficient" also where there is no driver at all: say what is true.
    if err == r.cudaError_t.cudaErrorInsufficientDriver and not _driver_present():
        raise CudaError("no NVIDIA driver on this machine (libcuda.so.1 is not installed): there is no usable GPU here")
    return int(check(result, "cudaGetDeviceCount"))


def set_device(device: int) -> None:
    check(_require().cudaSetDevice(device), f"cudaSetDevice({device})")


def device_name(device: int) -> str:
    props = check(_require().cudaGetDeviceProperties(device), f"cudaGetDeviceProperties({device})")
    name = props.name
    if isinstance(name, bytes):
        name = name.split(b"\0", 1)[0].decode(errors="replace")
    return f"{name} (compute capability {props.major}.{props.minor})"


def mem_get_info() -> tuple[int, int]:
    free, total = check(_require().cudaMemGetInfo(), "cudaMemGetInfo")
    return int(free), int(total)


def stream_create():
    r = _require()
    return check(r.cudaStreamCreateWithFlags(r.cudaStreamNonBlocking), "cudaStreamCreateWithFlags")


def stream_destroy(stream) -> None:
    check(_require().cudaStreamDestroy(stream), "cudaStreamDestroy")


def stream_sync(stream) -> None:
    check(_require().cudaStreamSynchronize(stream), "cudaStreamSynchronize")


def event_create(blocking_sync: bool):
    """An event without timing; ``blocking_sync``: a waiting thread sleeps instead of spinning."""
    r = _require()
    flags = r.cudaEventDisableTiming | (r.cudaEventBlockingSync if blocking_sync else 0)
    return check(r.cudaEventCreateWithFlags(flags), "cudaEventCreateWithFlags")


def event_destroy(event) -> None:
    check(_require().cudaEventDestroy(event), "cudaEventDestroy")


def event_record(event, stream) -> None:
    check(_require().cudaEventRecord(event, stream), "cudaEventRecord")


def event_sync(event) -> None:
    check(_require().cudaEventSynchronize(event), "cudaEventSynchronize")


def event_done(event) -> bool:
    r = _require()
    err = r.cudaEventQuery(event)
    err = err[0] if isinstance(err, tuple) else err
    if err == r.cudaError_t.cudaSuccess:
        return True
    if err == r.cudaError_t.cudaErrorNotReady:
        return False
    raise CudaError(f"cudaEventQuery failed: {_message(err)}")


def stream_wait(stream, event) -> None:
    check(_require().cudaStreamWaitEvent(stream, event, 0), "cudaStreamWaitEvent")


def malloc(nbytes: int) -> int:
    return int(check(_require().cudaMalloc(max(1, nbytes)), f"cudaMalloc({nbytes})"))


def free(ptr: int) -> None:
    check(_require().cudaFree(ptr), "cudaFree")


def malloc_host(nbytes: int) -> int:
    return int(check(_require().cudaMallocHost(max(1, nbytes)), f"cudaMallocHost({nbytes})"))


def free_host(ptr: int) -> None:
    check(_require().cudaFreeHost(ptr), "cudaFreeHost")


def copy_htod(dst: int, src: int, nbytes: int, stream) -> None:
    r = _require()
    check(r.cudaMemcpyAsync(dst, src, nbytes, r.cudaMemcpyKind.cudaMemcpyHostToDevice, stream), "cudaMemcpyAsync(H2D)")


def copy_dtoh(dst: int, src: int, nbytes: int, stream) -> None:
    r = _require()
    check(r.cudaMemcpyAsync(dst, src, nbytes, r.cudaMemcpyKind.cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync(D2H)")


def copy_dtod(dst: int, src: int, nbytes: int, stream) -> None:
    r = _require()
    check(r.cudaMemcpyAsync(dst, src, nbytes, r.cudaMemcpyKind.cudaMemcpyDeviceToDevice, stream), "cudaMemcpyAsync(D2D)")


def begin_capture(stream) -> None:
    r = _require()
    check(
        r.cudaStreamBeginCapture(stream, r.cudaStreamCaptureMode.cudaStreamCaptureModeThreadLocal),
        "cudaStreamBeginCapture",
    )


def end_capture(stream):
    return check(_require().cudaStreamEndCapture(stream), "cudaStreamEndCapture")


def graph_instantiate(graph):
    return check(_require().cudaGraphInstantiate(graph, 0), "cudaGraphInstantiate")


def graph_launch(graph_exec, stream) -> None:
    check(_require().cudaGraphLaunch(graph_exec, stream), "cudaGraphLaunch")


def graph_destroy(graph, graph_exec) -> None:
    r = _require()
    if graph_exec is not None:
        check(r.cudaGraphExecDestroy(graph_exec), "cudaGraphExecDestroy")
    if graph is not None:
        check(r.cudaGraphDestroy(graph), "cudaGraphDestroy")


class HostPinning:
    """Registers whole shared-memory segments with CUDA (page-locked, so async copies are true DMA), once each.

    A segment is never unmapped while the process lives (the transport keeps its mappings), so registrations are
    only undone at process exit. A registration that fails (a container's locked-memory limit) is remembered and
    the copies still work, from pageable memory (slower, synchronous to the host)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._ranges: list[tuple[int, int]] = []
        self._failed: set[int] = set()
        self.warnings: list[str] = []

    def ensure(self, base: int, size: int) -> bool:
        with self._lock:
            for b, s in self._ranges:
                if b == base:
                    return True
            if base in self._failed:
                return False
            r = _require()
            try:
                check(r.cudaHostRegister(base, size, r.cudaHostRegisterPortable), "cudaHostRegister")
            except CudaError as e:
                self._failed.add(base)
                self.warnings.append(f"cannot pin a shared-memory segment of {size} bytes ({e}); copies go through pageable memory")
                return False
            self._ranges.append((base, size))
            return True

    def count(self) -> int:
        with self._lock:
            return len(self._ranges)
