"""Bare PyTorch, the yardstick for Nereid's pytorch backend on the GPU (scripts/gpu/torch-on-device.sh): the same
TorchScript file, the same batch, in a plain loop as a user's own script would run it, with the same work per
batch as Nereid does (numpy inputs -> torch.from_numpy -> to the GPU -> forward() in inference mode -> output back
to numpy), and once more with the inputs already on the GPU and the output left there (the model alone).

    python3 torch_baseline.py --model DIR/model.pt --batch 32 --seq 128 --ms 5000

Prints one JSON line: {"host_loop": {"ips": .., "p50_ms": ..}, "gpu_only": {...}, "torch": "..", "device": ".."}.
"""

from __future__ import annotations

import argparse
import json
import time
import warnings

import numpy as np
import torch

warnings.simplefilter("ignore", FutureWarning)


def sync() -> None:
    if torch.cuda.is_available():
        torch.cuda.synchronize()


def measure(step, batch: int, ms: float) -> dict:
    for _ in range(5):
        step()
    sync()
    lat = []
    end = time.perf_counter() + ms / 1000
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() < end:
        t = time.perf_counter()
        step()
        lat.append((time.perf_counter() - t) * 1000)
        n += 1
    sync()
    wall = time.perf_counter() - t0
    return {"ips": round(n * batch / wall, 1), "p50_ms": round(float(np.median(lat)), 3), "batches": n}


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--ms", type=float, default=5000)
    p.add_argument("--vocab", type=int, default=1000)
    p.add_argument("--device", default="cuda:0", help="cpu: a dry run without a GPU")
    a = p.parse_args()
    dev = torch.device(a.device)
    module = torch.jit.load(a.model, map_location=dev).eval()
    rng = np.random.default_rng(0)
    ids = rng.integers(0, a.vocab, size=(a.batch, a.seq), dtype=np.int32)
    mask = np.ones((a.batch, a.seq), dtype=np.int32)
    types = np.zeros((a.batch, a.seq), dtype=np.int32)

    def host_loop() -> None:
        with torch.inference_mode():
            out = module(*(torch.from_numpy(x).to(dev) for x in (ids, mask, types)))
            out.cpu().numpy()

    gpu_inputs = [torch.from_numpy(x).to(dev) for x in (ids, mask, types)]

    def gpu_only() -> None:
        with torch.inference_mode():
            module(*gpu_inputs)
        sync()

    result = {
        "host_loop": measure(host_loop, a.batch, a.ms),
        "gpu_only": measure(gpu_only, a.batch, a.ms),
        "torch": torch.__version__,
        "device": torch.cuda.get_device_name(0) if dev.type == "cuda" else "cpu",
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
