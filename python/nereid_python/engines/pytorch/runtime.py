"""What the instances of one process share: the torch module, the process-wide settings, and the loaded
TorchScript modules (one per file and device when ``ENABLE_WEIGHT_SHARING`` is on).

Process-wide (Triton sets them for the whole server too): ``INTRA_OP_THREAD_COUNT`` / ``INTER_OP_THREAD_COUNT``
(torch allows the inter-op pool to be sized once, before any parallel work: the host starts one process per
model version and device, so the first instance sets them), ``ENABLE_JIT_EXECUTOR``, ``ENABLE_JIT_PROFILING``,
``ENABLE_TENSOR_FUSER`` and ``ENABLE_NVFUSER``. ``DISABLE_OPTIMIZED_EXECUTION`` is per thread in torch, so the
instance sets it on its own thread before each run.

Threading: ``apply_settings`` and ``module_for`` are called by each instance's initialize (the stub's first
instance on the main thread, the others on their own threads), under ``_lock``.
"""

from __future__ import annotations

import importlib
import sys
import threading
import warnings

_lock = threading.Lock()
_applied: dict | None = None
_modules: dict[tuple[str, str], object] = {}


class PyTorchError(RuntimeError):
    """A failure the host reports with this Nereid error code (the stub puts ``code`` on the wire)."""

    def __init__(self, message: str, code: str = "INTERNAL") -> None:
        super().__init__(message)
        self.code = code


def install_hint() -> str:
    return (
        f"PyTorch is not importable by {sys.executable}: run 'bash scripts/setup-python.sh --torch' (installs torch "
        "from PyPI into the repository .venv), or pip install torch into that interpreter and point "
        "--backend-config=pytorch,python-executable=PATH at it"
    )


def import_torch():
    try:
        return importlib.import_module("torch")
    except ImportError as e:
        raise PyTorchError(f"{install_hint()} ({e})", "UNAVAILABLE") from None
    except (OSError, ValueError) as e:  # a torch wheel whose CUDA libraries are missing fails here
        raise PyTorchError(f"torch is installed in {sys.executable} but cannot be imported: {e}", "UNAVAILABLE") from None


def apply_settings(torch, o: dict, warn) -> dict:
    """Applies the process-wide options once; later instances must ask for the same (one model per process).
    Returns what torch reports now, read back, for the instance's log line."""
    global _applied
    with _lock:
        wanted = {k: o.get(k) for k in ("intra_op_threads", "inter_op_threads", "jit_executor", "jit_profiling", "tensor_fuser", "nvfuser")}
        if _applied is None:
            if o.get("intra_op_threads"):
                torch.set_num_threads(int(o["intra_op_threads"]))
            if o.get("inter_op_threads"):
                try:
                    torch.set_num_interop_threads(int(o["inter_op_threads"]))
                except RuntimeError as e:
                    warn(f"INTER_OP_THREAD_COUNT not applied: {e}")
            if o.get("jit_executor") is not None:
                torch._C._jit_set_profiling_executor(bool(o["jit_executor"]))
            if o.get("jit_profiling") is not None:
                torch._C._jit_set_profiling_mode(bool(o["jit_profiling"]))
            if o.get("nvfuser") is not None:
                # torch 2.x removed nvFuser from TorchScript (its switch only warns); Triton ignores
                # ENABLE_TENSOR_FUSER when ENABLE_NVFUSER is given, and so do we.
                warn(f"ENABLE_NVFUSER has no effect: torch {torch.__version__} no longer has nvFuser in TorchScript")
            elif o.get("tensor_fuser") is not None:
                torch._C._jit_set_texpr_fuser_enabled(bool(o["tensor_fuser"]))
            _applied = wanted
        elif _applied != wanted:
            warn(f"process-wide settings {wanted} differ from those already applied in this process {_applied}; the first stay")
        return {
            "intra_op_threads": torch.get_num_threads(),
            "inter_op_threads": torch.get_num_interop_threads(),
            "jit_executor": _current(torch, "_jit_set_profiling_executor"),
            "jit_profiling": _current(torch, "_jit_set_profiling_mode"),
            "tensor_fuser": bool(torch._C._jit_texpr_fuser_enabled()),
        }


def _current(torch, setter: str) -> bool:
    """A switch's value without changing it: set it to anything, read the previous value, put it back."""
    fn = getattr(torch._C, setter)
    old = bool(fn(True))
    fn(old)
    return old


def describe_load_error(path: str, e: BaseException) -> str:
    text = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
    if "constants.pkl" in text or "not a ZIP archive" in text or "central directory" in text or "zip archive" in text:
        return (
            f"'{path}' is not a TorchScript model ({text.split('. This is an internal')[0]}): the pytorch backend "
            "serves what torch.jit.script(model).save(path) or torch.jit.trace(model, example).save(path) writes; "
            "a file from torch.save() (a state_dict or a pickled nn.Module) is not TorchScript"
        )
    return f"cannot load TorchScript model '{path}': {text}"


def load(torch, path: str, device: str, share: bool):
    """The module for an instance: loaded on ``device`` in eval mode; with ``share`` one per file and device for
    the whole process (Triton's ENABLE_WEIGHT_SHARING). Returns (module, shared_with_another_instance)."""
    key = (path, device)
    with _lock:
        if share and key in _modules:
            return _modules[key], True
        try:
            with warnings.catch_warnings():
                # torch 2.x marks torch.jit deprecated in favour of torch.export; TorchScript is what Triton serves.
                warnings.simplefilter("ignore", FutureWarning)
                module = torch.jit.load(path, map_location=device)
        except FileNotFoundError as e:
            raise PyTorchError(f"model file '{path}' does not exist: {e}", "NOT_FOUND") from None
        except (RuntimeError, ValueError, OSError) as e:
            raise PyTorchError(describe_load_error(path, e), "UNAVAILABLE") from None
        module.eval()
        if share:
            _modules[key] = module
        return module, False
