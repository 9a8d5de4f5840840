"""Where a batch's time goes between the host and the engine, for checks on real hardware (bench/gpu/hops.ts): with
``NEREID_HOP_TRACE=FILE`` the stub appends one JSON line per batch — when the channel's read returned its ``exec``
(``rx``), when the instance's thread began it (``t0``), when its ``done`` was sent (``sent``). All on
CLOCK_MONOTONIC, as the server's trace (process.hrtime) and the TensorRT engine's trace are, so one request's trip
reads across the three processes' records. Off (the default), a batch pays one test.

Why: at concurrency 1 a GPU request spends more time between the host and the engine than in either; which hop
(the host's write, this process's wake-up, the hand-off to the instance's thread, the way back) is not visible in
either side's own timings."""

from __future__ import annotations

import json
import os
import threading
import time

PATH = os.environ.get("NEREID_HOP_TRACE") or None
ENABLED = PATH is not None
_lock = threading.Lock()


def now() -> int:
    return time.monotonic_ns()


def append_line(path: str, record: dict) -> None:
    """One JSON line appended with one ``write`` on a file opened for appending: lines of concurrent writers (the
    instances' threads, other processes) do not interleave."""
    line = json.dumps(record, separators=(",", ":")) + "\n"
    with _lock:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, line.encode())
        finally:
            os.close(fd)


def record(inst: int, batch: int, rx: int | None, t0: int) -> None:
    """The batch's ``done`` was just sent."""
    if PATH is not None:
        append_line(PATH, {"event": "hop", "pid": os.getpid(), "inst": inst, "b": batch, "rx": rx, "t0": t0, "sent": now()})
