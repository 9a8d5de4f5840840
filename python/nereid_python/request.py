"""Requests: the ``InferenceRequest`` handed to ``execute``, and the one a model builds to call another model
(Business Logic Scripting; the calls themselves are in bls.py)."""

from __future__ import annotations

import json

from . import bls_args, reschedule
from .bls import Call, ResponseIterator
from .constants import TRITONSERVER_REQUEST_RELEASE_ALL
from .errors import TritonModelException
from .response import InferenceResponseSender, cancelled, check_params
from .runtime import channel
from .surface import InferenceTrace
from .tensor import Tensor


class InferenceRequest:
    """A request handed to ``execute``, or one a model builds to call another model (BLS)."""

    #: Output buffers the client placed in CUDA shared memory (name -> cuda.Slot), set by the runner; an engine
    #: may write an output in place (tensor.slot_tensor). Not Triton API.
    _slots = None

    def __init__(
        self,
        model_name: str = "",
        inputs=None,
        requested_output_names=None,
        request_id: str = "",
        correlation_id=0,
        model_version: int = -1,
        flags: int = 0,
        timeout: int = 0,
        preferred_memory=None,
        trace=None,
        parameters=None,
    ) -> None:
        self._model_name = bls_args.as_name(model_name, "model_name")
        self._inputs = list(inputs or [])
        for t in self._inputs:
            if not isinstance(t, Tensor):
                raise TritonModelException(f"InferenceRequest inputs must be Tensor objects, got {type(t).__name__}")
        self._outputs = bls_args.as_names(requested_output_names, "requested_output_names")
        self._id = request_id
        if not isinstance(correlation_id, (int, str)) or (isinstance(correlation_id, int) and correlation_id < 0):
            raise TritonModelException("correlation_id must be an unsigned integer or a string")
        self._corr = correlation_id
        self._version = model_version
        self._flags = flags
        self._timeout = timeout
        self._params = check_params(parameters)
        self._flag = None
        self._sender = None
        self._sender_args = None
        self._release = TRITONSERVER_REQUEST_RELEASE_ALL
        self._trace_ctx = trace._ctx if isinstance(trace, InferenceTrace) else None

    @classmethod
    def _incoming(cls, inputs, outputs, rid, corr, params, flags, flag, sender_args, timeout=0) -> "InferenceRequest":
        r = cls.__new__(cls)
        r._model_name = ""
        r._inputs = inputs
        r._outputs = outputs
        r._id = rid
        r._corr = corr
        r._version = -1
        r._flags = flags
        r._timeout = timeout
        r._params = params
        r._flag = flag
        r._trace_ctx = None
        r._sender = None
        r._sender_args = sender_args
        bls_args.take_depth(r, params)
        r._release = TRITONSERVER_REQUEST_RELEASE_ALL
        return r

    def inputs(self) -> list[Tensor]:
        return self._inputs

    def requested_output_names(self) -> list[str]:
        return list(self._outputs)

    def request_id(self) -> str:
        return self._id

    def correlation_id(self):
        return self._corr

    def flags(self) -> int:
        return self._flags

    def set_flags(self, flags: int) -> None:
        self._flags = flags

    def trace(self):
        return InferenceTrace(self._trace_ctx)

    def timeout(self) -> int:
        return self._timeout

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._version

    def parameters(self) -> str:
        return json.dumps(self._params)

    def is_cancelled(self) -> bool:
        return cancelled(self._flag)

    def get_response_sender(self) -> InferenceResponseSender:
        if self._sender_args is None:
            raise TritonModelException("only a request handed to execute() has a response sender")
        if self._sender is None:
            self._sender = InferenceResponseSender(*self._sender_args)
        return self._sender

    def set_release_flags(self, flags: int) -> None:
        reschedule.set_release_flags(self, flags)

    # -- BLS ----------------------------------------------------------------------------------------------------

    def exec(self, decoupled: bool = False):
        """Runs this request on ``model_name`` and waits: one InferenceResponse, or an iterator of them."""
        call = Call.start(self, decoupled)
        if decoupled:
            return ResponseIterator(call)
        channel().wait_for(lambda: call.final)
        return call.responses[-1]

    async def async_exec(self, decoupled: bool = False):
        """Like ``exec`` without blocking the event loop (``async def execute``)."""
        call = Call.start(self, decoupled)
        # Decoupled: the iterator comes with the first response (or the end), the rest arrive as it is read.
        await call.wait_async(first=decoupled)
        return ResponseIterator(call) if decoupled else call.responses[-1]
