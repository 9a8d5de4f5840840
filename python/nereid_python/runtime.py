"""Process-wide state of the stub, set once by ``stub.main`` before any model code runs.

Kept in its own module so the public API (request.py, bls.py, logger.py ...) can reach the channel and the shared
memory without an import cycle with the stub.
"""

from __future__ import annotations

import itertools
import threading
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .channel import Channel
    from .shm import ChildArena, HostSegments


class _State:
    channel: "Channel | None" = None
    arena: "ChildArena | None" = None
    host: "HostSegments | None" = None
    #: BLS calls waiting for answers, by call id. Written under ``channel.cv``.
    calls: dict[int, Any] = {}
    call_ids = itertools.count(1)
    #: Name of the instance whose code runs on each thread (for log records and BLS); set by the runner.
    local = threading.local()


STATE = _State()


def channel() -> "Channel":
    ch = STATE.channel
    if ch is None:
        raise RuntimeError("triton_python_backend_utils is only usable inside a model run by Nereid's python backend")
    return ch
