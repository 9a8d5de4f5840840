"""The API a ``model.py`` sees as ``triton_python_backend_utils`` (Triton's Python backend), written for Nereid.

Requests, responses, response senders, errors, the logger, the auto-complete ``ModelConfig``, the config and tensor
helpers, and Business Logic Scripting (``InferenceRequest(model_name=...).exec()`` / ``async_exec()``), which
calls back into the Nereid server through the control channel.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import traceback

import numpy as np

from . import bls_args, datatypes
from .runtime import STATE, channel
from .shm import decode_bytes_elements, encode_bytes_elements
from .tensor import Tensor, read_block, read_tensors, write_tensors

TRITONSERVER_RESPONSE_COMPLETE_FINAL = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_START = 1
TRITONSERVER_REQUEST_FLAG_SEQUENCE_END = 2
TRITONSERVER_REQUEST_RELEASE_ALL = 1
TRITONSERVER_REQUEST_RELEASE_RESCHEDULE = 2
TRITONSERVER_MEMORY_CPU = 0
TRITONSERVER_MEMORY_CPU_PINNED = 1
TRITONSERVER_MEMORY_GPU = 2


# -- errors ----------------------------------------------------------------------------------------------------


class TritonError:
    """An error a model returns in a response (not raised). Codes as TRITONSERVER_Error_Code."""

    UNKNOWN = 0
    INTERNAL = 1
    NOT_FOUND = 2
    INVALID_ARG = 3
    UNAVAILABLE = 4
    UNSUPPORTED = 5
    ALREADY_EXISTS = 6
    CANCELLED = 7

    _NAMES = ("UNKNOWN", "INTERNAL", "NOT_FOUND", "INVALID_ARG", "UNAVAILABLE", "UNSUPPORTED", "ALREADY_EXISTS", "CANCELLED")

    def __init__(self, message: str, code: int = INTERNAL) -> None:
        if not isinstance(code, int) or not 0 <= code < len(self._NAMES):
            raise ValueError(f"TritonError code must be one of TritonError.UNKNOWN .. TritonError.CANCELLED, got {code!r}")
        self._message = str(message)
        self._code = code

    def message(self) -> str:
        return self._message

    def code(self) -> int:
        return self._code

    def _wire(self) -> dict:
        return {"c": self._NAMES[self._code], "m": self._message}

    @classmethod
    def _from_wire(cls, e: dict) -> "TritonError":
        code = cls._NAMES.index(e["c"]) if e.get("c") in cls._NAMES else cls.INTERNAL
        return cls(e.get("m", ""), code)

    def __repr__(self) -> str:
        return f"TritonError({self._message!r}, {self._NAMES[self._code]})"


class TritonModelException(Exception):
    """Raised by a model (or by this module) to fail the current call; its message goes to the client."""

    def message(self) -> str:
        return str(self)


# -- responses -------------------------------------------------------------------------------------------------


def _params_json(parameters) -> str:
    if parameters is None:
        return "{}"
    if isinstance(parameters, str):
        json.loads(parameters)  # must be a JSON object's text
        return parameters
    return json.dumps(parameters)


def _check_params(parameters) -> dict:
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
        self._params = _check_params(parameters)

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
        return _cancelled(self._flag)


def _cancelled(flag) -> bool:
    if flag is None:
        return False
    if not flag[0]:
        ch = STATE.channel
        if ch is not None:
            ch.poll()
    return bool(flag[0])


# -- requests --------------------------------------------------------------------------------------------------


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
        self._params = _check_params(parameters)
        self._flag = None
        self._sender = None
        self._sender_args = None
        self._release = TRITONSERVER_REQUEST_RELEASE_ALL

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
        from .surface import InferenceTrace  # surface.py imports this module

        return InferenceTrace()

    def timeout(self) -> int:
        return self._timeout

    def model_name(self) -> str:
        return self._model_name

    def model_version(self) -> int:
        return self._version

    def parameters(self) -> str:
        return json.dumps(self._params)

    def is_cancelled(self) -> bool:
        return _cancelled(self._flag)

    def get_response_sender(self) -> InferenceResponseSender:
        if self._sender_args is None:
            raise TritonModelException("only a request handed to execute() has a response sender")
        if self._sender is None:
            self._sender = InferenceResponseSender(*self._sender_args)
        return self._sender

    def set_release_flags(self, flags: int) -> None:
        from .reschedule import set_release_flags  # reschedule.py imports this module

        set_release_flags(self, flags)

    # -- BLS ----------------------------------------------------------------------------------------------------

    def exec(self, decoupled: bool = False):
        """Runs this request on ``model_name`` and waits: one InferenceResponse, or an iterator of them."""
        call = _Call.start(self, decoupled)
        if decoupled:
            return _ResponseIterator(call)
        channel().wait_for(lambda: call.final)
        return call.responses[-1]

    async def async_exec(self, decoupled: bool = False):
        """Like ``exec`` without blocking the event loop (``async def execute``)."""
        call = _Call.start(self, decoupled)
        # Decoupled: the iterator comes with the first response (or the end), the rest arrive as it is read.
        await call.wait_async(first=decoupled)
        return _ResponseIterator(call) if decoupled else call.responses[-1]


class _Call:
    """One BLS call in flight; its responses arrive through the channel (``bls_resp``)."""

    def __init__(self, decoupled: bool) -> None:
        self.decoupled = decoupled
        self.responses: list[InferenceResponse] = []
        self.taken = 0
        self.final = False
        self.notify = None
        self.cid = 0

    @classmethod
    def start(cls, req: InferenceRequest, decoupled: bool) -> "_Call":
        if not req._model_name:
            raise TritonModelException("InferenceRequest needs model_name to be executed")
        ch = channel()
        blk, descs = write_tensors(req._inputs)
        call = cls(decoupled)
        with ch.cv:
            cid = next(STATE.call_ids)
            STATE.calls[cid] = call
        call.cid = cid
        corr = req._corr
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
        if isinstance(corr, str):
            msg["cs"] = corr
        elif corr:
            msg["c"] = str(corr)
        ch.send(msg)
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


class _ResponseIterator:
    """Responses of a decoupled BLS call, as they arrive."""

    def __init__(self, call: _Call) -> None:
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


# -- logging ---------------------------------------------------------------------------------------------------


class Logger:
    """Log records that go to Nereid's log, with the model and instance they come from."""

    INFO = 0
    WARNING = 1
    ERROR = 2
    VERBOSE = 3
    _LEVELS = ("info", "warn", "error", "verbose")

    class LogLevel:
        """Triton's ``Logger.LogLevel`` (the same values as ``Logger.INFO`` ...)."""

        INFO, WARNING, ERROR, VERBOSE = 0, 1, 2, 3

    @staticmethod
    def log(message, level: int = INFO) -> None:
        if not isinstance(level, int) or not 0 <= level < 4:
            level = Logger.INFO
        frame = sys._getframe(1)
        while frame is not None and frame.f_code.co_filename == __file__:
            frame = frame.f_back
        where = f"{frame.f_code.co_filename}:{frame.f_lineno}" if frame is not None else ""
        ch = STATE.channel
        if ch is None:
            print(f"[{Logger._LEVELS[level]}] {where} {message}", file=sys.stderr)
            return
        ch.send({"op": "log", "lvl": Logger._LEVELS[level], "msg": str(message), "at": where, "inst": _instance()})

    @staticmethod
    def log_info(message) -> None:
        Logger.log(message, Logger.INFO)

    @staticmethod
    def log_warn(message) -> None:
        Logger.log(message, Logger.WARNING)

    @staticmethod
    def log_error(message) -> None:
        Logger.log(message, Logger.ERROR)

    @staticmethod
    def log_verbose(message) -> None:
        Logger.log(message, Logger.VERBOSE)


