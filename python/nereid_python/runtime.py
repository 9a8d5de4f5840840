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
    #: Calls waiting for answers (BLS, model control, metrics), by call id, each with a ``deliver(msg)`` the
    #: channel's reader calls. Written under ``channel.cv``.
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


class _Answer:
    """The one answer to a ``round_trip`` (delivered by the channel's reader with ``cv`` held)."""

    msg: dict | None = None

    def deliver(self, msg: dict) -> None:
        self.msg = msg
        STATE.calls.pop(msg.get("call"), None)


def round_trip(msg: dict) -> dict:
    """Sends ``msg`` under a fresh call id and returns the host's one answer to it (a ``bls_resp`` or
    ``metric_resp`` of that id); the caller reads the answer's error (``e``) with its own wording."""
    ch = channel()
    answer = _Answer()
    with ch.cv:
        cid = next(STATE.call_ids)
        STATE.calls[cid] = answer
    msg["call"] = cid
    try:
        ch.send(msg)
        ch.wait_for(lambda: answer.msg is not None)
    except BaseException:
        with ch.cv:
            STATE.calls.pop(cid, None)  # no answer will come for it (the channel closed, or the send failed)
        raise
    return answer.msg
