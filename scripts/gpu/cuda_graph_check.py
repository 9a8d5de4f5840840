#!/usr/bin/env python3
"""CUDA graphs give the right answers on the H200: `simple_graph` (simple as KIND_GPU with the CUDA provider's
enable_cuda_graph) gets requests of every batch size 1..8, each size several times with new values, so that each
shape goes through its learning run, onnxruntime's warm-up runs, the capture and then replays; every answer must
be exactly INPUT0 + INPUT1 and INPUT0 - INPUT1 (a replay reading stale inputs or writing stale outputs fails here).
With `simple_graph_pad` (graph_spec: graphs captured at load for batch 1, 2, 4, 8; batches 3, 5-7 replay them
padded, over rows an earlier larger batch left behind) the same must hold; the last round asks for OUTPUT1 alone
(a padded slot copies out only what was asked for).

  python3 cuda_graph_check.py HOST:PORT [MODEL]
"""
import json
import random
import sys
import urllib.request

model = sys.argv[2] if len(sys.argv) > 2 else "simple_graph"
url = f"http://{sys.argv[1]}/v2/models/{model}/infer"
rng = random.Random(7)
checked = wrong = 0
for rnd in range(6):
    for batch in range(1, 9):
        a = [[rng.randrange(-1000, 1000) for _ in range(16)] for _ in range(batch)]
        b = [[rng.randrange(-1000, 1000) for _ in range(16)] for _ in range(batch)]
        body = {"inputs": [
            {"name": "INPUT0", "datatype": "INT32", "shape": [batch, 16], "data": sum(a, [])},
            {"name": "INPUT1", "datatype": "INT32", "shape": [batch, 16], "data": sum(b, [])},
        ]}
        only1 = rnd == 5
        if only1:
            body["outputs"] = [{"name": "OUTPUT1"}]
        req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
        out = {o["name"]: o["data"] for o in json.load(urllib.request.urlopen(req))["outputs"]}
        want0 = [x + y for x, y in zip(sum(a, []), sum(b, []))]
        want1 = [x - y for x, y in zip(sum(a, []), sum(b, []))]
        checked += 1
        if (not only1 and out.get("OUTPUT0") != want0) or out.get("OUTPUT1") != want1 or (only1 and len(out) != 1):
            wrong += 1
            print(f"[cuda-graph] {model} WRONG round {rnd} batch {batch}: {str(out)[:120]}... want {want0[:4]} {want1[:4]}...")
print(f"[cuda-graph] {model}: {checked} requests over batch sizes 1-8 (6 rounds each): {wrong} wrong")
sys.exit(1 if wrong else 0)
