"""The rest of the ``triton_python_backend_utils`` surface Triton documents (issue 27 item 6): small types and
tables its examples reach, and the refusal of a name Nereid does not provide.

docs/python-backend.md has the table of every API: supported, or refused with an error naming it.
"""

from __future__ import annotations

import json

from . import datatypes
from .constants import TRITONSERVER_MEMORY_CPU, TRITONSERVER_MEMORY_GPU
from .errors import TritonModelException

#: Config type name -> numpy type, as Triton's table (``TYPE_STRING`` -> ``np.object_``; BF16 as datatypes.py has it).
TRITON_STRING_TO_NUMPY = {
    f"TYPE_{name}": datatypes.config_to_numpy(f"TYPE_{name}") for name in datatypes.TO_NUMPY if name != "BYTES"
}
TRITON_STRING_TO_NUMPY["TYPE_STRING"] = datatypes.config_to_numpy("TYPE_STRING")


class PreferredMemory:
    """Where a BLS call would like its outputs (``InferenceRequest(preferred_memory=...)``). Nereid accepts it and
    answers BLS calls in CPU memory: a GPU preference is a hint, as in Triton, which may also answer elsewhere."""

    def __init__(self, preferred_memory_type, preferred_device_id: int = 0) -> None:
        if preferred_memory_type not in (TRITONSERVER_MEMORY_CPU, TRITONSERVER_MEMORY_GPU):
            raise TritonModelException(
                "PreferredMemory: preferred_memory_type must be TRITONSERVER_MEMORY_CPU or TRITONSERVER_MEMORY_GPU, "
                f"got {preferred_memory_type!r}"
            )
        if not isinstance(preferred_device_id, int) or preferred_device_id < 0:
            raise TritonModelException(f"PreferredMemory: preferred_device_id must be an int >= 0, got {preferred_device_id!r}")
        self.preferred_memory_type = preferred_memory_type
        self.preferred_device_id = preferred_device_id


class InferenceTrace:
    """``request.trace()``: the request's trace context. With ``--trace-config mode=opentelemetry`` a traced request
    carries its W3C context, and a BLS call made with ``InferenceRequest(..., trace=request.trace())`` is traced as a
    child of it; ``get_context()`` is then that context as JSON (``{"traceparent": ...}``), else None — as Triton
    answers for a request that is not traced with OpenTelemetry."""

    def __init__(self, ctx: dict | None = None) -> None:
        self._ctx = ctx if isinstance(ctx, dict) and isinstance(ctx.get("tp"), str) else None

    def get_context(self):
        if self._ctx is None:
            return None
        out = {"traceparent": self._ctx["tp"]}
        if isinstance(self._ctx.get("ts"), str):
            out["tracestate"] = self._ctx["ts"]
        return json.dumps(out)


#: Names of Triton's pb_utils that Nereid refuses, with why (the module's __getattr__ raises it).
REFUSED = {
    "shared_memory": "it is the stub's internal shared-memory manager in Triton, not a model API",
    "SharedMemory": "it is the stub's internal shared-memory manager in Triton, not a model API",
    "async_event_future_done_callback": "it is an internal callback of Triton's stub, not a model API",
}


class UnsupportedAPIError(AttributeError):
    """A pb_utils name Nereid does not provide. An AttributeError, so ``hasattr`` and ``getattr(..., default)``
    keep working, with a message that names the API instead of Python's bare one."""


def missing(name: str):
    """The error for ``pb_utils.<name>`` when Nereid has no such name."""
    why = REFUSED.get(name)
    if why is not None:
        return UnsupportedAPIError(f"triton_python_backend_utils.{name} is not supported by Nereid: {why}")
    return UnsupportedAPIError(
        f"triton_python_backend_utils has no attribute '{name}': Nereid does not provide it "
        "(docs/python-backend.md lists every API it supports)"
    )
