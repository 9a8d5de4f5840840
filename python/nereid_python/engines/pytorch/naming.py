"""Which forward() argument a config input feeds, and which returned value a config output names: Triton's
pytorch backend rules, in the same order of preference.

Inputs:
1. every config input is named after a forward() argument: by that argument's position ("forward argument");
2. else every name is ``<anything>__<digits>`` (``INPUT__0``): by the digits ("named index");
3. else by the input's position in the config ("config order"), with a warning, as Triton.
A forward() taking one ``Dict[str, Tensor]`` gets every input by its config name.

Outputs: ``<anything>__<digits>`` for every output: by the digits; else by position in the config (with a warning
unless there is a single output, whose position is unambiguous).
"""

from __future__ import annotations

def indexed(name: str) -> int | None:
    """The index of a ``<name>__<index>`` name, else None. (Triton takes what follows the first ``__``.)"""
    at = name.find("__")
    if at < 0:
        return None
    tail = name[at + 2 :]
    return int(tail) if tail.isdigit() else None


def map_inputs(config_names: list[str], forward_args: list[str]) -> tuple[dict[str, int], str, str | None]:
    """(name -> forward position, rule, warning or None)."""
    if config_names and all(n in forward_args for n in config_names):
        return {n: forward_args.index(n) for n in config_names}, "forward argument names", None
    idx = [indexed(n) for n in config_names]
    if config_names and all(i is not None for i in idx):
        return {n: int(i) for n, i in zip(config_names, idx)}, "INPUT__<index> names", None
    warning = (
        f"inputs {config_names} are neither all forward() arguments {forward_args} nor all named <name>__<index>: "
        "they are passed in config order"
    )
    return {n: i for i, n in enumerate(config_names)}, "config order", warning


def map_outputs(config_names: list[str]) -> tuple[dict[str, int], str, str | None]:
    idx = [indexed(n) for n in config_names]
    if config_names and all(i is not None for i in idx):
        return {n: int(i) for n, i in zip(config_names, idx)}, "OUTPUT__<index> names", None
    warning = None
    if len(config_names) > 1:
        warning = f"outputs {config_names} are not all named <name>__<index>: they are taken in config order"
    return {n: i for i, n in enumerate(config_names)}, "config order", warning


def check_inputs(mapping: dict[str, int], arg_count: int) -> str | None:
    """A problem with an input mapping (a hole or a duplicate position, an index past the arguments), or None."""
    positions = sorted(mapping.values())
    if len(set(positions)) != len(positions):
        dup = [n for n in mapping if list(mapping.values()).count(mapping[n]) > 1]
        return f"inputs {dup} map to the same forward() argument"
    for n, p in mapping.items():
        if p >= arg_count:
            return f"input '{n}' maps to forward() argument {p}, but forward() takes {arg_count}"
    return None
