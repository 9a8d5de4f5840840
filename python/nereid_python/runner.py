"""One model instance in this process: loads ``model.py``, runs ``initialize`` / ``execute`` / ``finalize``, and
answers the host (``inited``, ``resp``, ``done``, ``finied``).

Threading: ``handle`` runs on the instance's own thread (the main thread for the first instance). ``send_response``
and ``hold_response`` may be called from any thread (decoupled models answer from their own threads); batch
bookkeeping is guarded by ``_lock``. ``cancel`` runs on the channel's reader with ``cv`` held and only flips flags.
"""

from __future__ import annotations

import asyncio
import importlib.util
import inspect
import itertools
import os
import sys
import threading
import time
from collections import deque

from . import api, cuda, fastpath, hops, reschedule, runlog
from .results import check_result
from .api import InferenceRequest, InferenceResponse, TritonModelException, format_exception
from .runtime import STATE, channel
from .tensor import read_block, read_tensors, write_tensors

_module_ids = itertools.count()

#: Backpressure for decoupled responses: a request's sender waits while this many of its responses, or this many
#: bytes of them, were sent and not yet taken by the request's client (the host answers ``took`` for each one its
#: client's transport took). A client that does not read so stops the model, instead of the server holding every
#: response (a stream that stays stalled ends with RESOURCE_EXHAUSTED and cancels the request, which frees it).
WINDOW_RESPONSES = 8
WINDOW_BYTES = 8 << 20


#: Triton (25.x) calls a model's optional is_ready() on readiness checks; Nereid does not yet, and says so.
IS_READY_IGNORED = "the model defines is_ready(), which Nereid does not call: readiness is the instance's health"


