"""``python -m nereid_python.engines.tensorrt.probe --plan P --device N --options JSON``: deserializes a plan in a
short-lived process (a TensorRT engine needs a GPU even to be read) and prints one JSON line, ``{"facts": ...}`` or
``{"error": {"c": CODE, "m": MESSAGE}}``. The host's auto-complete reads it (src/backends/tensorrt/inspect.ts).
"""

from __future__ import annotations

import argparse
import json
import sys

from .oneshot import answer_once


def main() -> None:
    ap = argparse.ArgumentParser(prog="nereid_python.engines.tensorrt.probe")
    ap.add_argument("--plan", required=True)
    ap.add_argument("--device", type=int, default=0)
    ap.add_argument("--options", default="{}")
    args = ap.parse_args()
    answer_once(lambda: _probe(args))


def _probe(args) -> dict:
    from . import gpu as cuda, state

    def forward(severity: str, msg: str) -> None:
        if severity in ("ERROR", "INTERNAL_ERROR", "WARNING"):
            print(f"[TensorRT] {severity}: {msg}", file=sys.stderr)

    shared = state.open_engine(args.plan, args.device, json.loads(args.options), forward)
    shared.facts["device_name"] = cuda.device_name(args.device)
    return {"facts": shared.facts}


if __name__ == "__main__":
    main()
