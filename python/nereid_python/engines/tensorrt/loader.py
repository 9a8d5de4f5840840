"""Importing TensorRT, loading plugin libraries, creating a runtime and deserializing a plan, with TensorRT's own
messages in every error.

Which runtime (Triton's ``version-compatible`` backend option):
- off: the full runtime (``import tensorrt``). Where only the lean runtime is installed, that is a load error that
  says so (a lean runtime can only run version-compatible plans).
- on: the full runtime with ``engine_host_code_allowed`` (a version-compatible plan carries its own lean runtime,
  host code that TensorRT runs: trusted plans only); where only ``tensorrt_lean`` is installed, the lean runtime.

A runtime whose creation logged an error (no usable GPU or driver) is never released: TensorRT's Python runtime
object wraps a null pointer then, and its destructor crashes the process (seen with 11.2 on a machine without a
GPU). It is kept in ``_UNRELEASABLE`` for the life of the process.
"""

from __future__ import annotations

import ctypes
import importlib
import os
import re
import sys
import threading

_UNRELEASABLE: list = []
_plugins_lock = threading.Lock()
_loaded_plugins: dict[str, ctypes.CDLL] = {}


class TensorRTError(RuntimeError):
    """A TensorRT failure; ``code`` is the Nereid error code the host maps it to."""

    def __init__(self, message: str, code: str = "INTERNAL") -> None:
        super().__init__(message)
        self.code = code


def install_hint() -> str:
    return (
        f"TensorRT's Python package is not importable by {sys.executable}: run 'nereid tensorrt setup' "
        "(it installs NVIDIA's tensorrt-cu13 wheels matched to the plan, or the runtime from Maven Central where "
        "NVIDIA's index is unreachable), or pip install tensorrt-cu13 into that interpreter"
    )


def import_tensorrt(version_compatible: bool):
    """(module, flavor): flavor 'full' or 'lean'. Raises TensorRTError UNAVAILABLE naming what to install."""
    errors = []
    try:
        return importlib.import_module("tensorrt"), "full"
    except ImportError as e:
        errors.append(f"import tensorrt: {e}")
    try:
        lean = importlib.import_module("tensorrt_lean")
    except ImportError as e:
        errors.append(f"import tensorrt_lean: {e}")
        lean = None
    if lean is not None:
        if version_compatible:
            return lean, "lean"
        raise TensorRTError(
            "only TensorRT's lean runtime (tensorrt_lean) is installed, and it runs version-compatible plans only: "
            "set --backend-config=tensorrt,version-compatible=true for a plan built with --version-compatible, "
            "or install the full runtime ('nereid tensorrt setup')",
            "UNAVAILABLE",
        )
    raise TensorRTError(f"{install_hint()} ({'; '.join(errors)})", "UNAVAILABLE")


def load_plugins(paths: list[str]) -> None:
    """Loads plugin libraries (RTLD_GLOBAL, so TensorRT's registry sees their creators) before any engine.
    A library that cannot be loaded is a load error naming it and the loader's reason."""
    with _plugins_lock:
        for p in paths:
            if p in _loaded_plugins:
                continue
            if not os.path.exists(p):
                raise TensorRTError(f"TensorRT plugin library '{p}' does not exist (--backend-config=tensorrt,plugins=...)", "INVALID_ARG")
            try:
                _loaded_plugins[p] = ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
            except OSError as e:
                raise TensorRTError(f"cannot load TensorRT plugin library '{p}': {e}", "INVALID_ARG") from None


def make_logger(trt, forward):
    """A TensorRT logger that keeps the messages of the current operation (``take()``) and forwards each one to
    ``forward(severity_name, message)``. Shared by the threads of a process: ``take`` returns what was logged
    since the last ``take`` on any thread, good enough for the messages of a failed call."""

    class _Logger(trt.ILogger):
        def __init__(self) -> None:
            trt.ILogger.__init__(self)
            self._lock = threading.Lock()
            self._recent: list[tuple[str, str]] = []

        def log(self, severity, msg) -> None:  # noqa: A003 - TensorRT's name
            name = getattr(severity, "name", str(severity)).split(".")[-1]
            with self._lock:
                self._recent.append((name, str(msg)))
                if len(self._recent) > 64:
                    del self._recent[:32]
            try:
                forward(name, str(msg))
            except Exception:  # noqa: BLE001 - logging must never fail a TensorRT call
                pass

        def take(self, severities=("ERROR", "INTERNAL_ERROR")) -> list[str]:
            with self._lock:
                out = [m for s, m in self._recent if s in severities]
                self._recent.clear()
            return out

    return _Logger()


