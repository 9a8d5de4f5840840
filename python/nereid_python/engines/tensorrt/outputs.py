"""A batch's outputs, copied from the instance's device buffers straight into the shared-memory block that carries
the batch's responses to the host: one device-to-host copy per run of bytes that lie back to back both in the
device buffer and in the block (a single-output model whose rows are a multiple of 64 bytes: one copy for the whole
batch; each copy costs the DMA engine a few microseconds, which at 32 requests was a tenth of a BERT batch), into
memory pinned once per segment, instead of a copy into pinned staging and a host copy from
there into the block. The block is laid out exactly as ``write_tensors`` lays out the responses' tensors (requests
in order, each request's outputs in the order it asked for them, 64-byte aligned), and offered to it
(``tensor.preplace``), which then sends it as it is. Where there is no arena (no transport), None: the caller
stages instead."""

from __future__ import annotations

import numpy as np

from nereid_python.runtime import STATE
from nereid_python.shm import ALIGN
from nereid_python.tensor import preplace

from . import gpu as cuda


def _prod(dims) -> int:
    n = 1
    for d in dims:
        n *= int(d)
    return n


def copy_out(inst, out_shapes: dict[str, list[int]], per_request: list[tuple[int, int, list[str]]]):
    """Queues the copies on the instance's output stream; returns, per request, {name: array view of its rows}
    (valid once the stream's work is done) and the number of copies queued, or None where the block cannot be
    used."""
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
    if total == 0:
        return None
    seg, off, view = arena.alloc(total)
    inst.shared.pinning.ensure(*arena.span(seg))
    base = view.ctypes.data
    out: list[dict] = [{} for _ in per_request]
    runs: list[list[int]] = []  # [destination address, source address, bytes]
    for k, name, rel, n, src, shape in layout:
        dst, src_ptr = base + rel, inst.device_buffers[name] + src
        if runs and runs[-1][0] + runs[-1][2] == dst and runs[-1][1] + runs[-1][2] == src_ptr:
            runs[-1][2] += n
        elif n:
            runs.append([dst, src_ptr, n])
        out[k][name] = view[rel : rel + n].view(inst.dtypes[name]).reshape(shape)
    for dst, src_ptr, n in runs:
        cuda.copy_dtoh(dst, src_ptr, n, inst.out_stream)
    preplace(seg, off, base)
    return out, len(runs)
