"""The TensorRT engine's fast path: a batch run straight from the host's ``exec`` message, without the python
backend's request and response objects.

Why: the general path builds, per request, an ``InferenceRequest`` with a ``Tensor`` and a numpy view per input,
checks each, and answers with an ``InferenceResponse`` whose tensors ``write_tensors`` lays out again. For BERT at
concurrency 64 (16–32 single-row requests a batch) that Python was most of the engine process's time between two
batches, and two instances of one process share one interpreter lock. Here a request is its descriptors: integers
are compared, the inputs' addresses come from their offsets in the host block, and the answers are described from
the output layout the engine copied into (``outputs.descriptors``).

Only the plain case runs here: every request has every input of the plan, in host memory, with the plan's
datatype, C-contiguous, the same shape beyond the batch dimension, and a batch inside one of the instance's
profiles. Anything else (a bad request, client CUDA memory, a shape outside the profiles, an instance without
batching) returns None before the GPU is touched, and the general path answers it with its per-request errors.
``NEREID_TRT_WIRE=0`` sends every batch down the general path (the tests compare the two; an escape hatch).
"""

from __future__ import annotations

import os

from nereid_python.runtime import STATE

from . import outputs, profiles


_ON = os.environ.get("NEREID_TRT_WIRE", "1") != "0"


class _Batch:
    __slots__ = ("shapes", "sources", "per_request", "wanted", "profile")

    def __init__(self, shapes, sources, per_request, wanted, profile) -> None:
        self.shapes, self.sources, self.per_request, self.wanted, self.profile = shapes, sources, per_request, wanted, profile


def plan(inst, reqs: list[dict], base: int) -> _Batch | None:
    """The batch ``reqs`` describes (its inputs at ``base`` + their offsets in the host block), or None where the
    general path must run it."""
    if not _ON or not inst.batching or STATE.arena is None or not reqs:
        return None
    names = [t["name"] for t in inst.inputs]
    all_outputs = [t["name"] for t in inst.outputs]
    known = set(all_outputs)
    sources: dict[str, list[tuple[int, int]]] = {n: [] for n in names}
    per_request = []
    wanted: set = set()
    ref: dict[str, list[int]] = {}  # each input's shape beyond the batch dimension, from the first request
    start = 0
    for r in reqs:
        if r.get("do"):
            return None
        by_name = {d[0]: d for d in r["i"]}
        rows = -1
        for t in inst.inputs:
            d = by_name.get(t["name"])
            if d is None or d[1] != t["datatype"] or d[3] < 0 or d[4] <= 0:
                return None
            shape = d[2]
            if not shape:
                return None
            if rows < 0:
                rows = shape[0]
            elif shape[0] != rows:
                return None
            n = rows * inst.dtypes[t["name"]].itemsize
            for dim in shape[1:]:
                n *= dim
            if n != d[4]:
                return None
            prev = ref.get(t["name"])
            if prev is None:
                ref[t["name"]] = shape[1:]
            elif prev != shape[1:]:
                return None
            sources[t["name"]].append((base + d[3], d[4]))
        asked = r.get("o") or all_outputs
        if not known.issuperset(asked):
            return None
        wanted.update(asked)
        per_request.append((start, rows, asked))
        start += rows
    shapes = {n: [start, *ref[n]] for n in names}
    p = profiles.select(inst.shared.facts["profiles"], inst.profile_ids, shapes)
    if p is None:
        return None
    return _Batch(shapes, sources, per_request, wanted, p)


def run(inst, batch: _Batch) -> tuple[list | None, list[dict]]:
    """Runs a planned batch; returns the block of its answers and, per request, its wire entry (``{"o": descs}``)."""
    _views, placed = inst.launch(batch.profile, batch.shapes, batch.sources, batch.wanted, batch.per_request, views=False)
    descs = outputs.descriptors(placed, inst.datatype_of, len(batch.per_request))
    blk = [placed.seg, placed.off] if placed.seg is not None else None
    return blk, [{"o": d} for d in descs]
