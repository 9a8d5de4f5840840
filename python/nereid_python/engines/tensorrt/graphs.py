"""CUDA graphs of one instance's runs: captured at load for the batch shapes a config names (``graph_spec``) or, without
specs, for every batch size when the other dims are fixed, and replayed for a batch of exactly those shapes.

``capture`` takes the instance (its contexts, stream, facts and log) and returns the graphs by (profile, shapes key).
"""

from __future__ import annotations

from . import gpu as cuda, profiles
from .loader import TensorRTError


class Graph:
    __slots__ = ("graph", "exec", "out_shapes")

    def __init__(self, graph, graph_exec, out_shapes: dict[str, list[int]]) -> None:
        self.graph = graph
        self.exec = graph_exec
        # Output shapes at capture: a replay never asks the context (its shapes may have moved on since).
        self.out_shapes = out_shapes


def key(shapes: dict[str, list[int]]) -> tuple:
    """Hashable input shapes, the same for the same shapes in any order."""
    return tuple((n, tuple(s)) for n, s in sorted(shapes.items()))


def capture(inst, specs: list[dict]) -> dict[tuple, Graph]:
    """One graph per spec (batch size + input shapes), or, without specs, per batch size 1..max_batch_size
    when every non-batch dim is fixed in the profile (a graph replays fixed shapes only)."""
    wanted: list[dict[str, list[int]]] = []
    made: dict[tuple, Graph] = {}
    p0 = inst.profile_ids[0]
    if specs:
        for s in specs:
            shapes = {}
            for t in inst.inputs:
                dims = s.get("inputs", {}).get(t["name"])
                if dims is None:
                    rng = inst.shared.facts["profiles"][p0]["inputs"][t["name"]]
                    if rng["min"][1 if inst.batching else 0 :] != rng["max"][1 if inst.batching else 0 :]:
                        raise TensorRTError(f"graph_spec (batch_size {s.get('batch_size', 0)}) gives no shape for input '{t['name']}', whose dims are dynamic", "INVALID_ARG")
                    dims = rng["max"][1:] if inst.batching else rng["max"]
                shapes[t["name"]] = ([int(s.get("batch_size", 0))] if inst.batching else []) + [int(d) for d in dims]
            wanted.append(shapes)
    else:
        fixed = all(
            r["min"][1:] == r["max"][1:] for r in (inst.shared.facts["profiles"][p0]["inputs"][t["name"]] for t in inst.inputs)
        )
        if not fixed:
            inst.log(f"instance {inst.name}: optimization.cuda.graphs is on without graph_spec, but inputs have dynamic non-batch dims: no graph captured (add graph_spec entries)")
            return {}
        rows = range(1, inst.max_batch_size + 1) if inst.batching else [0]
        for b in rows:
            shapes = {t["name"]: ([b] if inst.batching else []) + inst.shared.facts["profiles"][p0]["inputs"][t["name"]]["max"][1 if inst.batching else 0 :] for t in inst.inputs}
            wanted.append(shapes)
    for shapes in wanted:
        p = profiles.select(inst.shared.facts["profiles"], inst.profile_ids, shapes)
        if p is None:
            raise TensorRTError(f"graph_spec shapes {shapes} fit none of this instance's profiles {inst.profile_ids}", "INVALID_ARG")
        ctx = inst.contexts[p]
        for n, s in shapes.items():
            ctx.set_input_shape(n, s)
        # TensorRT needs one plain run with the new shapes before capture (it applies deferred state then).
        if not ctx.execute_async_v3(int(inst.stream)):
            raise TensorRTError(f"instance {inst.name}: warm-up run before graph capture failed: {' | '.join(inst.shared.logger.take())}")
        cuda.stream_sync(inst.stream)
        cuda.begin_capture(inst.stream)
        ok = ctx.execute_async_v3(int(inst.stream))
        graph = cuda.end_capture(inst.stream)
        if not ok:
            raise TensorRTError(f"instance {inst.name}: graph capture failed: {' | '.join(inst.shared.logger.take())}")
        outs = {t["name"]: [int(d) for d in ctx.get_tensor_shape(t["name"])] for t in inst.outputs}
        made[(p, key(shapes))] = Graph(graph, cuda.graph_instantiate(graph), outs)
    inst.log(f"instance {inst.name}: captured {len(made)} CUDA graph(s)")
    return made
