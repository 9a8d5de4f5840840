"""TorchScript through Triton's own clients (the pytorch backend): the seed's flow, a text encoder exported to
TorchScript (examples/pytorch_repository/text_encoder_torch, made by scripts/make_examples.py --torchscript)
called by the user's `run_inference` exactly as written for Triton (test_user_script.py), over HTTP and gRPC, and
compared with the same encoder served from ONNX (text_encoder, same weights).

Needs torch in .venv (bash scripts/setup-python.sh --torch); without it the module is skipped, except under CI,
which installs it and fails here if it is missing.
"""

from __future__ import annotations

import os
import subprocess

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from common import text_encoder_batch
from conftest import ROOT, _start
from test_user_script import run_inference

TORCH_EXAMPLES = ROOT / "examples" / "pytorch_repository"
# The interpreter the pytorch backend uses by default (the repository .venv), or NEREID_TORCH_PYTHON (passed to
# the server as --backend-config=pytorch,python-executable).
TORCH_PYTHON = os.environ.get("NEREID_TORCH_PYTHON") or str(ROOT / ".venv" / "bin" / "python")


def _torch_missing() -> str | None:
    r = subprocess.run([TORCH_PYTHON, "-c", "import torch"], capture_output=True, text=True)
    if r.returncode == 0:
        return None
    why = f"torch is not installed in {TORCH_PYTHON}: run 'bash scripts/setup-python.sh --torch'"
    if os.environ.get("CI") == "true":
        raise RuntimeError(f"CI must run the pytorch compatibility tests, but {why}")
    return why


_missing = _torch_missing()
pytestmark = pytest.mark.skipif(_missing is not None, reason=_missing or "")


@pytest.fixture(scope="module")
def torchserver(tmp_path_factory):
    args = [f"--model-repository={TORCH_EXAMPLES}"]
    if os.environ.get("NEREID_TORCH_PYTHON"):
        args.append(f"--backend-config=pytorch,python-executable={TORCH_PYTHON}")
    server = _start("pytorch", "NEREID_PYTORCH", args, tmp_path_factory.mktemp("pytorch-logs"), pinned=False)
    yield server
    server.stop()


def test_seed_client_calls_the_torchscript_encoder_unchanged(torchserver, nereid):
    input_ids, attention_mask, token_type_ids = text_encoder_batch(batch=4, seq=16)
    attention_mask[:, 12:] = 0
    with httpclient.InferenceServerClient(url=torchserver.http_url) as torch_client:
        out = run_inference(torch_client, input_ids, attention_mask, token_type_ids, "text_encoder_torch")
    assert out.dtype == np.float32 and out.shape == (4, 16, 64)
    with httpclient.InferenceServerClient(url=nereid.http_url) as onnx_client:
        ref = run_inference(onnx_client, input_ids, attention_mask, token_type_ids, "text_encoder")
    # The same encoder and weights, one exported to ONNX and one scripted to TorchScript.
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_grpc_client_and_metadata(torchserver):
    input_ids, attention_mask, token_type_ids = text_encoder_batch(batch=2, seq=8)
    with grpcclient.InferenceServerClient(url=torchserver.grpc_url) as client:
        meta = client.get_model_metadata("text_encoder_torch", as_json=True)
        assert [i["name"] for i in meta["inputs"]] == ["input_ids", "attention_mask", "token_type_ids"]
        assert client.get_model_config("text_encoder_torch", as_json=True)["config"]["platform"] == "pytorch_libtorch"
        inputs = []
        for name, data in (("input_ids", input_ids), ("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
            inputs.append(grpcclient.InferInput(name, list(data.shape), "INT32"))
            inputs[-1].set_data_from_numpy(data.astype(np.int32))
        result = client.infer("text_encoder_torch", inputs, outputs=[grpcclient.InferRequestedOutput("output")])
        out = result.as_numpy("output")
    assert out.shape == (2, 8, 64)
    with httpclient.InferenceServerClient(url=torchserver.http_url) as client:
        again = run_inference(client, input_ids, attention_mask, token_type_ids, "text_encoder_torch")
    np.testing.assert_allclose(out, again, rtol=1e-6, atol=1e-6)


def test_batch_rows_equal_single_requests(torchserver):
    input_ids, attention_mask, token_type_ids = text_encoder_batch(batch=3, seq=10)
    with httpclient.InferenceServerClient(url=torchserver.http_url) as client:
        batch = run_inference(client, input_ids, attention_mask, token_type_ids, "text_encoder_torch")
        for i in range(3):
            single = run_inference(client, input_ids[i : i + 1], attention_mask[i : i + 1], token_type_ids[i : i + 1], "text_encoder_torch")
            np.testing.assert_allclose(single[0], batch[i], rtol=1e-5, atol=1e-5)
