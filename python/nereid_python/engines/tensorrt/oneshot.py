"""The one-answer processes the host starts (probe, buildinfo): the answer as one JSON line on the real stdout,
whatever TensorRT and CUDA print (sent to stderr), and an exit that skips interpreter teardown — TensorRT objects
released at exit after a failed runtime can crash the process."""

from __future__ import annotations

import json
import os
import sys
from typing import Callable


def answer_once(compute: Callable[[], dict]) -> None:
    """Runs ``compute`` with stdout pointed at stderr, writes its dict (or ``{"error": {"c", "m"}}``) and exits."""
    out = sys.stdout
    sys.stdout = sys.stderr
    from . import gpu, loader

    try:
        answer = compute()
    except loader.TensorRTError as e:
        answer = {"error": {"c": e.code, "m": str(e)}}
    except gpu.CudaError as e:
        answer = {"error": {"c": "UNAVAILABLE", "m": str(e)}}
    out.write(json.dumps(answer) + "\n")
    out.flush()
    os._exit(0)
