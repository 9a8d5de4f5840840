"""Responses: ``InferenceResponse`` and the ``InferenceResponseSender`` a request hands out, with the two checks
requests share with them (the parameters' shape, and whether the client cancelled)."""

from __future__ import annotations

import json

from .constants import TRITONSERVER_RESPONSE_COMPLETE_FINAL
from .errors import TritonError, TritonModelException
from .runtime import STATE
from .tensor import Tensor


def check_params(parameters) -> dict:
    """A request's or response's parameters as a dict, refused unless str keys map to bool, int, float or str."""
    if parameters is None:
        return {}
    if isinstance(parameters, str):
        parameters = json.loads(parameters)
    if not isinstance(parameters, dict):
        raise TritonModelException("parameters must be a dict (or its JSON text)")
    for k, v in parameters.items():
        if not isinstance(k, str) or not isinstance(v, (bool, int, str, float)):
            raise TritonModelException(f"parameter {k!r}: keys must be str and values bool, int, float or str")
    return parameters


def cancelled(flag) -> bool:
    """Whether the request behind ``flag`` (set by the channel's reader) was cancelled; reads the channel first
    when nobody else is reading it, so a cancellation that already arrived is seen."""
    if flag is None:
        return False
    if not flag[0]:
        ch = STATE.channel
        if ch is not None:
            ch.poll()
    return bool(flag[0])


class InferenceResponse:
    """One response: output tensors, or an error."""

    def __init__(self, output_tensors=None, error: TritonError | None = None, parameters=None) -> None:
        if error is not None and not isinstance(error, TritonError):
            raise TritonModelException(f"InferenceResponse error must be a TritonError, got {type(error).__name__}")
        tensors = list(output_tensors or [])
        for t in tensors:
            if not isinstance(t, Tensor):
                raise TritonModelException(f"InferenceResponse output_tensors must be Tensor objects, got {type(t).__name__}")
        self._outputs = tensors
        self._error = error
        self._params = check_params(parameters)

    def output_tensors(self) -> list[Tensor]:
        return self._outputs

    def has_error(self) -> bool:
        return self._error is not None

    def error(self) -> TritonError | None:
        return self._error

    def parameters(self) -> str:
        return json.dumps(self._params)


class InferenceResponseSender:
    """Sends responses for one request, from any thread (decoupled models; also one final response otherwise)."""

    def __init__(self, runner, batch: int, index: int, flag, decoupled: bool) -> None:
        self._runner = runner
        self._batch = batch
        self._index = index
        self._flag = flag
        self._decoupled = decoupled
        self._sent = 0
        self._closed = False

    def send(self, response: InferenceResponse | None = None, flags: int = 0) -> None:
        if self._closed:
            raise TritonModelException("Unable to send response. Response sender has been closed.")
        if response is not None and not isinstance(response, InferenceResponse):
            raise TritonModelException(f"send() takes an InferenceResponse, got {type(response).__name__}")
        final = bool(flags & TRITONSERVER_RESPONSE_COMPLETE_FINAL)
        if not self._decoupled:
            if response is not None and self._sent >= 1:
                raise TritonModelException("a model that is not decoupled can send only one response per request")
            if not final:
                if response is None:
                    raise TritonModelException("send() without a response needs TRITONSERVER_RESPONSE_COMPLETE_FINAL")
                self._sent += 1
                # A non-decoupled response is delivered with its final flag; remember it until then.
                self._runner.hold_response(self._batch, self._index, response)
                return
        if response is not None:
            self._sent += 1
        if final:
            self._closed = True
        self._runner.send_response(self._batch, self._index, response, final)

    def is_cancelled(self) -> bool:
        return cancelled(self._flag)
