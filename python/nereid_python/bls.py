"""Business Logic Scripting's plumbing: one call in flight (``Call``), sent to the Nereid server through the
control channel and answered there (``bls_resp``, delivered by the stub's reader), and the iterator over a
decoupled call's responses. ``InferenceRequest.exec`` / ``async_exec`` (request.py) are the model's side.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

from . import bls_args
from .errors import TritonError, TritonModelException
from .response import InferenceResponse
from .runtime import STATE, channel
from .tensor import read_block, read_tensors, write_tensors

if TYPE_CHECKING:
    from .request import InferenceRequest


def _message(req: "InferenceRequest", blk, descs: list, cid: int, decoupled: bool) -> dict:
    """The ``bls`` message for ``req`` whose inputs were written to ``blk``, answered as call ``cid``."""
    msg = {
        "op": "bls",
        "call": cid,
        "model": req._model_name,
        "version": "" if req._version is None or int(req._version) < 0 else str(int(req._version)),
        "blk": blk,
        "i": descs,
        "o": req._outputs,
        "id": req._id,
        "flags": req._flags,
        "timeout": req._timeout,
        "p": req._params,
        "decoupled": decoupled,
        "depth": bls_args.call_depth(),
    }
    if getattr(req, "_trace_ctx", None):
        msg["tr"] = req._trace_ctx
    corr = req._corr
    if isinstance(corr, str):
        msg["cs"] = corr
    elif corr:
        msg["c"] = str(corr)
    return msg


class Call:
    """One BLS call in flight; its responses arrive through the channel (``bls_resp``)."""

    def __init__(self, decoupled: bool) -> None:
        self.decoupled = decoupled
        self.responses: list[InferenceResponse] = []
        self.taken = 0
        self.final = False
        self.notify = None
        self.cid = 0

    @classmethod
    def start(cls, req: "InferenceRequest", decoupled: bool) -> "Call":
        if not req._model_name:
            raise TritonModelException("InferenceRequest needs model_name to be executed")
        ch = channel()
        # The inputs first: a tensor that cannot be written leaves no call registered.
        blk, descs = write_tensors(req._inputs)
        call = cls(decoupled)
        with ch.cv:
            cid = next(STATE.call_ids)
            STATE.calls[cid] = call
        call.cid = cid
        ch.send(_message(req, blk, descs, cid, decoupled))
        return call

    def deliver(self, msg: dict) -> None:
        """Called by the channel's reader with ``cv`` held."""
        if msg.get("e"):
            resp = InferenceResponse(error=TritonError._from_wire(msg["e"]))
        else:
            block = read_block(msg.get("blk"))
            resp = InferenceResponse(read_tensors(block, msg.get("o", [])), parameters=msg.get("p"))
        if msg.get("has", True):
            self.responses.append(resp)
        if msg.get("fin"):
            self.final = True
            STATE.calls.pop(msg["call"], None)
            if not self.responses:
                self.responses.append(InferenceResponse())
        if self.notify is not None:
            self.notify()

    async def wait_async(self, first: bool = False) -> None:
        """Until the final response; with ``first``, until the first response or the final one."""
        loop = asyncio.get_running_loop()
        ch = channel()
        done = loop.create_future()

        def ready() -> bool:
            return self.final or (first and len(self.responses) > 0)

        def wake() -> None:
            if ready():
                loop.call_soon_threadsafe(lambda: done.done() or done.set_result(None))

        with ch.cv:
            self.notify = wake
            if ready():
                return
        # Whoever reads the socket delivers the answer; when nobody does, this loop reads it as soon as it arrives.
        watching = _watch_channel(loop, ch)
        try:
            await done
        finally:
            with ch.cv:
                self.notify = None
            if watching:
                _unwatch_channel(loop, ch)


#: Event loops reading the channel while async BLS calls wait, with how many calls wait on each: one fd has one
#: reader callback per loop, so the callback stays until the last waiting call is answered.
_watchers: dict = {}


def _watch_channel(loop, ch) -> bool:
    n = _watchers.get(loop, 0)
    if n == 0:
        try:
            loop.add_reader(ch._sock.fileno(), ch.poll)
        except (RuntimeError, ValueError, NotImplementedError):
            return False
    _watchers[loop] = n + 1
    return True


def _unwatch_channel(loop, ch) -> None:
    n = _watchers.get(loop, 0) - 1
    if n <= 0:
        _watchers.pop(loop, None)
        loop.remove_reader(ch._sock.fileno())
    else:
        _watchers[loop] = n


class ResponseIterator:
    """Responses of a decoupled BLS call, as they arrive."""

    def __init__(self, call: Call) -> None:
        self._call = call

    def __iter__(self):
        return self

    def __next__(self) -> InferenceResponse:
        call = self._call
        channel().wait_for(lambda: call.taken < len(call.responses) or call.final)
        if call.taken < len(call.responses):
            call.taken += 1
            return call.responses[call.taken - 1]
        raise StopIteration

    def cancel(self) -> None:
        """Asks the server to cancel the call (Triton's ``ResponseIterator.cancel()``); the responses that already
        arrived are still read, then a CANCELLED error ends the iteration."""
        call = self._call
        if not call.final:
            channel().send({"op": "bls_cancel", "call": call.cid})
