"""Bare TensorRT, the limit for Nereid's TensorRT backend: one execution context, inputs copied from pinned host
memory, execute_async_v3, outputs copied back, synchronized per run, in closed loops; prints one JSON line.

    python bench/peers/tensorrt_bare.py --plan P --batch B[,B2,...] --seconds S
Inputs get the profile-0 opt shape with dim 0 = B, zero-filled (valid token ids for a text model); one JSON line
per batch size, each measured after a warm-up of a tenth of S.
"""

import argparse
import ctypes
import json
import time

import numpy as np

from nereid_python.engines.tensorrt import gpu, loader
from nereid_python.engines.tensorrt.facts import DATATYPES
from nereid_python import datatypes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", required=True)
    ap.add_argument("--batch", default="1")
    ap.add_argument("--seconds", type=float, default=5)
    # What a server pays that a fixed-shape loop does not: the input shapes set again before every run (the same
    # shapes, or alternating batch sizes as a dynamic batcher forms them).
    ap.add_argument("--reset-shapes", choices=["no", "same", "alternate"], default="no")
    a = ap.parse_args()
    trt, flavor = loader.import_tensorrt(False)
    gpu.set_device(0)
    logger = loader.make_logger(trt, lambda s, m: None)
    runtime = loader.create_runtime(trt, flavor, logger, False)
    engine = loader.deserialize(trt, runtime, logger, a.plan)
    ctx = engine.create_execution_context()
    stream = gpu.stream_create()
    for batch in [int(b) for b in str(a.batch).split(",")]:
        print(json.dumps(measure(engine, ctx, stream, batch, a.seconds, a.reset_shapes)), flush=True)


def measure(engine, ctx, stream, batch: int, seconds: float, reset: str = "no") -> dict:
    bufs, host = {}, {}
    shapes = {}
    for i in range(engine.num_io_tensors):
        n = engine.get_tensor_name(i)
        if engine.get_tensor_mode(n).name == "INPUT":
            shape = list(engine.get_tensor_profile_shape(n, 0)[1])
            shape[0] = batch
            shapes[n] = shape
            ctx.set_input_shape(n, shape)
    for i in range(engine.num_io_tensors):
        n = engine.get_tensor_name(i)
        dt = datatypes.TO_NUMPY[DATATYPES[engine.get_tensor_dtype(n).name]]
        shape = [int(d) for d in ctx.get_tensor_shape(n)]
        nbytes = int(np.prod(shape)) * dt.itemsize
        bufs[n] = gpu.malloc(nbytes)
        ptr = gpu.malloc_host(nbytes)
        np.ctypeslib.as_array((ctypes.c_uint8 * max(nbytes, 1)).from_address(ptr))[:] = 0
        host[n] = (ptr, nbytes, engine.get_tensor_mode(n).name == "INPUT")
        ctx.set_tensor_address(n, bufs[n])

    flip = [0]

    def once() -> None:
        if reset != "no":
            flip[0] ^= 1
            for n, shape in shapes.items():
                ctx.set_input_shape(n, [max(1, shape[0] - flip[0]) if reset == "alternate" else shape[0], *shape[1:]])
        for n, (ptr, nbytes, is_in) in host.items():
            if is_in:
                gpu.copy_htod(bufs[n], ptr, nbytes, stream)
        ctx.execute_async_v3(int(stream))
        for n, (ptr, nbytes, is_in) in host.items():
            if not is_in:
                gpu.copy_dtoh(ptr, bufs[n], nbytes, stream)
        gpu.stream_sync(stream)

    warm = time.perf_counter() + seconds / 10
    while time.perf_counter() < warm:
        once()
    lat = []
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        once()
        lat.append(time.perf_counter() - t0)
    for n, (ptr, _, _) in host.items():
        gpu.free_host(ptr)
        gpu.free(bufs[n])
    lat.sort()
    return {"batch": batch, "reset_shapes": reset, "runs": len(lat), "samples_per_s": len(lat) * batch / seconds, "p50_ms": lat[len(lat) // 2] * 1e3, "p99_ms": lat[int(len(lat) * 0.99)] * 1e3}

if __name__ == "__main__":
    main()
