"""What the instances of one process share: TensorRT's module, one runtime and one deserialized engine (one
process per GPU, so one engine per GPU as Triton shares it), the engine's facts, the pinned shared-memory
segments, and the DEVICE_BLOCKING lock.

Threading: ``shared()`` is called by each instance's initialize (the stub's first instance runs on the main thread,
the others on their own threads) and builds the state once under a lock.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

from . import facts as facts_mod, gpu as cuda, loader, trace


@dataclass
class Shared:
    trt: object
    flavor: str
    logger: object
    runtime: object
    engine: object
    facts: dict
    plan: str
    device: int
    pinning: cuda.HostPinning = field(default_factory=cuda.HostPinning)
    #: Held around a batch's GPU work when the execution policy is DEVICE_BLOCKING (Triton's default): the
    #: instances of a GPU then run one batch at a time instead of contending for it.
    device_lock: threading.Lock = field(default_factory=threading.Lock)


_lock = threading.Lock()
_shared: Shared | None = None


def _log(severity: str, msg: str) -> None:
    try:
        from nereid_python.api import Logger

        if severity in ("ERROR", "INTERNAL_ERROR"):
            Logger.log_error(f"[TensorRT] {msg}")
        elif severity == "WARNING":
            Logger.log_warn(f"[TensorRT] {msg}")
        elif severity == "INFO":
            Logger.log_verbose(f"[TensorRT] {msg}")
    except Exception:  # noqa: BLE001 - no channel (inspect process): TensorRT's messages still end up in errors
        pass


def open_engine(plan: str, device: int, options: dict, forward=_log) -> Shared:
    """Imports TensorRT, loads plugins, selects the GPU and deserializes the plan (no caching)."""
    trt, flavor = loader.import_tensorrt(bool(options.get("version_compatible")))
    why = cuda.available()
    if why is not None:
        raise loader.TensorRTError(why, "UNAVAILABLE")
    loader.load_plugins(list(options.get("plugins") or []))
    trace.record("plugins", loaded=list(options.get("plugins") or []), t=trace.now())
    try:
        count = cuda.device_count()
    except cuda.CudaError as e:
        raise loader.TensorRTError(f"no CUDA GPU is usable by this process: {e}", "UNAVAILABLE") from None
    if device < 0 or device >= count:
        raise loader.TensorRTError(f"GPU {device} does not exist: this process sees {count} GPU(s)", "INVALID_ARG")
    cuda.set_device(device)
    logger = loader.make_logger(trt, forward)
    if flavor == "full":
        loader.init_builtin_plugins(trt, logger)
    runtime = loader.create_runtime(trt, flavor, logger, bool(options.get("version_compatible")))
    engine = loader.deserialize(trt, runtime, logger, plan)
    trace.record("engine", plan=plan, t=trace.now(), version=getattr(trt, "__version__", "?"))
    f = facts_mod.engine_facts(trt, engine)
    f["flavor"] = flavor
    return Shared(trt, flavor, logger, runtime, engine, f, plan, device)


def shared(plan: str, device: int, options: dict) -> Shared:
    global _shared
    with _lock:
        if _shared is None:
            _shared = open_engine(plan, device, options)
        elif _shared.plan != plan or _shared.device != device:
            raise loader.TensorRTError(
                f"this process serves plan '{_shared.plan}' on GPU {_shared.device}; an instance for '{plan}' on GPU {device} needs its own process"
            )
        return _shared