def create_runtime(trt, flavor: str, logger, version_compatible: bool):
    logger.take()
    runtime = trt.Runtime(logger)
    errors = logger.take()
    if errors:
        _UNRELEASABLE.append(runtime)
        raise TensorRTError(f"TensorRT {trt.__version__} could not create its runtime: {' | '.join(errors)}", "UNAVAILABLE")
    if version_compatible and hasattr(runtime, "engine_host_code_allowed"):
        runtime.engine_host_code_allowed = True
    return runtime


def create_builder(trt, logger):
    """(builder, []) or (None, TensorRT's logged errors): TensorRT's factory returns null where the builder cannot
    work on this GPU (its builder resource is missing), which pybind11 turns into an exception or None."""
    logger.take()
    try:
        builder = trt.Builder(logger)
    except Exception:  # noqa: BLE001 - pybind11 raises when TensorRT's factory returns null
        builder = None
    return (builder, []) if builder is not None else (None, logger.take())


def init_builtin_plugins(trt, logger) -> None:
    """Registers the plugins that ship with TensorRT (libnvinfer_plugin), as Triton does once per process."""
    fn = getattr(trt, "init_libnvinfer_plugins", None)
    if fn is not None:
        try:
            fn(logger, "")
        except Exception:  # noqa: BLE001 - a missing libnvinfer_plugin only matters to plans that use its plugins
            pass


# TensorRT's serialization tags, as its refusals name them ("Current Version: 243, Serialized Engine Version: 239"),
# for the releases whose plans were seen: TensorRT prints only the tag, users know the release.
_SERIALIZATION_TAGS = {239: "10.6", 243: "11.2"}
_TAG_MISMATCH = re.compile(r"Version tag does not match.*?Current Version:\s*(\d+),\s*Serialized Engine Version:\s*(\d+)", re.S)


def version_mismatch(running: str, detail: str) -> str | None:
    """What to tell a user whose plan TensorRT refused because another TensorRT version built it; None otherwise."""
    m = _TAG_MISMATCH.search(detail)
    if m is None:
        return None
    ours, theirs = int(m.group(1)), int(m.group(2))
    built = f"TensorRT {_SERIALIZATION_TAGS[theirs]}" if theirs in _SERIALIZATION_TAGS else f"a TensorRT whose serialization tag is {theirs}"
    return (
        f"plan PLAN was built by {built}, and this is TensorRT {running} (tag {ours}): plans do not cross TensorRT versions. "
        "Rebuild it from its ONNX model with this TensorRT ('nereid convert --onnx MODEL.onnx --saveEngine ...'), "
        f"or serve it with the TensorRT that built it ('nereid tensorrt setup --version {_SERIALIZATION_TAGS.get(theirs, 'X.Y')}')"
    )


def deserialize(trt, runtime, logger, path: str):
    """The ICudaEngine of a plan file. Errors carry TensorRT's own messages (a corrupt, truncated or foreign plan,
    a plan built by another TensorRT version or for another GPU)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise TensorRTError(f"cannot read plan '{path}': {e}", "NOT_FOUND") from None
    if len(data) == 0:
        raise TensorRTError(f"plan '{path}' is empty", "INVALID_ARG")
    logger.take()
    engine = runtime.deserialize_cuda_engine(data)
    errors = logger.take()
    if engine is None:
        detail = " | ".join(errors) if errors else "TensorRT returned no engine and logged no reason"
        foreign = version_mismatch(trt.__version__, detail)
        if foreign is not None:
            raise TensorRTError(f"{foreign.replace('PLAN', repr(path))} (TensorRT said: {detail})", "INVALID_ARG")
        raise TensorRTError(
            f"TensorRT {trt.__version__} cannot deserialize plan '{path}' ({len(data)} bytes): {detail}", "INVALID_ARG"
        )
    return engine
