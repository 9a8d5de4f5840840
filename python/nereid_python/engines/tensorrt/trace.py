"""An engine-side record of what each batch did on the GPU, for checks on real hardware (scripts/gpu/): with
``NEREID_TRT_TRACE=FILE`` every instance appends one JSON line per event to FILE — its set-up (execution contexts,
their device memory, graphs captured) and each batch (rows, profile, host-to-device copies per input, graph or
not, start and end on CLOCK_MONOTONIC, which every process of the machine shares, so intervals of instances in
different processes compare). Off (the default), a batch pays one attribute test.

Why in the engine: what the options change (copies coalesced, batches overlapping or not, memory per context) is
not visible at the protocol; Triton shows it only through Nsight. Lines are written with one ``write`` on a file
opened for appending, so lines of concurrent writers do not interleave."""

from __future__ import annotations

import os
import time

from ... import hops

_PATH = os.environ.get("NEREID_TRT_TRACE") or None


def enabled() -> bool:
    return _PATH is not None


def now() -> int:
    return time.monotonic_ns()


def record(event: str, **fields) -> None:
    if _PATH is not None:
        hops.append_line(_PATH, {"event": event, "pid": os.getpid(), **fields})
