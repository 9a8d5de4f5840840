"""Fails (exit 1, one line per problem) when the TensorRT/CUDA test double offers anything the real API lacks.

    PYTHONPATH=test/fixtures/tensorrt/double python scripts/tensorrt/check_double.py \
        tensorrt=test/fixtures/tensorrt/api-11.2.json tensorrt_lean=test/fixtures/tensorrt/api-11.2.json \
        cuda.bindings.runtime=test/fixtures/tensorrt/cuda-runtime-api-13.json

Rules: every public name of the double exists in the real module with the same kind; an enum's members exist
there; a class's members exist there with the same kind (a property the double lets you set must be settable in
the real one); a function's or method's parameters are, in order, a prefix of one real overload's (the double may
leave out trailing ones, never add or rename any).
"""

from __future__ import annotations

import importlib
import json
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from dump_api import dump  # noqa: E402


def _params(sig: dict) -> list[str]:
    return [p for p in sig["params"] if p not in ("self", "cls")]


def _sig_ok(double: list[dict], real: list[dict]) -> bool:
    for d in double:
        dp = _params(d)
        if not any(_params(r)[: len(dp)] == dp for r in real):
            return False
    return True


def compare(module: str, fixture: dict) -> list[str]:
    problems = []
    mine = dump(importlib.import_module(module))["names"]
    real = fixture["names"]
    for name, d in mine.items():
        r = real.get(name)
        where = f"{module}.{name}"
        if r is None:
            problems.append(f"{where}: not in the real API")
            continue
        if d["kind"] != r["kind"]:
            problems.append(f"{where}: a {d['kind']} in the double, a {r['kind']} in the real API")
            continue
        if d["kind"] == "enum":
            extra = sorted(set(d["members"]) - set(r["members"]))
            if extra:
                problems.append(f"{where}: members {extra} are not in the real enum")
        elif d["kind"] == "function":
            if not _sig_ok(d["signatures"], r["signatures"]):
                problems.append(f"{where}: parameters {[_params(s) for s in d['signatures']]} match no real overload {[_params(s) for s in r['signatures']]}")
        elif d["kind"] == "class":
            for m, dm in d["members"].items():
                rm = r["members"].get(m)
                if rm is None:
                    problems.append(f"{where}.{m}: not in the real class")
                    continue
                if dm["kind"] == "property":
                    if rm["kind"] not in ("property", "attribute"):
                        problems.append(f"{where}.{m}: a property in the double, a {rm['kind']} in the real class")
                    elif dm.get("writable") and rm["kind"] == "property" and not rm.get("writable"):
                        problems.append(f"{where}.{m}: settable in the double, read-only in the real class")
                elif dm["kind"] in ("method", "static"):
                    if rm["kind"] not in ("method", "static"):
                        problems.append(f"{where}.{m}: a method in the double, a {rm['kind']} in the real class")
                    elif m != "__init__" or rm["signatures"]:
                        if not _sig_ok(dm["signatures"], rm["signatures"]):
                            problems.append(f"{where}.{m}: parameters {[_params(s) for s in dm['signatures']]} match no real overload {[_params(s) for s in rm['signatures']]}")
    return problems


def main() -> None:
    problems = []
    for arg in sys.argv[1:]:
        module, path = arg.split("=", 1)
        with open(path) as f:
            problems += compare(module, json.load(f))
    for p in problems:
        print(p)
    sys.exit(1 if problems else 0)


if __name__ == "__main__":
    main()
