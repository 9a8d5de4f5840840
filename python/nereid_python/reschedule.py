"""Request rescheduling (Triton's iterative sequences): ``request.set_release_flags(RELEASE_RESCHEDULE)``.

A rescheduled request leaves its batch without a final response; the runner lists it in the batch's ``done``
(``rs``) and the host's iterative sequence batcher runs it again in a later batch, its START flag cleared. A
non-decoupled model returns None for it; a decoupled model reschedules before execute returns and may have sent
non-final responses meanwhile (they reach the client as they are sent).
"""

from __future__ import annotations

from .constants import TRITONSERVER_REQUEST_RELEASE_ALL, TRITONSERVER_REQUEST_RELEASE_RESCHEDULE
from .errors import TritonModelException

_API = "InferenceRequest.set_release_flags"
_KNOWN = TRITONSERVER_REQUEST_RELEASE_ALL | TRITONSERVER_REQUEST_RELEASE_RESCHEDULE


def set_release_flags(request, flags) -> None:
    """RELEASE_ALL (the default), or with RELEASE_RESCHEDULE: run the request again once execute returned."""
    if isinstance(flags, bool) or not isinstance(flags, int) or flags & ~_KNOWN:
        raise TritonModelException(
            f"{_API}: flags must be TRITONSERVER_REQUEST_RELEASE_ALL or TRITONSERVER_REQUEST_RELEASE_RESCHEDULE, got {flags!r}"
        )
    if flags & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE:
        args = request._sender_args
        if args is None:
            raise TritonModelException(f"{_API}: only a request handed to execute() can be rescheduled")
        runner, batch_id = args[0], args[1]
        if not runner.iterative:
            raise TritonModelException(
                f"{_API}(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE): request rescheduling needs "
                "sequence_batching { iterative_sequence: true } in the model configuration"
            )
        with runner._lock:
            batch = runner.batches.get(batch_id)
            running = batch is not None and not batch.returned
        if not running:
            raise TritonModelException(
                f"{_API}(TRITONSERVER_REQUEST_RELEASE_RESCHEDULE) must be called before execute() returns"
            )
    request._release = flags


def released(requests, batch, lock) -> list:
    """Indices of the requests execute() rescheduled; their senders close here (nothing more is sent for them
    in this batch). A request that had its final response already is answered, not rescheduled."""
    out = []
    with lock:
        for i, r in enumerate(requests):
            if r._release & TRITONSERVER_REQUEST_RELEASE_RESCHEDULE and not batch.final[i]:
                batch.final[i] = True
                batch.open -= 1
                out.append(i)
    return out


def check_entry(i: int, response) -> str | None:
    """A non-decoupled model's entry in the execute return for rescheduled request ``i`` must be None (Triton)."""
    if response is not None:
        return f"request {i} was rescheduled (set_release_flags), so its entry in the execute return must be None"
    return None
