"""``python -m nereid_python.engines.tensorrt.buildinfo --device N``: what a plan built here is tied to, as one JSON
line: ``{"trt_version", "device_name"}`` (the name carries the compute capability) or ``{"error": {"c", "m"}}``.
The host's plan cache (src/backends/tensorrt/plan-cache.ts) puts both into an entry's key: a plan runs only on the
TensorRT version and the GPU model it was built for.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> None:
    ap = argparse.ArgumentParser(prog="nereid_python.engines.tensorrt.buildinfo")
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args()
    out = sys.stdout
    sys.stdout = sys.stderr
    from . import gpu, loader

    try:
        trt, flavor = loader.import_tensorrt(False)
        if flavor != "full":
            raise loader.TensorRTError("only TensorRT's lean runtime is installed: it cannot build plans", "UNAVAILABLE")
        gpu.set_device(args.device)
        answer = {"trt_version": trt.__version__, "device_name": gpu.device_name(args.device)}
    except loader.TensorRTError as e:
        answer = {"error": {"c": e.code, "m": str(e)}}
    except gpu.CudaError as e:
        answer = {"error": {"c": "UNAVAILABLE", "m": str(e)}}
    out.write(json.dumps(answer) + "\n")
    out.flush()
    os._exit(0)


if __name__ == "__main__":
    main()
