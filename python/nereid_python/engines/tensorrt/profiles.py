"""Choosing the optimization profile for a batch, as Triton's TensorRT backend does: among the instance's
profiles, those whose [min, max] range holds every input's shape; of those, the one whose opt shapes are nearest
(sum of |opt - shape| over every dim of every input); ties go to the lower index. The host checks each request
against the same facts before a batch is formed (src/backends/tensorrt/profiles.ts), so a request outside every
profile gets a 400 without reaching this process.
"""

from __future__ import annotations


def fits(profile: dict, shapes: dict[str, list[int]]) -> bool:
    for name, shape in shapes.items():
        rng = profile["inputs"].get(name)
        if rng is None:
            continue
        lo, hi = rng["min"], rng["max"]
        if len(shape) != len(lo):
            return False
        if any(s < a or s > b for s, a, b in zip(shape, lo, hi)):
            return False
    return True


def distance(profile: dict, shapes: dict[str, list[int]]) -> int:
    d = 0
    for name, shape in shapes.items():
        rng = profile["inputs"].get(name)
        if rng is not None:
            d += sum(abs(o - s) for o, s in zip(rng["opt"], shape))
    return d


def select(profiles: list[dict], allowed: list[int], shapes: dict[str, list[int]]) -> int | None:
    best = None
    best_d = 0
    for idx in allowed:
        p = profiles[idx]
        if not fits(p, shapes):
            continue
        d = distance(p, shapes)
        if best is None or d < best_d:
            best, best_d = idx, d
    return best


def describe(profiles: list[dict], allowed: list[int], name: str) -> str:
    """``profile 0: [1..32,512]; profile 1: [1..8,1..1024]`` for one input."""
    parts = []
    for idx in allowed:
        rng = profiles[idx]["inputs"].get(name)
        if rng is None:
            continue
        dims = ",".join(str(a) if a == b else f"{a}..{b}" for a, b in zip(rng["min"], rng["max"]))
        parts.append(f"profile {idx}: [{dims}]")
    return "; ".join(parts)


def outside_message(profiles: list[dict], allowed: list[int], shapes: dict[str, list[int]]) -> str:
    """Names the first input whose shape no allowed profile holds, with the ranges it could have."""
    for name, shape in shapes.items():
        if not any(fits({"inputs": {name: profiles[i]["inputs"][name]}}, {name: shape}) for i in allowed if name in profiles[i]["inputs"]):
            return f"input '{name}' shape [{','.join(map(str, shape))}] is outside every optimization profile of this instance ({describe(profiles, allowed, name)})"
    return (
        "the inputs' shapes [" + "; ".join(f"{n}: [{','.join(map(str, s))}]" for n, s in shapes.items())
        + "] fit no single optimization profile of this instance together ("
        + " | ".join(f"{n}: {describe(profiles, allowed, n)}" for n in shapes)
        + ")"
    )