def _instance():
    return getattr(STATE.local, "instance", None)


# -- auto-complete ---------------------------------------------------------------------------------------------

_INPUT_KEYS = {"name", "data_type", "dims", "format", "reshape", "is_shape_tensor", "allow_ragged_batch", "optional", "is_non_linear_format_io"}
_OUTPUT_KEYS = {"name", "data_type", "dims", "reshape", "label_filename", "is_shape_tensor", "is_non_linear_format_io"}


class ModelConfig:
    """The config handed to ``auto_complete_config``: read it with ``as_dict``, change it with the setters."""

    def __init__(self, model_config) -> None:
        self._config = json.loads(model_config) if isinstance(model_config, str) else model_config

    def as_dict(self) -> dict:
        return self._config

    def _name(self) -> str:
        return self._config.get("name", "")

    def set_max_batch_size(self, max_batch_size: int) -> None:
        if not isinstance(max_batch_size, int) or isinstance(max_batch_size, bool) or max_batch_size < 0:
            raise ValueError(f"max_batch_size must be a non-negative int, got {max_batch_size!r}")
        current = int(self._config.get("max_batch_size", 0) or 0)
        if current > max_batch_size:
            raise ValueError(
                f"configuration specified max_batch_size {current}, but auto_complete_config of model "
                f"'{self._name()}' set max_batch_size {max_batch_size}"
            )
        self._config["max_batch_size"] = max_batch_size

    def set_dynamic_batching(self) -> None:
        if self._config.get("sequence_batching") is not None:
            raise ValueError(
                f"model '{self._name()}': configuration already uses sequence_batching; cannot set dynamic_batching"
            )
        if self._config.get("dynamic_batching") is None:
            self._config["dynamic_batching"] = {}

    def set_model_transaction_policy(self, transaction_policy_dict: dict) -> None:
        if not isinstance(transaction_policy_dict, dict) or set(transaction_policy_dict) - {"decoupled"}:
            raise ValueError("model_transaction_policy takes a dict with the key 'decoupled' only")
        current = self._config.get("model_transaction_policy")
        wanted = bool(transaction_policy_dict.get("decoupled", False))
        if current is not None and bool(current.get("decoupled", False)) != wanted:
            raise ValueError(
                f"model '{self._name()}': configuration sets model_transaction_policy decoupled "
                f"{bool(current.get('decoupled', False))}, but auto_complete_config sets {wanted}"
            )
        self._config["model_transaction_policy"] = {"decoupled": wanted}

    def add_input(self, input: dict) -> None:
        self._add("input", input, _INPUT_KEYS)

    def add_output(self, output: dict) -> None:
        self._add("output", output, _OUTPUT_KEYS)

    def _add(self, kind: str, tensor: dict, allowed: set) -> None:
        if not isinstance(tensor, dict):
            raise ValueError(f"add_{kind} takes a dict, got {type(tensor).__name__}")
        unknown = set(tensor) - allowed
        if unknown:
            raise ValueError(f"model '{self._name()}': {kind} has unknown keys {sorted(unknown)}; allowed: {sorted(allowed)}")
        for key in ("name", "data_type", "dims"):
            if key not in tensor:
                raise ValueError(f"model '{self._name()}': {kind} {tensor.get('name', '')!r} needs '{key}'")
        tensor = dict(tensor)
        tensor["dims"] = [int(d) for d in tensor["dims"]]
        entries = self._config.setdefault(kind, [])
        for existing in entries:
            if existing.get("name") != tensor["name"]:
                continue
            for key in ("data_type", "dims"):
                have = existing.get(key)
                if key == "dims":
                    have = [int(d) for d in (have or [])]
                    if not have:
                        existing["dims"] = tensor["dims"]
                        continue
                elif have in (None, "", "TYPE_INVALID"):
                    existing[key] = tensor[key]
                    continue
                if have != tensor[key]:
                    raise ValueError(
                        f"model '{self._name()}': {kind} '{tensor['name']}' has {key} {have} in the configuration, "
                        f"but auto_complete_config sets {tensor[key]}"
                    )
            return
        entries.append(tensor)


