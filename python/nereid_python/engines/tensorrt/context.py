"""One model instance on the GPU: a CUDA stream, one execution context per optimization profile it may use
(Triton's ``profile`` in ``instance_group``; profile 0 when none is listed), device buffers sized for the largest
shapes of those profiles, pinned output staging, and optional CUDA graphs.

A batch: pick the profile (``profiles.select``), set every input's shape on that profile's context, copy the
inputs from the transport's shared memory (pinned once per segment) straight into the device buffers, run
``execute_async_v3`` (or a captured graph), copy the requested outputs back, wait on an event, and answer each
request with views of its rows.

Options (resolved by the host, ``src/backends/tensorrt/options.ts``): ``coalesce`` (inputs of one name that lie
back to back in shared memory go in one copy; the host lays them out so), ``gather_threshold`` (at least that many
pieces of one input are gathered on the host into one pinned buffer first), ``allocation`` (STATIC or
ON_PROFILE_CHANGE, TensorRT's ExecutionContextAllocationStrategy), ``graphs`` / ``graph_specs``,
``busy_wait_events`` (spin on the completion event instead of sleeping in it), ``output_copy_stream`` (outputs are
copied on their own stream after an event), ``policy`` (DEVICE_BLOCKING: one batch at a time per GPU).

Threading: one instance is driven by one thread (the stub's), one batch at a time.
"""

from __future__ import annotations

import ctypes
import time

import numpy as np

from nereid_python import datatypes
from nereid_python.api import InferenceResponse, TritonError
from nereid_python.runtime import STATE
from nereid_python.tensor import Tensor, preplace

from . import gpu as cuda, graphs, outputs, profiles, trace
from .loader import TensorRTError


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def _piece(a: np.ndarray) -> tuple[int, int]:
    """(address, bytes) of one request's input, which the transport hands over C-contiguous."""
    if not a.flags.c_contiguous:
        raise TensorRTError("an input is not C-contiguous", "INTERNAL")
    return a.__array_interface__["data"][0], a.nbytes


def _host_view(ptr: int, nbytes: int) -> np.ndarray:
    return np.ctypeslib.as_array((ctypes.c_uint8 * max(nbytes, 1)).from_address(ptr))[:nbytes]


