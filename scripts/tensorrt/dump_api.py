"""Dumps the public surface of a TensorRT Python module (names, kinds, signatures, enum members) as JSON.

Run against the real bindings to write the committed fixture (test/fixtures/tensorrt/api-<version>.json), and by
the tests against the test double, to fail when the double offers anything the real API lacks:

    python scripts/tensorrt/dump_api.py [--module tensorrt] > api.json

The real bindings are pybind11 objects: a function's signature is the first line of its docstring
(``name(self: tensorrt.X, a: int) -> bool``; overloads are numbered), a property's type is its getter's. Module
paths are normalized to ``tensorrt.`` (NVIDIA's wheels name it ``tensorrt_bindings.tensorrt`` or ``tensorrt.tensorrt``).
"""

from __future__ import annotations

import argparse
import enum
import importlib
import inspect
import json
import re
import sys

_SIG = re.compile(r"^(?:\d+\. )?([A-Za-z_][A-Za-z0-9_]*)\((.*)\)(?: -> (.+))?$")
_MODULE_PATHS = re.compile(r"\btensorrt(?:_bindings|_lean|_dispatch)?(?:\.tensorrt(?:_lean|_dispatch)?)?\.")


def _norm(text: str) -> str:
    return _MODULE_PATHS.sub("tensorrt.", text)


def _split_params(params: str) -> list[str]:
    """Parameter names of a pybind11 signature (``self`` kept), commas inside brackets ignored."""
    names, depth, cur = [], 0, ""
    for ch in params:
        if ch in "[(<{":
            depth += 1
        elif ch in "])>}":
            depth -= 1
        if ch == "," and depth == 0:
            names.append(cur)
            cur = ""
        else:
            cur += ch
    if cur.strip():
        names.append(cur)
    out = []
    for p in names:
        p = p.strip()
        if p in ("*", "/"):
            continue
        # ``name: type = default`` (pybind11) or ``size_t name`` (cuda-bindings' Cython docstrings)
        out.append(p.split(":")[0].split("=")[0].strip().split()[-1].lstrip("*"))
    return out


def _signatures(obj, name: str) -> list[dict]:
    """Every overload of a pybind11 function as {params, text}; a plain Python function through inspect."""
    doc = getattr(obj, "__doc__", None) or ""
    sigs = []
    for line in doc.splitlines():
        m = _SIG.match(line.strip())
        if m and m.group(1) == name:
            text = re.sub(r"^\d+\. ", "", _norm(line.strip()))
            sigs.append({"params": _split_params(m.group(2)), "text": text})
    if len(sigs) > 1:  # pybind11 overloads: drop the generic ``name(*args, **kwargs)`` header line
        sigs = [s for s in sigs if s["params"] != ["args", "kwargs"]]
    if sigs:
        return sigs
    try:
        sig = inspect.signature(obj)
    except (TypeError, ValueError):
        return []
    params = [p.name for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
    return [{"params": params, "text": f"{name}{sig}"}]


def _is_enum(cls) -> bool:
    """A Python enum, or a pybind11 enum (a class whose ``__members__`` dict holds instances of itself)."""
    members = getattr(cls, "__members__", None)
    if members is None:
        return False
    if issubclass(cls, enum.Enum):
        return True
    return isinstance(members, dict) and all(isinstance(v, cls) for v in members.values())


def _members(cls) -> dict:
    out = {}
    for n in sorted(dir(cls)):
        if n.startswith("_") and n != "__init__":
            continue
        try:
            raw = inspect.getattr_static(cls, n)
        except AttributeError:
            continue
        if n == "__init__" and raw is object.__init__:
            continue
        if inspect.isclass(raw):
            out[n] = {"kind": "enum" if _is_enum(raw) else "class"}
        elif isinstance(raw, property):
            out[n] = {"kind": "property", "writable": raw.fset is not None}
        elif isinstance(raw, (staticmethod, classmethod)):
            out[n] = {"kind": "static", "signatures": _signatures(getattr(cls, n), n)}
        elif callable(raw):
            out[n] = {"kind": "method", "signatures": _signatures(raw, n)}
        elif type(raw).__name__ in ("property", "pybind11_static_property", "getset_descriptor"):
            out[n] = {"kind": "property", "writable": True}
        else:
            out[n] = {"kind": "attribute"}
    return out


def dump(module) -> dict:
    version = getattr(module, "__version__", None)
    if version is None and "." in module.__name__:
        version = getattr(importlib.import_module(module.__name__.rsplit(".", 1)[0]), "__version__", None)
    api: dict = {"module": module.__name__, "version": version or "?", "names": {}}
    for n in sorted(dir(module)):
        if n.startswith("_"):
            continue
        obj = getattr(module, n)
        if inspect.ismodule(obj):
            continue
        if inspect.isclass(obj):
            if _is_enum(obj):
                api["names"][n] = {"kind": "enum", "members": sorted(obj.__members__)}
            else:
                bases = [b.__name__ for b in obj.__mro__[1:] if b.__module__ != "builtins" and "pybind11" not in b.__module__]
                api["names"][n] = {"kind": "class", "bases": bases, "members": _members(obj)}
        elif callable(obj):
            api["names"][n] = {"kind": "function", "signatures": _signatures(obj, n)}
        else:
            api["names"][n] = {"kind": "value", "type": type(obj).__name__}
    return api


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--module", default="tensorrt")
    args = ap.parse_args()
    mod = importlib.import_module(args.module)
    json.dump(dump(mod), sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
