"""``python -m nereid_python.engines.tensorrt.check [--plan PATH]``: what ``nereid tensorrt check`` reports, as one
JSON line on stdout: which TensorRT imports (full or lean runtime), the GPUs CUDA sees, whether a runtime can be
created on GPU 0, whether the builder works there (a tiny plan, ``y = x + x`` on 4 floats, built and run, its
answer checked), and, with ``--plan``, whether that plan deserializes.

Why build a plan at all: a TensorRT can import, create a runtime and still be unable to build on this GPU (the
builder resource for its architecture is missing, as in Maven Central's later redistributables); only a build
says so. The answer is checked because a build that "works" but computes garbage is worse than a refusal.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import sys
import time


def _tiny_plan(trt, logger) -> tuple[bytes | None, str]:
    from . import loader

    builder, errors = loader.create_builder(trt, logger)
    if builder is None:
        return None, " | ".join(errors) or "TensorRT could not create its builder and logged no reason"
    flags = 0
    if hasattr(trt.NetworkDefinitionCreationFlag, "EXPLICIT_BATCH"):
        flags = 1 << int(trt.NetworkDefinitionCreationFlag.EXPLICIT_BATCH)
    network = builder.create_network(flags)
    x = network.add_input("x", trt.float32, (1, 4))
    y = network.add_elementwise(x, x, trt.ElementWiseOperation.SUM).get_output(0)
    network.mark_output(y)
    config = builder.create_builder_config()
    plan = builder.build_serialized_network(network, config)
    if plan is None:
        return None, " | ".join(logger.take()) or "build_serialized_network returned nothing and logged no reason"
    return bytes(plan), ""


def _run_tiny(trt, runtime, logger, data: bytes) -> str | None:
    """None when the plan computes 2x; else what went wrong."""
    from . import gpu

    engine = runtime.deserialize_cuda_engine(data)
    if engine is None:
        return "the tiny plan does not deserialize: " + " | ".join(logger.take())
    ctx = engine.create_execution_context()
    names = [engine.get_tensor_name(i) for i in range(engine.num_io_tensors)]
    inp = next(n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.INPUT)
    out = next(n for n in names if engine.get_tensor_mode(n) == trt.TensorIOMode.OUTPUT)
    host_in = (ctypes.c_float * 4)(1.0, 2.0, 3.0, 4.0)
    host_out = (ctypes.c_float * 4)()
    stream = gpu.stream_create()
    d_in, d_out = gpu.malloc(16), gpu.malloc(16)
    try:
        ctx.set_input_shape(inp, (1, 4))
        ctx.set_tensor_address(inp, d_in)
        ctx.set_tensor_address(out, d_out)
        gpu.copy_htod(d_in, ctypes.addressof(host_in), 16, stream)
        if not ctx.execute_async_v3(int(stream)):
            return "execute_async_v3 failed: " + " | ".join(logger.take())
        gpu.copy_dtoh(ctypes.addressof(host_out), d_out, 16, stream)
        gpu.stream_sync(stream)
    finally:
        gpu.free(d_in)
        gpu.free(d_out)
        gpu.stream_destroy(stream)
    got = list(host_out)
    return None if got == [2.0, 4.0, 6.0, 8.0] else f"the tiny plan computed {got} for 2 * [1, 2, 3, 4]"


def check(plan_path: str | None) -> dict:
    from . import gpu, loader

    r: dict = {}
    trt = None
    try:
        trt, r["flavor"] = loader.import_tensorrt(version_compatible=True)
        r["tensorrt"] = trt.__version__
    except loader.TensorRTError as e:
        r["import_error"] = str(e)
    try:
        n = gpu.device_count()
        r["gpus"] = [gpu.device_name(i) for i in range(n)]
    except Exception as e:  # noqa: BLE001 - reported, not raised
        r["cuda_error"] = str(e)
    if trt is None or not r.get("gpus"):
        return r
    logger = loader.make_logger(trt, lambda s, m: None)
    try:
        gpu.set_device(0)
        runtime = loader.create_runtime(trt, r["flavor"], logger, True)
    except Exception as e:  # noqa: BLE001
        r["runtime_error"] = str(e)
        return r
    if r["flavor"] == "full":
        t0 = time.monotonic()
        data, why = _tiny_plan(trt, logger)
        if data is None:
            r["builder"] = {"ok": False, "message": why}
        else:
            wrong = _run_tiny(trt, runtime, logger, data)
            took = time.monotonic() - t0
            r["builder"] = (
                {"ok": True, "message": f"built a {len(data)}-byte plan (y = x + x) in {took:.1f} s and ran it: the answer is right"}
                if wrong is None
                else {"ok": False, "message": wrong}
            )
    if plan_path:
        try:
            eng = loader.deserialize(trt, runtime, logger, plan_path)
            r["plan"] = {"ok": True, "message": f"deserialized: {eng.num_io_tensors} I/O tensors, {eng.num_optimization_profiles} profile(s)"}
        except loader.TensorRTError as e:
            r["plan"] = {"ok": False, "message": str(e)}
    return r


def main() -> None:
    ap = argparse.ArgumentParser(prog="nereid_python.engines.tensorrt.check")
    ap.add_argument("--plan")
    args = ap.parse_args()
    out = sys.stdout
    sys.stdout = sys.stderr  # TensorRT and CUDA libraries may print; the answer is the last stdout line
    try:
        answer = check(args.plan)
    except Exception as e:  # noqa: BLE001 - whatever happened, the command gets an answer it can print
        answer = {"import_error": f"the check itself failed: {type(e).__name__}: {e}"}
    out.write(json.dumps(answer) + "\n")
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
