"""Inputs and checks shared by the HTTP and gRPC compatibility tests; `client` is the tritonclient module
(tritonclient.http, tritonclient.http.aio, tritonclient.grpc or tritonclient.grpc.aio)."""

from __future__ import annotations

from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
LABELS = (ROOT / "examples" / "model_repository" / "classifier" / "labels.txt").read_text().split()

# Triton's simple examples: INPUT0 = 0..15, INPUT1 = ones (simple_http_infer_client.py and friends).
INPUT0 = np.arange(16, dtype=np.int32).reshape(1, 16)
INPUT1 = np.ones((1, 16), dtype=np.int32)


def simple_inputs(client, a=INPUT0, b=INPUT1, datatype="INT32", binary=None):
    """InferInputs for `simple` (or `simple_int8` / `simple_string`, by datatype); `binary` is an HTTP-only flag."""
    inputs = [client.InferInput("INPUT0", list(a.shape), datatype), client.InferInput("INPUT1", list(b.shape), datatype)]
    for inp, data in zip(inputs, (a, b)):
        if binary is None:
            inp.set_data_from_numpy(data)
        else:
            inp.set_data_from_numpy(data, binary_data=binary)
    return inputs


def simple_outputs(client, binary=None):
    if binary is None:
        return [client.InferRequestedOutput("OUTPUT0"), client.InferRequestedOutput("OUTPUT1")]
    return [
        client.InferRequestedOutput("OUTPUT0", binary_data=binary),
        client.InferRequestedOutput("OUTPUT1", binary_data=binary),
    ]


def check_simple(result, a=INPUT0, b=INPUT1) -> None:
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), a + b)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), a - b)


def string_tensors(a=INPUT0, b=INPUT1):
    """simple_string's inputs: decimal strings as numpy object arrays of bytes (simple_*_string_infer_client.py)."""
    enc = np.vectorize(lambda v: str(v).encode("utf-8"), otypes=[np.object_])
    return enc(a), enc(b)


def check_simple_string(result, a=INPUT0, b=INPUT1) -> None:
    out0 = result.as_numpy("OUTPUT0")
    out1 = result.as_numpy("OUTPUT1")
    assert out0.dtype == np.object_
    to_int = np.vectorize(lambda s: int(s.decode() if isinstance(s, bytes) else s))
    np.testing.assert_array_equal(to_int(out0), a + b)
    np.testing.assert_array_equal(to_int(out1), a - b)


def classifier_input(client, batch: int = 1):
    rng = np.random.default_rng(7)
    data = rng.standard_normal((batch, 8)).astype(np.float32)
    inp = client.InferInput("INPUT", [batch, 8], "FP32")
    inp.set_data_from_numpy(data)
    return [inp]


def check_classification(probs: np.ndarray, classes: np.ndarray, k: int) -> None:
    """`classes` is Triton's classification output, "<value>:<index>:<label>" per entry, top k by value."""
    assert classes.shape == (probs.shape[0], k)
    for row_probs, row in zip(probs, classes):
        parts = [(s.decode() if isinstance(s, bytes) else s).split(":") for s in row]
        indices = [int(p[1]) for p in parts]
        expected = list(np.argsort(-row_probs, kind="stable")[:k])
        assert indices == expected
        for (value, index, label) in parts:
            assert float(value) == np.float32(row_probs[int(index)]).item() or abs(
                float(value) - row_probs[int(index)]
            ) < 1e-6
            assert label == LABELS[int(index)]


def text_encoder_batch(batch: int = 2, seq: int = 12):
    """BERT-style INT32 inputs for the example text_encoder (token ids, attention mask, token types)."""
    rng = np.random.default_rng(42)
    input_ids = rng.integers(0, 100, size=(batch, seq), dtype=np.int64)
    attention_mask = np.ones((batch, seq), dtype=np.int64)
    token_type_ids = np.zeros((batch, seq), dtype=np.int64)
    return input_ids, attention_mask, token_type_ids
