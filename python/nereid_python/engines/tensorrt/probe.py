"""``python -m nereid_python.engines.tensorrt.probe --plan P --device N --options JSON``: deserializes a plan in a
short-lived process (a TensorRT engine needs a GPU even to be read) and prints one JSON line, ``{"facts": ...}`` or
``{"error": {"c": CODE, "m": MESSAGE}}``. The host's auto-complete reads it (src/backends/tensorrt/inspect.ts).
"""

from __future__ import annotations

import argparse
import json
import os
import sys


def main() -> None:
    ap = argparse.ArgumentParser(prog="nereid_python.engines.tensorrt.probe")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--options", default="{}")
    args = ap.parse_args()
    out = sys.stdout
    # TensorRT and CUDA may print to fd 1; the answer must be the only thing on it.
    sys.stdout = sys.stderr
    from . import gpu as cuda, loader, state

    def forward(severity: str, msg: str) -> None:
        if severity in ("ERROR", "INTERNAL_ERROR", "WARNING"):
            print(f"[TensorRT] {severity}: {msg}", file=sys.stderr)

    try:
        shared = state.open_engine(args.plan, args.device, json.loads(args.options), forward)
        shared.facts["device_name"] = cuda.device_name(args.device)
        answer = {"facts": shared.facts}
    except loader.TensorRTError as e:
        answer = {"error": {"c": e.code, "m": str(e)}}
    except cuda.CudaError as e:
        answer = {"error": {"c": "UNAVAILABLE", "m": str(e)}}
    out.write(json.dumps(answer) + "\n")
    out.flush()
    # Skip interpreter teardown: TensorRT objects released at exit after a failed runtime can crash the process.
    os._exit(0)


if __name__ == "__main__":
    main()