def load_model_class(path: str):
    """Imports ``model.py`` (its folder first on sys.path, so modules beside it import) and returns its class."""
    folder = os.path.dirname(os.path.abspath(path))
    if folder not in sys.path:
        sys.path.insert(0, folder)
    spec = importlib.util.spec_from_file_location(f"_nereid_model_{next(_module_ids)}", path)
    if spec is None or spec.loader is None:
        raise TritonModelException(f"cannot import '{path}' as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    cls = getattr(module, "TritonPythonModel", None)
    if cls is None:
        raise TritonModelException(f"'{path}' defines no class TritonPythonModel")
    return cls


def last_line(e: BaseException) -> str:
    return f"{type(e).__name__}: {e}"


#: Error codes the host knows (src/core/errors.ts); an engine's exception may carry one as ``code``.
_CODES = {"INVALID_ARG", "NOT_FOUND", "ALREADY_EXISTS", "UNAVAILABLE", "UNSUPPORTED", "CANCELLED", "INTERNAL", "UNKNOWN"}


def error_code(e: BaseException) -> str:
    """The host error code for a failure in initialize: the exception's ``code`` when it is one of the host's
    (Nereid's engines set it: a missing library is UNAVAILABLE), else INTERNAL."""
    code = getattr(e, "code", None)
    return code if isinstance(code, str) and code in _CODES else "INTERNAL"


def exit_now(e: SystemExit) -> None:
    """A model called sys.exit(): the process ends as asked; the host reports the instance as dead."""
    code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


class _Batch:
    __slots__ = ("flags", "outputs", "slots", "final", "held", "returned", "open", "untaken")

    def __init__(self, n: int) -> None:
        self.flags = [[False] for _ in range(n)]
        self.outputs: list[frozenset] = []
        #: Per request: its output slots in client CUDA memory (name -> cuda.Slot), or None.
        self.slots: list = [None] * n
        self.final = [False] * n
        self.held: dict[int, InferenceResponse] = {}
        self.returned = False
        self.open = n
        #: Per request: byte sizes of its non-final responses not yet taken by its client, oldest first (guarded by
        #: the channel's cv: ``took`` arrives on the channel's reader).
        self.untaken: list[deque] = [deque() for _ in range(n)]


class InstanceRunner:
    def __init__(self, inst: int) -> None:
        self.inst = inst
        self.name = f"instance {inst}"
        self.model = None
        self.decoupled = False
        self.iterative = False
        #: How run lines name the engine in the log ("python", "pytorch").
        self.engine = "python"
        self.batches: dict[int, _Batch] = {}
        #: The engine's own way to run a batch from its message (fastpath.py), or None.
        self._wire = None
        #: Messages for this instance, filled by the channel's reader (the stub assigns it).
        self.queue = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None

    # -- messages from the host -------------------------------------------------------------------------------

    def handle(self, msg: dict) -> bool:
        """Runs one message; returns True once the instance is finalized."""
        op = msg["op"]
        if op == "exec":
            self._execute(msg)
        elif op == "init":
            self._init(msg)
        elif op == "fini":
            self._finalize()
            return True
        return False

    def took(self, batch_id: int, index: int) -> None:
        """Runs on the channel's reader with ``cv`` held: one response of request ``index`` was taken."""
        batch = self.batches.get(batch_id)
        if batch is not None and 0 <= index < len(batch.untaken) and batch.untaken[index]:
            batch.untaken[index].popleft()

    def _wait_for_window(self, batch: _Batch, index: int) -> None:
        """Blocks the sender while request ``index`` has a full window of responses not yet taken (reading the
        channel meanwhile if nobody else does, so ``took`` and ``cancel`` arrive); a cancelled request never waits."""
        untaken = batch.untaken[index]
        flag = batch.flags[index]

        def room() -> bool:
            return flag[0] or len(untaken) < WINDOW_RESPONSES and sum(untaken) < WINDOW_BYTES

        ch = channel()
        ch.poll()
        with ch.cv:
            if room():
                return
        ch.wait_for(room)

    def cancel(self, batch_id: int) -> None:
        batch = self.batches.get(batch_id)
        if batch is not None:
            for flag in batch.flags:
                flag[0] = True

    # -- lifecycle ----------------------------------------------------------------------------------------------

    def _init(self, msg: dict) -> None:
        p = msg["payload"]
        self.name = p["instance_name"]
        STATE.local.instance = self.name
        self.decoupled = bool(p.get("decoupled", False))
        #: sequence_batching { iterative_sequence: true }: requests may be rescheduled (api.set_release_flags).
        self.iterative = bool(p.get("iterative", False))
        self.engine = str(p.get("engine", "python"))
        # The host refuses model loading calls from a model being unloaded, never from one still loading.
        STATE.local.phase = "initialize"
        try:
            cls = load_model_class(p["model_path"])
            self.model = cls()
            if callable(getattr(self.model, "is_ready", None)):
                channel().send({"op": "log", "lvl": "warn", "inst": self.name, "msg": IS_READY_IGNORED})
            init = getattr(self.model, "initialize", None)
            if init is not None:
                result = init(dict(p["args"]))
                if inspect.iscoroutine(result):
                    self._run_async(result)
        except SystemExit as e:
            exit_now(e)
        except BaseException as e:  # noqa: BLE001 - every failure of user code is reported, not fatal here
            channel().send(
                {"op": "init_error", "inst": self.inst, "e": {"c": error_code(e), "m": last_line(e)}, "tb": format_exception(e)}
            )
            return
        finally:
            STATE.local.phase = None
        self._wire = None if self.decoupled else getattr(self.model, fastpath.HOOK, None)
        channel().send({"op": "inited", "inst": self.inst})

    def _finalize(self) -> None:
        # The model loading API refuses calls from finalize (loading.py), as Triton's does.
        STATE.local.phase = "finalize"
        fin = getattr(self.model, "finalize", None)
        error = None
        if fin is not None:
            try:
                result = fin()
                if inspect.iscoroutine(result):
                    self._run_async(result)
            except SystemExit as e:
                exit_now(e)
            except BaseException as e:  # noqa: BLE001
                error = format_exception(e)
        self.model = None
        self._wire = None
        msg = {"op": "finied", "inst": self.inst}
        if error:
            msg["tb"] = error
        channel().send(msg)

    def _run_async(self, coro):
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.run_until_complete(coro)

    # -- execute ------------------------------------------------------------------------------------------------

    def _execute(self, msg: dict) -> None:
        t0 = time.perf_counter_ns()
        hop0 = hops.now() if hops.ENABLED else 0
        batch_id = msg["b"]
        reqs = msg["r"]
        block = read_block(msg.get("blk"))
        if self._wire is not None and block is not None and not msg.get("cuda"):
            try:
                done = fastpath.execute(self, self._wire, msg, block, t0)
            except SystemExit as e:
                exit_now(e)
            if done is not None:
                del block  # the inputs go back to the host with the done
                channel().send(done)
                if hop0:
                    hops.record(self.inst, batch_id, msg.get("_rx"), hop0)
                return
        batch = _Batch(len(reqs))
        requests = []
        req = None
        try:
            if msg.get("cuda"):
                cuda.REGIONS.learn(msg["cuda"])
            for i, r in enumerate(reqs):
                outputs = r.get("o", [])
                batch.outputs.append(frozenset(outputs))
                corr = r["cs"] if "cs" in r else int(r.get("c", 0))
                req = InferenceRequest._incoming(
                    read_tensors(block, r["i"]),
                    outputs,
                    r.get("id", ""),
                    corr,
                    r.get("p") or {},
                    r.get("f", 0),
                    batch.flags[i],
                    (self, batch_id, i, batch.flags[i], self.decoupled),
                    r.get("t", 0),
                )
                if r.get("tr"):
                    req._trace_ctx = r["tr"]
                if r.get("do"):
                    req._slots = batch.slots[i] = {n: cuda.REGIONS.slot(*place) for n, place in r["do"].items()}
                requests.append(req)
        except cuda.CudaError as e:
            # Client CUDA memory this process cannot open (a driver refusing the handle): the batch fails, the
            # instance serves on.
            channel().send(
                {"op": "done", "inst": self.inst, "b": batch_id, "t": [0, 0, 0], "err": {"c": "INTERNAL", "m": f"model instance '{self.name}': {e}"}}
            )
            return
        # Only `requests` may keep the inputs (views of the host's block) alive: the block goes back to the host
        # with the `done` once execute dropped them.
        req = None
        del block
        placement = runlog.inputs_placement(requests) if msg.get("cuda") else None
        with self._lock:
            self.batches[batch_id] = batch
        t1 = time.perf_counter_ns()
        error = None
        result = None
        try:
            result = self.model.execute(requests)
            if inspect.iscoroutine(result):
                result = self._run_async(result)
        except SystemExit as e:
            exit_now(e)
        except BaseException as e:  # noqa: BLE001
            error = format_exception(e)
        t2 = time.perf_counter_ns()
        n = len(requests)
        rs = reschedule.released(requests, batch, self._lock)
        del requests
        done: dict = {"op": "done", "inst": self.inst, "b": batch_id}
        if rs:
            done["rs"] = rs
        if error is None:
            error = check_result(self.decoupled, result, n, rs)
        if error is not None:
            done["err"] = fastpath.batch_failure(self.name, error)
        elif result is not None and not self.decoupled:
            self._encode_batch(batch, result, done)
            if placement is not None:
                runlog.log_run(self.engine, self.name, batch.slots, placement, done)
        del result
        t3 = time.perf_counter_ns()
        done["t"] = [t1 - t0, t2 - t1, t3 - t2]
        with self._lock:
            batch.returned = True
            if done.get("err") is not None or done.get("r") is not None:
                batch.open = 0
            if batch.open == 0:
                self.batches.pop(batch_id, None)
        channel().send(done)
        if hop0:
            hops.record(self.inst, batch_id, msg.get("_rx"), hop0)

    def _encode_batch(self, batch: _Batch, responses, done: dict) -> None:
        """All responses of a batch in one message and one shared-memory block."""
        tensors = []
        slots = []
        spans = []
        for i, resp in enumerate(responses):
            if batch.final[i] or resp is None:
                spans.append(None)  # already answered through its response sender, or rescheduled
                continue
            if resp.has_error():
                spans.append(resp)
                continue
            wanted = batch.outputs[i]
            chosen = [t for t in resp.output_tensors() if not wanted or t.name() in wanted]
            spans.append((len(tensors), len(chosen), resp))
            tensors.extend(chosen)
            offered = batch.slots[i]
            slots.extend(offered.get(t.name()) if offered else None for t in chosen)
        try:
            blk, descs = write_tensors(tensors, slots)
        except Exception as e:  # noqa: BLE001 - a tensor that cannot be written fails the batch, not the process
            done["err"] = {"c": "INTERNAL", "m": f"model instance '{self.name}': cannot send outputs: {last_line(e)}"}
            return
        out = []
        for span in spans:
            if span is None:
                out.append(None)
            elif isinstance(span, InferenceResponse):
                out.append({"e": span.error()._wire()})
            else:
                start, count, resp = span
                entry = {"o": descs[start : start + count]}
                if resp._params:
                    entry["p"] = resp._params
                out.append(entry)
        done["blk"] = blk
        done["r"] = out

    # -- response senders -------------------------------------------------------------------------------------

    def hold_response(self, batch_id: int, index: int, response: InferenceResponse) -> None:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is not None:
                batch.held[index] = response

    def send_response(self, batch_id: int, index: int, response: InferenceResponse | None, final: bool) -> None:
        with self._lock:
            batch = self.batches.get(batch_id)
            if batch is None or batch.final[index]:
                raise TritonModelException("Unable to send response. The request has already been answered.")
            if response is None and final:
                response = batch.held.pop(index, None)
            wanted = batch.outputs[index]
            offered = batch.slots[index]
            if final:
                batch.final[index] = True
                batch.open -= 1
                if batch.open == 0 and batch.returned:
                    self.batches.pop(batch_id, None)
        msg: dict = {"op": "resp", "inst": self.inst, "b": batch_id, "i": index, "fin": final}
        if response is None:
            msg["none"] = True
        elif response.has_error():
            msg["e"] = response.error()._wire()
        else:
            if not final:
                self._wait_for_window(batch, index)
            chosen = [t for t in response.output_tensors() if not wanted or t.name() in wanted]
            msg["blk"], msg["o"] = write_tensors(chosen, [offered.get(t.name()) for t in chosen] if offered else None)
            if response._params:
                msg["p"] = response._params
            if not final:
                # Counted before the send: the host's ``took`` for it may arrive as soon as the frame is out.
                with channel().cv:
                    batch.untaken[index].append(sum(d[4] for d in msg["o"]) + 1)
        channel().send(msg)


__all__ = ["InstanceRunner", "load_model_class", "last_line", "exit_now", "api"]
