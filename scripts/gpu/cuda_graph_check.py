#!/usr/bin/env python3
"""CUDA graphs give the right answers on the H200: `simple_graph` (simple as KIND_GPU with the CUDA provider's
enable_cuda_graph) gets requests of every batch size 1..8, each size several times with new values, so that each
shape goes through its learning run, onnxruntime's warm-up runs, the capture and then replays; every answer must
be exactly INPUT0 + INPUT1 and INPUT0 - INPUT1 (a replay reading stale inputs or writing stale outputs fails here).

  python3 cuda_graph_check.py HOST:PORT
"""
import json
import random
import sys
import urllib.request

url = f"http://{sys.argv[1]}/v2/models/simple_graph/infer"
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
        req = urllib.request.Request(url, data=json.dumps(body).encode(), method="POST")
        out = {o["name"]: o["data"] for o in json.load(urllib.request.urlopen(req))["outputs"]}
        want0 = [x + y for x, y in zip(sum(a, []), sum(b, []))]
        want1 = [x - y for x, y in zip(sum(a, []), sum(b, []))]
        checked += 1
        if out["OUTPUT0"] != want0 or out["OUTPUT1"] != want1:
            wrong += 1
            print(f"[cuda-graph] WRONG round {rnd} batch {batch}: {out['OUTPUT0'][:4]}... want {want0[:4]}...")
print(f"[cuda-graph] {checked} requests over batch sizes 1-8 (6 rounds each): {wrong} wrong")
sys.exit(1 if wrong else 0)
