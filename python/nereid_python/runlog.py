"""The verbose line an engine logs per batch that touched client CUDA memory: where each input was and where each
output went (``cuda:N`` in place, ``host`` through the transport), as the onnxruntime engine logs its runs."""

from __future__ import annotations

from .runtime import channel


def inputs_placement(requests) -> str:
    return ", ".join(
        f"{t.name()} {'host' if t.is_cpu() else f'cuda:{t._dev.device}'}" for r in requests for t in r.inputs()
    )


def log_run(engine: str, instance_name: str, slots: list, inputs: str, done: dict) -> None:
    """``slots``: per request, its output slots in client CUDA memory (name -> cuda.Slot), or None."""
    outs = []
    for i, entry in enumerate(done.get("r") or []):
        offered = slots[i] or {}
        for d in (entry or {}).get("o") or []:
            outs.append(f"{d[0]} {f'cuda:{offered[d[0]].device}' if d[3] == -1 else 'host'}")
    text = ", ".join(outs)
    channel().send({"op": "log", "lvl": "verbose", "msg": f"{engine} run: inputs {inputs}; outputs {text}", "inst": instance_name})
