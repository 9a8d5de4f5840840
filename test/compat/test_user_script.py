"""A user's script written for Triton, unchanged in its logic, pointed at Nereid's example text_encoder: a
`run_inference` helper with three INT32 inputs built from numpy arrays of any integer type, one requested output
"output" as binary data, and `as_numpy("output")`."""

from __future__ import annotations

from typing import List

import numpy as np
import pytest
import tritonclient.http as httpclient
from common import text_encoder_batch
from tritonclient.http import InferenceServerClient


def run_inference(
    client: InferenceServerClient,
    input_ids: np.ndarray,
    attention_mask: np.ndarray,
    token_type_ids: np.ndarray,
    model_name: str,
) -> List[np.ndarray]:
    inputs = [
        httpclient.InferInput("input_ids", input_ids.shape, "INT32"),
        httpclient.InferInput("attention_mask", attention_mask.shape, "INT32"),
        httpclient.InferInput("token_type_ids", token_type_ids.shape, "INT32"),
    ]
    inputs[0].set_data_from_numpy(input_ids.astype(np.int32))
    inputs[1].set_data_from_numpy(attention_mask.astype(np.int32))
    inputs[2].set_data_from_numpy(token_type_ids.astype(np.int32))
    result_object = client.infer(
        model_name=model_name,
        inputs=inputs,
        outputs=[httpclient.InferRequestedOutput("output", binary_data=True)],
    )
    return result_object.as_numpy("output")


@pytest.fixture()
def client(http_url):
    # Such scripts read the URL from their environment (e.g. TRITON_CLIENT_URL); here it is the suite's server.
    c = InferenceServerClient(url=http_url, verbose=False)
    yield c
    c.close()


def test_run_inference_on_text_encoder(client):
    input_ids, attention_mask, token_type_ids = text_encoder_batch(batch=2, seq=12)
    out = run_inference(client, input_ids, attention_mask, token_type_ids, "text_encoder")
    assert out.dtype == np.float32
    assert out.shape == (2, 12, 64)
    assert np.isfinite(out).all()
    # Deterministic, and each row of a batch equals the same row sent alone.
    again = run_inference(client, input_ids, attention_mask, token_type_ids, "text_encoder")
    np.testing.assert_array_equal(out, again)
    single = run_inference(client, input_ids[1:], attention_mask[1:], token_type_ids[1:], "text_encoder")
    np.testing.assert_allclose(single[0], out[1], rtol=1e-5, atol=1e-5)


def test_run_inference_up_to_max_batch_and_long_sequences(client):
    input_ids, attention_mask, token_type_ids = text_encoder_batch(batch=8, seq=128)
    attention_mask[:, 100:] = 0  # padding
    out = run_inference(client, input_ids, attention_mask, token_type_ids, "text_encoder")
    assert out.shape == (8, 128, 64)


def test_run_inference_json_output_matches_binary(client):
    input_ids, attention_mask, token_type_ids = text_encoder_batch(batch=1, seq=5)
    binary = run_inference(client, input_ids, attention_mask, token_type_ids, "text_encoder")
    inputs = []
    for name, data in (("input_ids", input_ids), ("attention_mask", attention_mask), ("token_type_ids", token_type_ids)):
        inputs.append(httpclient.InferInput(name, list(data.shape), "INT32"))
        inputs[-1].set_data_from_numpy(data.astype(np.int32), binary_data=False)
    result = client.infer(
        "text_encoder", inputs, outputs=[httpclient.InferRequestedOutput("output", binary_data=False)]
    )
    np.testing.assert_allclose(result.as_numpy("output"), binary, rtol=1e-6)
