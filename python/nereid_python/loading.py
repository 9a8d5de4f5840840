"""The model loading API of ``triton_python_backend_utils``: ``load_model``, ``unload_model``, ``is_model_ready``.

Each call is one ``mctl`` message to the host, which runs it as the server's own repository API (explicit model
control mode, the code-in-load-requests rule and the restricted APIs apply there) and answers with a ``bls_resp``
for the same call id. A failure raises ``TritonModelException`` with the server's message, as Triton's binding
raises its PythonBackendException. Override files travel as UINT8 tensors in the stub's shared memory, not inside
the control frame.
"""

from __future__ import annotations

import numpy as np

from .errors import TritonModelException
from .runtime import STATE, round_trip
from .tensor import Tensor, write_tensors

#: Phases of the instance code running on a thread (``STATE.local.phase``) in which Triton refuses this API.
_REFUSED_PHASES = {"auto_complete": "auto_complete_config", "finalize": "finalize"}


def _exception(message: str) -> TritonModelException:
    return TritonModelException(message)


def _check_phase(api: str) -> None:
    phase = getattr(STATE.local, "phase", None)
    if phase in _REFUSED_PHASES:
        raise _exception(
            f"pb_utils.{api} is not supported during {_REFUSED_PHASES[phase]} (as in Triton): call it from "
            "initialize or execute"
        )


def _name(api: str, value, what: str = "model_name") -> str:
    if isinstance(value, bytes):
        value = value.decode("utf-8")
    if not isinstance(value, str) or value == "":
        raise _exception(f"pb_utils.{api}: {what} must be a non-empty str, got {value!r}")
    return value


def _control(api: str, msg: dict) -> dict:
    """One ``mctl`` round trip; the answer's parameters, or the server's error raised."""
    msg["op"] = "mctl"
    msg["api"] = api
    if getattr(STATE.local, "phase", None) == "initialize":
        msg["init"] = True
    answer = round_trip(msg)
    if answer.get("e"):
        raise _exception(answer["e"].get("m", f"pb_utils.{api} failed"))
    return answer.get("p") or {}


def _file_tensors(files) -> list:
    if files is None:
        return []
    if not isinstance(files, dict):
        raise _exception(f"pb_utils.load_model: files must be a dict of 'file:<path>' -> bytes, got {type(files).__name__}")
    tensors = []
    for key, data in files.items():
        if not isinstance(key, str) or not key.startswith("file:") or len(key) == len("file:"):
            raise _exception(f"pb_utils.load_model: files key {key!r} must be 'file:<version>/<path>'")
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise _exception(f"pb_utils.load_model: files[{key!r}] must be bytes, got {type(data).__name__}")
        tensors.append(Tensor(key[len("file:") :], np.frombuffer(bytes(data), dtype=np.uint8)))
    return tensors


def load_model(model_name, config="", files=None) -> None:
    """Loads (or reloads) ``model_name``, optionally with a JSON config override and ``file:`` override files."""
    _check_phase("load_model")
    name = _name("load_model", model_name)
    if isinstance(config, bytes):
        config = config.decode("utf-8")
    if config is None or not isinstance(config, str):
        raise _exception(f"pb_utils.load_model: config must be the JSON text of a model config, got {type(config).__name__}")
    tensors = _file_tensors(files)
    msg: dict = {"model": name}
    if config:
        msg["cfg"] = config
    if tensors:
        msg["blk"], msg["i"] = write_tensors(tensors)
    _control("load_model", msg)


def unload_model(model_name, unload_dependents: bool = False) -> None:
    """Unloads ``model_name`` (and, with ``unload_dependents``, the ensembles using it)."""
    _check_phase("unload_model")
    name = _name("unload_model", model_name)
    _control("unload_model", {"model": name, "dep": bool(unload_dependents)})


def is_model_ready(model_name, model_version="") -> bool:
    """Whether ``model_name`` (version ``model_version``, or the server's choice when empty) is ready."""
    _check_phase("is_model_ready")
    name = _name("is_model_ready", model_name)
    if isinstance(model_version, int) and not isinstance(model_version, bool):
        model_version = str(model_version)
    if not isinstance(model_version, str):
        raise _exception(f"pb_utils.is_model_ready: model_version must be a str, got {type(model_version).__name__}")
    return bool(_control("is_model_ready", {"model": name, "ver": model_version}).get("ready", False))