# -- module-level helpers ---------------------------------------------------------------------------------------


def get_input_tensor_by_name(inference_request: InferenceRequest, name: str) -> Tensor | None:
    for t in inference_request.inputs():
        if t.name() == name:
            return t
    return None


def get_output_tensor_by_name(inference_response: InferenceResponse, name: str) -> Tensor | None:
    for t in inference_response.output_tensors():
        if t.name() == name:
            return t
    return None


def get_input_config_by_name(model_config: dict, name: str) -> dict | None:
    for entry in model_config.get("input", []) or []:
        if entry.get("name") == name:
            return entry
    return None


def get_output_config_by_name(model_config: dict, name: str) -> dict | None:
    for entry in model_config.get("output", []) or []:
        if entry.get("name") == name:
            return entry
    return None


def triton_string_to_numpy(triton_type_string: str):
    return datatypes.config_to_numpy(triton_type_string)


_TYPE_NUMBERS = ["INVALID", "BOOL", "UINT8", "UINT16", "UINT32", "UINT64", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64", "BYTES", "BF16"]


def triton_to_numpy_type(data_type: int):
    """Config enum number (TYPE_FP32 = 11) -> numpy type."""
    name = _TYPE_NUMBERS[data_type] if 0 < data_type < len(_TYPE_NUMBERS) else None
    return None if name is None else datatypes.TO_NUMPY[name].type


def numpy_to_triton_type(data_type) -> int | None:
    try:
        return _TYPE_NUMBERS.index(datatypes.from_numpy(np.dtype(data_type)))
    except TypeError:
        return None


def serialize_byte_tensor(input_tensor: np.ndarray) -> np.ndarray:
    """Object/bytes array -> Triton's length-prefixed BYTES form, as a uint8 array."""
    if input_tensor.size == 0:
        return np.empty([0], dtype=np.uint8)
    return np.frombuffer(encode_bytes_elements(input_tensor.reshape(-1)), dtype=np.uint8)


def deserialize_bytes_tensor(encoded_tensor) -> np.ndarray:
    """Triton's length-prefixed BYTES form -> an object array of bytes."""
    buf = np.frombuffer(encoded_tensor, dtype=np.uint8) if not isinstance(encoded_tensor, np.ndarray) else encoded_tensor
    count = 0
    off = 0
    mv = memoryview(buf)
    while off + 4 <= len(mv):
        off += 4 + int.from_bytes(mv[off : off + 4], "little")
        count += 1
    return decode_bytes_elements(buf, count)


def _not_yet(name: str):
    def fail(*args, **kwargs):
        raise TritonModelException(f"pb_utils.{name} (the model loading API) is not supported by Nereid yet")

    fail.__name__ = name
    return fail


# The model loading API (load_model, unload_model, is_model_ready) lives in loading.py.
from .loading import is_model_ready, load_model, unload_model  # noqa: E402,F401


_OWN = os.path.dirname(os.path.abspath(__file__)) + os.sep
_ASYNCIO = os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep


def format_exception(e: BaseException) -> str:
    """``Type: message`` then the model's frames, innermost first, as Triton's python backend reports them (the
    stub's own frames and asyncio's are left out: they say nothing about the model)."""
    head = f"{type(e).__name__}: {e}"
    frames = [
        f
        for f in traceback.extract_tb(e.__traceback__)
        if not f.filename.startswith(_OWN) and not f.filename.startswith(_ASYNCIO)
    ]
    if not frames:
        return head
    lines = "".join(f"  {f.filename}({f.lineno}): {f.name}\n" for f in reversed(frames))
    return f"{head}\n\nAt:\n{lines}"

