"""Triton's clients against a Nereid ensemble (``simple_ensemble``: two ``simple`` steps, see models.py), the way
Triton's ensemble examples call one: an ordinary infer on the ensemble's name, metadata and config showing the
ensemble platform, and the composing model's statistics counting each step."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from common import INPUT0, INPUT1, simple_inputs
from tritonclient.utils import InferenceServerException


def _simple_success(client, protocol: str) -> int:
    stats = client.get_inference_statistics("simple")
    if protocol == "grpc":
        return stats.model_stats[0].inference_stats.success.count
    return stats["model_stats"][0]["inference_stats"]["success"]["count"]


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_ensemble_infer_and_composing_statistics(http_client, grpc_client, protocol):
    client, module = (http_client, httpclient) if protocol == "http" else (grpc_client, grpcclient)
    before = _simple_success(client, protocol)
    result = client.infer("simple_ensemble", simple_inputs(module))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * INPUT0)
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), 2 * INPUT1)
    # Each step is a request of the composing model.
    assert _simple_success(client, protocol) - before == 2


def test_ensemble_metadata_and_config(http_client, grpc_client):
    assert http_client.get_model_metadata("simple_ensemble")["platform"] == "ensemble"
    config = grpc_client.get_model_config("simple_ensemble").config
    assert config.platform == "ensemble"
    assert [s.model_name for s in config.ensemble_scheduling.step] == ["simple", "simple"]
    assert http_client.is_model_ready("simple_ensemble")


def test_ensemble_batch_of_eight(http_client):
    a = np.arange(8 * 16, dtype=np.int32).reshape(8, 16)
    b = np.full((8, 16), 3, dtype=np.int32)
    result = http_client.infer("simple_ensemble", simple_inputs(httpclient, a, b))
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), 2 * a)


def test_ensemble_bad_input_is_refused(http_client):
    inputs = simple_inputs(httpclient)[:1]
    with pytest.raises(InferenceServerException, match="missing required input"):
        http_client.infer("simple_ensemble", inputs)
