"""What a BLS ``InferenceRequest`` takes beyond ``request.py``'s plain fields, kept apart from it.

Names: Triton's binding takes ``model_name`` and requested output names as ``str`` or ``bytes`` (a model that reads
the name from a BYTES input passes bytes); both become ``str`` here, anything else is a TypeError as the binding's.

Depth: a BLS call made while this process serves requests that were themselves BLS calls is one level deeper; the
host refuses calls past its limit, so a model that calls itself (or a cycle of models) without end fails with a
clear error instead of running away. The depth of an incoming request travels as the request parameter
``DEPTH_PARAM``, which the host sets and ``take_depth`` removes before the model sees the parameters. A call made
from any thread counts from the deepest request in flight in the process (a spawned thread cannot say which request
it works for): with requests of mixed depths in flight at once, the limit is reached a little sooner, never later.
"""

from __future__ import annotations

import threading
import weakref

#: Set by the host on requests it runs for BLS calls (src/backends/python/bls.ts); not shown to the model.
DEPTH_PARAM = "_nereid_bls_depth"

_inflight: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def as_name(value, what: str) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise TypeError(f"InferenceRequest {what} is bytes that are not UTF-8: {bytes(value)[:40]!r}") from None
    raise TypeError(f"InferenceRequest {what} must be str or bytes, got {type(value).__name__}")


def as_names(values, what: str) -> list[str]:
    return [as_name(v, what) for v in (values or [])]


def take_depth(request, params: dict) -> None:
    """Removes the depth parameter from an incoming request's parameters and remembers the request's depth while
    the request object lives."""
    depth = params.pop(DEPTH_PARAM, None) if isinstance(params, dict) else None
    if isinstance(depth, int) and not isinstance(depth, bool) and depth > 0:
        with _lock:
            _inflight[request] = depth


def call_depth() -> int:
    """The depth a BLS call made now gets: one more than the deepest live request of this process."""
    with _lock:
        deepest = max(_inflight.values(), default=0)
    return deepest + 1
