"""A batch's outputs, copied from the instance's device buffers straight into the shared-memory block that carries
the batch's responses to the host: one device-to-host copy per run of bytes that lie back to back both in the
device buffer and in the block (a single-output model whose rows are a multiple of 64 bytes: one copy for the whole
batch; each copy costs the DMA engine a few microseconds, which at 32 requests was a tenth of a BERT batch), into
memory pinned once per segment, instead of a copy into pinned staging and a host copy from
there into the block. The block is laid out exactly as ``write_tensors`` lays out the responses' tensors (requests
in order, each request's outputs in the order it asked for them, 64-byte aligned), and offered to it
(``tensor.preplace``), which then sends it as it is, or described straight from the layout (``descriptors``, the
wire path). Where there is no arena (no transport), None: the caller stages instead."""

from __future__ import annotations

import numpy as np

from nereid_python.runtime import STATE
from nereid_python.shm import ALIGN

from . import gpu as cuda


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


class Placed:
    """A batch's outputs in one transport block: where the block is, what lies where (per output of each request:
    request k, name, offset in the block, bytes, source offset, shape), per request {name: view of its rows} (valid
    once the stream's work is done), and the copies queued."""

    __slots__ = ("seg", "off", "base", "layout", "views", "copies")

    def __init__(self, seg: int | None, off: int, base: int, layout: list, views: list[dict], copies: int) -> None:
        self.seg, self.off, self.base, self.layout, self.views, self.copies = seg, off, base, layout, views, copies


def descriptors(placed: Placed, datatype_of: dict[str, str], n_requests: int) -> list[list]:
    """Per request, the wire descriptors of its outputs ([name, datatype, shape, offset, bytes]) as
    ``write_tensors`` would write them for this layout."""
    out: list[list] = [[] for _ in range(n_requests)]
    for k, name, rel, n, _src, shape in placed.layout:
        out[k].append([name, datatype_of[name], shape, rel if n else 0, n])
    return out


def copy_out(inst, out_shapes: dict[str, list[int]], per_request: list[tuple[int, int, list[str]]], views: bool = True) -> Placed | None:
    """Queues the copies on the instance's output stream into a new transport block (``seg`` None when every
    output is empty: no block), or None where there is no transport. ``views``: also view each request's rows (the
    wire path describes them instead)."""
    arena = STATE.arena
    if arena is None:
        return None
    layout = []  # (request k, name, rel, nbytes, source offset, shape)
    total = 0
    for k, (start, rows, names) in enumerate(per_request):
        for name in names:
            shape = out_shapes.get(name)
            if shape is None:
                continue
            row_bytes = _prod(shape[1:]) * inst.dtypes[name].itemsize if inst.batching else 0
            n = rows * row_bytes if inst.batching else _prod(shape) * inst.dtypes[name].itemsize
            mine = [rows, *shape[1:]] if inst.batching else shape
            layout.append((k, name, total, n, start * row_bytes, mine))
            total += (n + ALIGN - 1) & ~(ALIGN - 1)
    out: list[dict] = [{} for _ in per_request]
    if total == 0:
        if views:
            for k, name, _rel, _n, _src, shape in layout:
                out[k][name] = np.empty(shape, inst.dtypes[name])
        return Placed(None, 0, 0, layout, out, 0)
    seg, off, view = arena.alloc(total)
    inst.shared.pinning.ensure(*arena.span(seg))
    base = view.ctypes.data
    runs: list[list[int]] = []  # [destination address, source address, bytes]
    for k, name, rel, n, src, shape in layout:
        dst, src_ptr = base + rel, inst.device_buffers[name] + src
        if runs and runs[-1][0] + runs[-1][2] == dst and runs[-1][1] + runs[-1][2] == src_ptr:
            runs[-1][2] += n
        elif n:
            runs.append([dst, src_ptr, n])
        if views:
            out[k][name] = view[rel : rel + n].view(inst.dtypes[name]).reshape(shape)
    for dst, src_ptr, n in runs:
        cuda.copy_dtoh(dst, src_ptr, n, inst.out_stream)
    return Placed(seg, off, base, layout, out, len(runs))
