"""Bare TensorRT, the limit for Nereid's TensorRT backend: one execution context, inputs copied from pinned host
memory, execute_async_v3, outputs copied back, synchronized per run, in closed loops; prints one JSON line.

    python bench/peers/tensorrt_bare.py --plan P --batch B --seconds S
Inputs get the profile-0 opt shape with dim 0 = B (random values of the input's type).
"""

import argparse
import json
import time

import numpy as np

from nereid_python.engines.tensorrt import gpu, loader
from nereid_python.engines.tensorrt.facts import DATATYPES
from nereid_python import datatypes


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--plan", required=True)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seconds", type=float, default=5)
    a = ap.parse_args()
    trt, flavor = loader.import_tensorrt(False)
    gpu.set_device(0)
    logger = loader.make_logger(trt, lambda s, m: None)
    runtime = loader.create_runtime(trt, flavor, logger, False)
    engine = loader.deserialize(trt, runtime, logger, a.plan)
    ctx = engine.create_execution_context()
    stream = gpu.stream_create()
    bufs, host = {}, {}
    for i in range(engine.num_io_tensors):
        n = engine.get_tensor_name(i)
        if engine.get_tensor_mode(n).name == "INPUT":
            shape = list(engine.get_tensor_profile_shape(n, 0)[1])
            shape[0] = a.batch
            ctx.set_input_shape(n, shape)
    for i in range(engine.num_io_tensors):
        n = engine.get_tensor_name(i)
        dt = datatypes.TO_NUMPY[DATATYPES[engine.get_tensor_dtype(n).name]]
        shape = [int(d) for d in ctx.get_tensor_shape(n)]
        nbytes = int(np.prod(shape)) * dt.itemsize
        bufs[n] = gpu.malloc(nbytes)
        host[n] = (gpu.malloc_host(nbytes), nbytes, engine.get_tensor_mode(n).name == "INPUT")
        ctx.set_tensor_address(n, bufs[n])
    lat = []
    end = time.perf_counter() + a.seconds
    while time.perf_counter() < end:
        t0 = time.perf_counter()
        for n, (ptr, nbytes, is_in) in host.items():
            if is_in:
                gpu.copy_htod(bufs[n], ptr, nbytes, stream)
        ctx.execute_async_v3(int(stream))
        for n, (ptr, nbytes, is_in) in host.items():
            if not is_in:
                gpu.copy_dtoh(ptr, bufs[n], nbytes, stream)
        gpu.stream_sync(stream)
        lat.append(time.perf_counter() - t0)
    lat.sort()
    print(json.dumps({"runs": len(lat), "samples_per_s": len(lat) * a.batch / a.seconds, "p50_ms": lat[len(lat) // 2] * 1e3, "p99_ms": lat[int(len(lat) * 0.99)] * 1e3}))


if __name__ == "__main__":
    main()
