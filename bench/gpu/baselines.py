#!/usr/bin/env python3
"""Fixed baselines of the GPU benchmark (bench/gpu.ts), one JSON line per measured point on stdout.

  ort    onnxruntime-gpu in Python on the model file Nereid serves, CUDA provider with its default options, I/O
         binding: inputs in device memory, the output bound on the device (the issue's baseline, the 9,034 seq/s
         anchor) and, as "ort-cpu-out", bound to host memory (what a server must do before it can answer); as
         "ort-host-io", a plain run with numpy inputs and outputs (host to device and back in every run).
  torch  PyTorch fp16 with a CUDA graph per batch (captured once, replayed): the practical limit for the model.

Every run is synchronous (onnxruntime synchronizes its stream at the end of Run; torch: synchronize after each
replay), so a latency is one run's wall time; seq/s = batch / mean latency.

  python bench/gpu/baselines.py ort --model M.onnx --batches 1,8,32,64 --ms 1000 [--seq 128] [--vocab 30522]
  python bench/gpu/baselines.py torch --batches 1,8,32,64 --ms 1000
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np


def emit(**row) -> None:
    print(json.dumps(row), flush=True)


def inputs(batch: int, seq: int, vocab: int) -> dict[str, np.ndarray]:
    # The same values bench/gpu.ts sends (one sample repeated): token ids spread over the vocabulary.
    ids = np.array([(i * 7919 + 101) % vocab for i in range(seq)], dtype=np.int32)
    types = np.array([0 if i < seq // 2 else 1 for i in range(seq)], dtype=np.int32)
    return {
        "input_ids": np.tile(ids, (batch, 1)),
        "attention_mask": np.ones((batch, seq), dtype=np.int32),
        "token_type_ids": np.tile(types, (batch, 1)),
    }


def timed(run, ms: float) -> list[float]:
    for _ in range(5):
        run()
    lat = []
    end = time.perf_counter() + ms / 1000
    while time.perf_counter() < end:
        t = time.perf_counter()
        run()
        lat.append((time.perf_counter() - t) * 1e6)
    return lat


def summary(lat: list[float], batch: int) -> dict:
    lat.sort()
    return {
        "batch": batch,
        "runs": len(lat),
        "seq_s": batch / (statistics.fmean(lat) / 1e6),
        "p50_us": lat[len(lat) // 2],
        "p99_us": lat[min(len(lat) - 1, int(len(lat) * 0.99))],
    }


def ort_baseline(a) -> None:
    import onnxruntime as ort

    s = ort.InferenceSession(a.model, providers=[("CUDAExecutionProvider", {"device_id": 0})])
    if s.get_providers()[0] != "CUDAExecutionProvider":
        raise SystemExit(f"the CUDA provider did not load: {s.get_providers()}")
    out_name = s.get_outputs()[0].name
    for batch in a.batches:
        feeds = {k: ort.OrtValue.ortvalue_from_numpy(v, "cuda", 0) for k, v in inputs(batch, a.seq, a.vocab).items()}
        for where in ("cuda", "cpu"):
            if where == "cpu" and batch not in (1, max(a.batches)) and not a.all_cpu_out:
                continue
            b = s.io_binding()
            for k, v in feeds.items():
                b.bind_ortvalue_input(k, v)
            b.bind_output(out_name, where)
            lat = timed(lambda: s.run_with_iobinding(b), a.ms)
            shape = list(b.get_outputs()[0].shape())
            emit(tool="ort" if where == "cuda" else "ort-cpu-out", model=a.model, out_shape=shape,
                 ort=ort.__version__, **summary(lat, batch))
        # What a server does per batch: inputs from host memory, outputs to host memory (plain run with numpy).
        host = inputs(batch, a.seq, a.vocab)
        lat = timed(lambda: s.run([out_name], host), a.ms)
        emit(tool="ort-host-io", model=a.model, ort=ort.__version__, **summary(lat, batch))


def torch_baseline(a) -> None:
    import torch

    sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "scripts"))
    import make_examples as mx

    model = mx.bert_base().cuda().half()
    for batch in a.batches:
        x = {k: torch.from_numpy(v).cuda() for k, v in inputs(batch, a.seq, a.vocab).items()}
        args = (x["input_ids"], x["attention_mask"], x["token_type_ids"])
        with torch.inference_mode():
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    model(*args)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g):
                out = model(*args)

            def run() -> None:
                g.replay()
                torch.cuda.synchronize()

            lat = timed(run, a.ms)
        emit(tool="torch-fp16-cudagraph", model="bert-base", out_shape=list(out.shape), torch=torch.__version__,
             **summary(lat, batch))


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("what", choices=("ort", "torch"))
    p.add_argument("--model")
    p.add_argument("--batches", type=lambda s: [int(b) for b in s.split(",")], default=[1, 8, 32, 64])
    p.add_argument("--ms", type=float, default=1000)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=30522)
    p.add_argument("--all-cpu-out", action="store_true")
    a = p.parse_args()
    if a.what == "ort":
        ort_baseline(a)
    else:
        torch_baseline(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
