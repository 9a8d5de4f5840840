"""A batch run by an engine straight from the host's ``exec`` message (the ``_nereid_execute_wire`` method of the
engine's model class; the TensorRT engine has one, user models do not): no request or response objects, the answers
described by the engine. The engine returns None for any batch it leaves to the general path (runner.py), before
it has done anything, so a batch is never run twice."""

from __future__ import annotations

import time

from .api import format_exception

#: The method an engine's model class defines to take batches on this path.
HOOK = "_nereid_execute_wire"


def batch_failure(instance_name: str, error: str) -> dict:
    """The ``err`` of a ``done`` for a batch whose execute failed, in Triton's words."""
    return {"c": "INTERNAL", "m": f"Failed to process the request(s) for model instance '{instance_name}', message: {error}"}


def execute(runner, fast, msg: dict, block, t0: int) -> dict | None:
    """The ``done`` of the batch ``msg`` (its inputs in ``block``, the host block it names), or None when ``fast``
    left it to the general path. SystemExit is the caller's (the runner ends the process as asked)."""
    t1 = time.perf_counter_ns()
    done: dict = {"op": "done", "inst": runner.inst, "b": msg["b"]}
    try:
        got = fast(msg["r"], block.__array_interface__["data"][0])
    except SystemExit:
        raise
    except BaseException as e:  # noqa: BLE001 - an engine failure fails the batch, not the process
        got = ()
        done["err"] = batch_failure(runner.name, format_exception(e))
    if got is None:
        return None
    t2 = time.perf_counter_ns()
    if got:
        done["blk"], done["r"] = got
    done["t"] = [t1 - t0, t2 - t1, time.perf_counter_ns() - t2]
    return done