class Instance:
    def __init__(self, shared, name: str, profile_ids: list[int], max_batch_size: int, options: dict, log) -> None:
        self.shared = shared
        self.name = name
        self.log = log
        self.o = options
        self.batching = max_batch_size > 0
        self.max_batch_size = max_batch_size
        facts = shared.facts
        n_profiles = len(facts["profiles"])
        self.profile_ids = profile_ids or [0]
        for p in self.profile_ids:
            if p < 0 or p >= n_profiles:
                raise TensorRTError(f"instance {name}: profile {p} does not exist; the plan has {n_profiles} optimization profile(s) (0..{n_profiles - 1})", "INVALID_ARG")
        self.inputs = [t for t in facts["io"] if t["mode"] == "input"]
        self.outputs = [t for t in facts["io"] if t["mode"] == "output"]
        for t in facts["io"]:
            if t["shape_tensor"]:
                raise TensorRTError(f"tensor '{t['name']}' is a shape tensor; Nereid's TensorRT backend does not serve shape tensors yet", "UNSUPPORTED")
            if t["datatype"] is None:
                raise TensorRTError(f"tensor '{t['name']}' is {t['trt_dtype']}, which has no Triton datatype", "UNSUPPORTED")
            if t["location"] != "device":
                raise TensorRTError(f"tensor '{t['name']}' lives in host memory; only device tensors are served", "UNSUPPORTED")
        self.dtypes = {t["name"]: datatypes.TO_NUMPY[t["datatype"]] for t in facts["io"]}
        self.datatype_of = {t["name"]: t["datatype"] for t in facts["io"]}
        trt = shared.trt
        cuda.set_device(shared.device)
        self.stream = cuda.stream_create()
        self.out_stream = cuda.stream_create() if options.get("output_copy_stream") else self.stream
        blocking = not options.get("busy_wait_events")
        self.done = cuda.event_create(blocking_sync=blocking)
        self.computed = cuda.event_create(blocking_sync=blocking) if self.out_stream is not self.stream else None
        strategy_name = options.get("allocation", "STATIC")
        strategy = getattr(trt.ExecutionContextAllocationStrategy, strategy_name)
        free_before, _ = cuda.mem_get_info()
        self.contexts = {}
        for p in self.profile_ids:
            shared.logger.take()
            ctx = shared.engine.create_execution_context(strategy)
            if ctx is None:
                raise TensorRTError(f"instance {name}: TensorRT could not create an execution context: {' | '.join(shared.logger.take()) or 'no reason logged'}")
            if not ctx.set_optimization_profile_async(p, int(self.stream)):
                raise TensorRTError(f"instance {name}: cannot select optimization profile {p}: {' | '.join(shared.logger.take())}")
            self.contexts[p] = ctx
        cuda.stream_sync(self.stream)
        free_after, _ = cuda.mem_get_info()
        self.context_bytes = max(0, free_before - free_after)
        log(f"instance {name}: {len(self.contexts)} execution context(s) for profile(s) {self.profile_ids} with {strategy_name} allocation took {self.context_bytes / 2**20:.1f} MiB of GPU memory")
        self.device_buffers: dict[str, int] = {}
        self.capacity: dict[str, int] = {}
        self._allocate()
        self.staging: dict[str, tuple[int, int]] = {}
        self.gather: dict[str, tuple[int, int]] = {}
        self.graphs: dict[tuple, graphs.Graph] = {}
        # The input shapes each context was last given, and the output shapes per (profile, input shapes): setting
        # a context's shapes costs TensorRT work at the next enqueue (bare TensorRT on the H200, BERT-base batch 32:
        # 2 % slower with the same shapes set before every run, 9 % when they alternate), so shapes are set only
        # when they change, and never for a graph replay.
        self._shapes_set: dict[int, tuple] = {}
        self._out_shapes: dict[tuple, dict[str, list[int]]] = {}
        if options.get("graphs"):
            self.graphs = graphs.capture(self, options.get("graph_specs") or [])
            self._shapes_set.clear()
        if trace.enabled():
            engine = shared.engine
            per_profile = getattr(engine, "get_device_memory_size_for_profile", None)
            trace.record(
                "instance",
                instance=name,
                profiles=self.profile_ids,
                allocation=strategy_name,
                context_bytes=self.context_bytes,
                engine_device_memory=int(getattr(engine, "device_memory_size", 0) or 0),
                profile_device_memory=[int(per_profile(p)) for p in self.profile_ids] if per_profile else None,
                graphs=len(self.graphs),
                output_copy_stream=self.out_stream is not self.stream,
                busy_wait_events=bool(options.get("busy_wait_events")),
                policy=options.get("policy", "DEVICE_BLOCKING"),
            )

    # -- set-up ---------------------------------------------------------------------------------------------------

    def _max_shapes(self, p: int) -> dict[str, list[int]]:
        return {t["name"]: list(self.shared.facts["profiles"][p]["inputs"][t["name"]]["max"]) for t in self.inputs}

    def _allocate(self) -> None:
        need: dict[str, int] = {}
        for p, ctx in self.contexts.items():
            shapes = self._max_shapes(p)
            for n, s in shapes.items():
                need[n] = max(need.get(n, 0), _prod(s) * self.dtypes[n].itemsize)
                if not ctx.set_input_shape(n, s):
                    raise TensorRTError(f"instance {self.name}: profile {p} rejects its own max shape {s} for '{n}': {' | '.join(self.shared.logger.take())}")
            for t in self.outputs:
                shape = [int(d) for d in ctx.get_tensor_shape(t["name"])]
                if any(d < 0 for d in shape):
                    raise TensorRTError(f"output '{t['name']}' has a data-dependent shape {shape}; Nereid's TensorRT backend does not serve those yet", "UNSUPPORTED")
                need[t["name"]] = max(need.get(t["name"], 0), _prod(shape) * self.dtypes[t["name"]].itemsize)
        for n, size in need.items():
            self.device_buffers[n] = cuda.malloc(size)
            self.capacity[n] = size
        for ctx in self.contexts.values():
            for n, ptr in self.device_buffers.items():
                if not ctx.set_tensor_address(n, ptr):
                    raise TensorRTError(f"instance {self.name}: cannot bind tensor '{n}': {' | '.join(self.shared.logger.take())}")

    def _pinned(self, table: dict, name: str, nbytes: int) -> int:
        ptr, size = table.get(name, (0, 0))
        if size < nbytes:
            if ptr:
                cuda.free_host(ptr)
            size = max(nbytes, self.capacity.get(name, nbytes))
            ptr = cuda.malloc_host(size)
            table[name] = (ptr, size)
        return ptr

    # -- execution ------------------------------------------------------------------------------------------------

    def run(self, requests) -> list:
        if not self.batching:
            return [self._run_batch([r])[0] for r in requests]
        return self._run_batch(requests)

    def _fail(self, msg: str, code: int = TritonError.INVALID_ARG) -> InferenceResponse:
        return InferenceResponse(error=TritonError(msg, code))

    def _run_batch(self, requests) -> list:
        responses: list = [None] * len(requests)
        arrays: list[dict[str, np.ndarray]] = []
        good: list[int] = []
        ref: dict[str, list[int]] | None = None
        for i, req in enumerate(requests):
            by_name = {t.name(): t for t in req.inputs()}
            problem = None
            got: dict[str, np.ndarray] = {}
            for t in self.inputs:
                n = t["name"]
                tensor = by_name.get(n)
                if tensor is None:
                    problem = f"request has no input '{n}'"
                    break
                if tensor.triton_dtype() != t["datatype"]:
                    problem = f"input '{n}' is {tensor.triton_dtype()}, the plan takes {t['datatype']}"
                    break
                got[n] = tensor.as_numpy()
            if problem is None and self.batching:
                rest = {n: list(a.shape[1:]) for n, a in got.items()}
                if ref is None:
                    ref = rest
                elif rest != ref:
                    problem = f"input shapes {rest} differ from the batch's {ref} beyond the batch dim"
            if problem is not None:
                responses[i] = self._fail(problem)
                continue
            arrays.append(got)
            good.append(i)
        if not good:
            return responses
        rows = [int(next(iter(a.values())).shape[0]) if self.batching else 1 for a in arrays]
        if self.batching:
            shapes = {t["name"]: [sum(rows)] + ref[t["name"]] for t in self.inputs}  # type: ignore[index]
        else:
            shapes = {n: list(a.shape) for n, a in arrays[0].items()}
        p = profiles.select(self.shared.facts["profiles"], self.profile_ids, shapes)
        if p is None:
            msg = profiles.outside_message(self.shared.facts["profiles"], self.profile_ids, shapes)
            for i in good:
                responses[i] = self._fail(msg)
            return responses
        sources = {t["name"]: [_piece(a[t["name"]]) for a in arrays] for t in self.inputs}
        starts = [sum(rows[:k]) for k in range(len(rows))]
        per_request = [(starts[k], rows[k], requests[i].requested_output_names() or [t["name"] for t in self.outputs]) for k, i in enumerate(good)]
        wanted_outputs = {n for _s, _r, names in per_request for n in names}
        views, placed = self.launch(p, shapes, sources, wanted_outputs, per_request)
        del arrays, sources  # the inputs' memory may go back to the host once the copies have landed (they have)
        if placed is not None and placed.seg is not None:
            preplace(placed.seg, placed.off, placed.base)
        for k, i in enumerate(good):
            names = per_request[k][2]
            mine = views[k]
            tensors = [Tensor._wrap(n, mine[n], self.datatype_of[n]) for n in names if n in mine]  # unknown: refused earlier
            responses[i] = InferenceResponse(output_tensors=tensors)
        return responses

    def launch(self, p: int, shapes: dict[str, list[int]], sources: dict, wanted: set, per_request: list, views: bool = True):
        """Runs one batch whose inputs are ``sources`` (per input, the (address, bytes) of each request's piece, in
        order) under the device policy; returns per request {output: view of its rows} (valid: the wait returned)
        and the transport block the outputs were copied into (``outputs.Placed``), or None where they were staged."""
        lock = self.shared.device_lock if self.o.get("policy", "DEVICE_BLOCKING") == "DEVICE_BLOCKING" else None
        tw = trace.now() if trace.enabled() else 0
        if lock is not None:
            lock.acquire()
        try:
            t0 = trace.now() if tw else 0
            out = self._gpu(p, shapes, sources, wanted, per_request, views)
            if t0:
                trace.record("batch", instance=self.name, tw=tw, t0=t0, t1=trace.now(), phases=self._last_phases, requests=len(per_request), rows=sum(r for _s, r, _n in per_request), profile=p, shapes=shapes, copies=self._last_copies, out_copies=self._last_out_copies, graph=self._last_graph, wire=not views)
        finally:
            if lock is not None:
                lock.release()
        return out

    def _segment_of(self, address: int):
        """(base, size) of the host shared-memory segment holding ``address`` (the transport maps each once and
        keeps it for the process's life), or None for memory elsewhere."""
        host = STATE.host
        maps = getattr(host, "_maps", {}) if host is not None else {}
        for entry in list(maps.values()):
            base, size = entry[1], entry[2]
            if base <= address < base + size:
                return base, size
        return None

    def _copy_in(self, name: str, pieces: list[tuple[int, int]]) -> int:
        """Copies one input's pieces ((address, bytes) per request, in order) to its device buffer; the copies issued."""
        dst = self.device_buffers[name]
        total = sum(n for _a, n in pieces)
        if total > self.capacity[name]:
            raise TensorRTError(f"input '{name}' needs {total} bytes, the buffer holds {self.capacity[name]}")
        threshold = int(self.o.get("gather_threshold", 0))
        if threshold > 0 and len(pieces) >= threshold:
            ptr = self._pinned(self.gather, name, total)
            off = 0
            for src, n in pieces:
                ctypes.memmove(ptr + off, src, n)
                off += n
            cuda.copy_htod(dst, ptr, total, self.stream)
            return 1
        runs: list[list[int]] = []  # [src, nbytes]
        seg = None  # the segment of the previous piece: a batch's pieces mostly share one, looked up once
        coalesce = self.o.get("coalesce")
        for src, n in pieces:
            if seg is None or not seg[0] <= src < seg[0] + seg[1]:
                seg = self._segment_of(src)
                if seg is not None:
                    self.shared.pinning.ensure(*seg)
            if coalesce and runs and runs[-1][0] + runs[-1][1] == src:
                runs[-1][1] += n
            else:
                runs.append([src, n])
        off = 0
        for src, n in runs:
            if n:
                cuda.copy_htod(dst + off, src, n, self.stream)
            off += n
        return len(runs)

    def _gpu(self, p: int, shapes: dict[str, list[int]], sources: dict, wanted: set, per_request: list, views: bool):
        sh = self.shared
        ctx = self.contexts[p]
        cuda.set_device(sh.device)
        # Traced only: when the copies in were queued, the run enqueued, the copies out queued (where the host's
        # time inside a batch goes; the GPU's own time is the rest until the wait returns).
        stamp = trace.now if trace.enabled() else None
        key = graphs.key(shapes)
        graph = self.graphs.get((p, key)) if self.graphs else None
        if graph is not None:
            all_out = graph.out_shapes
        else:
            all_out = self._set_shapes(p, ctx, key, shapes)
        self._last_copies = {t["name"]: self._copy_in(t["name"], sources[t["name"]]) for t in self.inputs}
        t_in = stamp() if stamp else 0
        out_shapes = {n: s for n, s in all_out.items() if n in wanted}
        self._last_graph = graph is not None
        if graph is not None:
            cuda.graph_launch(graph.exec, self.stream)
        elif not ctx.execute_async_v3(int(self.stream)):
            raise TensorRTError(f"execute_async_v3 failed: {' | '.join(sh.logger.take()) or 'TensorRT logged no reason'}")
        t_run = stamp() if stamp else 0
        if self.computed is not None:
            cuda.event_record(self.computed, self.stream)
            cuda.stream_wait(self.out_stream, self.computed)
        placed = outputs.copy_out(self, out_shapes, per_request, views)
        if placed is not None:
            views, self._last_out_copies = placed.views, placed.copies
        else:
            views, self._last_out_copies = self._staged_out(out_shapes, per_request)
        t_out = stamp() if stamp else 0
        try:
            cuda.event_record(self.done, self.out_stream)
            if self.o.get("busy_wait_events"):
                while not cuda.event_done(self.done):
                    time.sleep(0)
            else:
                cuda.event_sync(self.done)
        except BaseException:
            if placed is not None and placed.seg is not None:  # nobody will send it: the arena takes it back
                STATE.arena.free(placed.seg, placed.off)
            raise
        if stamp:
            self._last_phases = {"in": t_in, "run": t_run, "out": t_out, "done": stamp()}
        return views, placed

    def _staged_out(self, out_shapes: dict[str, list[int]], per_request: list) -> tuple[list[dict], int]:
        """No transport block to write into: pinned staging, each request a view of its rows; and the copies."""
        whole = {}
        copies = 0
        for name, shape in out_shapes.items():
            nbytes = _prod(shape) * self.dtypes[name].itemsize
            ptr = self._pinned(self.staging, name, nbytes)
            if nbytes:
                cuda.copy_dtoh(ptr, self.device_buffers[name], nbytes, self.out_stream)
                copies += 1
            whole[name] = _host_view(ptr, nbytes).view(self.dtypes[name]).reshape(shape)
        return [{n: (a[s : s + r] if self.batching else a) for n, a in whole.items()} for s, r, _ in per_request], copies

    def _set_shapes(self, p: int, ctx, key: tuple, shapes: dict[str, list[int]]) -> dict[str, list[int]]:
        """Gives context `p` the batch's input shapes unless it has them already; its output shapes for them."""
        if self._shapes_set.get(p) != key:
            self._shapes_set.pop(p, None)
            self.shared.logger.take()
            for n, s in shapes.items():
                if not ctx.set_input_shape(n, s):
                    raise TensorRTError(f"TensorRT refused shape {s} for input '{n}' (profile {p}): {' | '.join(self.shared.logger.take())}")
            self._shapes_set[p] = key
        outs = self._out_shapes.get((p, key))
        if outs is None:
            outs = {t["name"]: [int(d) for d in ctx.get_tensor_shape(t["name"])] for t in self.outputs}
            if len(self._out_shapes) < 4096:  # bounded: shapes come from requests
                self._out_shapes[(p, key)] = outs
        return outs

    def close(self) -> None:
        try:
            cuda.set_device(self.shared.device)
            cuda.stream_sync(self.stream)
            for g in self.graphs.values():
                cuda.graph_destroy(g.graph, g.exec)
            self.graphs.clear()
            self.contexts.clear()
            for ptr in self.device_buffers.values():
                cuda.free(ptr)
            self.device_buffers.clear()
            for table in (self.staging, self.gather):
                for ptr, _ in table.values():
                    cuda.free_host(ptr)
                table.clear()
            cuda.event_destroy(self.done)
            if self.computed is not None:
                cuda.event_destroy(self.computed)
                cuda.stream_destroy(self.out_stream)
            cuda.stream_destroy(self.stream)
        except cuda.CudaError as e:
            self.log(f"instance {self.name}: releasing GPU resources failed: {e}")
