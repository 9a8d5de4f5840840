"""The check of what a model's ``execute`` returned, with Triton's messages (runner.py reports a failure for the
whole batch)."""

from __future__ import annotations

from .response import InferenceResponse
from .reschedule import check_entry


def check_result(decoupled: bool, result, n: int, rescheduled=()) -> str | None:
    """None when ``result`` answers the ``n`` requests of a batch; else what is wrong. ``rescheduled``: indices of
    requests released for rescheduling, whose entries must be None."""
    if decoupled:
        if result is not None:
            return "a decoupled model's execute() must return None (send responses with the response sender)"
        return None
    if result is None:
        return None  # answered through response senders; the host checks that each request got its final
    if not isinstance(result, (list, tuple)):
        return f"Expected a list in the execute return, found type '{type(result).__name__}'."
    if len(result) != n:
        return (
            "Number of InferenceResponse objects do not match the number of InferenceRequest objects. "
            f"InferenceRequest(s) size is:{n}, and InferenceResponse(s) size is:{len(result)}"
        )
    for i, r in enumerate(result):
        if i in rescheduled:
            problem = check_entry(i, r)
            if problem is not None:
                return problem
        elif not isinstance(r, InferenceResponse):
            return f"execute() returned {type(r).__name__} for request {i}; expected an InferenceResponse"
    return None
