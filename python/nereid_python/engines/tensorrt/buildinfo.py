"""``python -m nereid_python.engines.tensorrt.buildinfo --device N``: what a plan built here is tied to, as one JSON
line: ``{"trt_version", "device_name"}`` (the name carries the compute capability) or ``{"error": {"c", "m"}}``.
The host's plan cache (src/backends/tensorrt/plan-cache.ts) puts both into an entry's key: a plan runs only on the
TensorRT version and the GPU model it was built for.
"""

from __future__ import annotations

import argparse

from .oneshot import answer_once


def main() -> None:
    ap = argparse.ArgumentParser(prog="nereid_python.engines.tensorrt.buildinfo")
    ap.add_argument("--device", type=int, default=0)
    args = ap.parse_args()
    answer_once(lambda: _buildinfo(args.device))


def _buildinfo(device: int) -> dict:
    from . import gpu, loader

    trt, flavor = loader.import_tensorrt(False)
    if flavor != "full":
        raise loader.TensorRTError("only TensorRT's lean runtime is installed: it cannot build plans", "UNAVAILABLE")
    gpu.set_device(device)
    return {"trt_version": trt.__version__, "device_name": gpu.device_name(device)}


if __name__ == "__main__":
    main()
