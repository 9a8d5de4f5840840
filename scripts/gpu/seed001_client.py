"""Seed 001's client, as the blog writes it, against `nereid serve` (scripts/gpu/tensorrt-on-device.sh), with its
answers checked against PyTorch's on the same weights (scripts/gpu/trt_models.py seed001 saved them).

Changed from the blog only where it cannot run as printed: it asks for an output named "output" while its own
export names it "outputs" (so: "outputs"); its `List` and `os` come from imports the page lost (its text was
machine-translated: "Listing", "mannequin").

    TRITON_CLIENT_URL=127.0.0.1:8000 python seed001_client.py DIR
"""

import os
import sys
from typing import List

import numpy as np
import tritonclient.http as httpclient
from tritonclient.http import InferenceServerClient
from tritonclient.utils import *  # noqa: F403 - the blog's import

CLIENT = InferenceServerClient(url=os.environ["TRITON_CLIENT_URL"], verbose=False)


def run_inference(input_ids: np.ndarray, attention_mask: np.ndarray, token_type_ids: np.ndarray, model_name: str) -> List[np.ndarray]:
    inputs = [
        httpclient.InferInput("input_ids", input_ids.shape, "INT32"),
        httpclient.InferInput("attention_mask", attention_mask.shape, "INT32"),
        httpclient.InferInput("token_type_ids", token_type_ids.shape, "INT32"),
    ]
    input_datas = [
        inputs[0].set_data_from_numpy(input_ids.astype(np.int32)),
        inputs[1].set_data_from_numpy(attention_mask.astype(np.int32)),
        inputs[2].set_data_from_numpy(token_type_ids.astype(np.int32)),
    ]
    result_object = CLIENT.infer(
        model_name=model_name,
        inputs=input_datas,
        outputs=[httpclient.InferRequestedOutput("outputs", binary_data=True)],
    )
    return result_object.as_numpy("outputs")


def main() -> int:
    d = sys.argv[1]
    ids, mask, types = (np.load(os.path.join(d, f"{n}.npy")) for n in ("ids", "mask", "types"))
    ref32, ref16 = np.load(os.path.join(d, "ref_fp32.npy")), np.load(os.path.join(d, "ref_fp16.npy"))
    bad = 0
    for model, tol in (("model_2", 0.05), ("model_1", 1e-3)):
        out = run_inference(ids, mask, types, model)
        d32 = float(np.abs(out.astype(np.float32) - ref32).max())
        d16 = float(np.abs(out.astype(np.float32) - ref16).max())
        ok = out.shape == ref32.shape and d32 < tol
        bad += not ok
        print(f"[seed001] {model}: {out.dtype} {list(out.shape)}; max |Nereid - PyTorch fp32| = {d32:.4g}, |Nereid - PyTorch fp16| = {d16:.4g} -> {'OK' if ok else 'BAD'}")
    meta = CLIENT.get_model_metadata("model_2")
    print(f"[seed001] model_2 metadata: versions {meta['versions']}, inputs {[(i['name'], i['datatype'], i['shape']) for i in meta['inputs']]}, outputs {[(o['name'], o['datatype'], o['shape']) for o in meta['outputs']]}")
    cfg = CLIENT.get_model_config("model_2")
    print(f"[seed001] model_2 auto-completed config: max_batch_size {cfg.get('max_batch_size')}, platform {cfg.get('platform')}, dynamic_batching {'dynamic_batching' in cfg}")
    for v in ("1", "2"):
        print(f"[seed001] model_2 version {v} ready: {CLIENT.is_model_ready('model_2', v)}")
    try:
        run_inference(np.zeros((33, 512)), np.zeros((33, 512)), np.zeros((33, 512)), "model_2")
        print("[seed001] batch 33 (past the plan's max 32): answered?! BAD")
        bad += 1
    except InferenceServerException as e:  # noqa: F405 - from the blog's star import
        print(f"[seed001] batch 33 refused: {e}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
