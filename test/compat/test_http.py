"""Triton's Python HTTP client (tritonclient.http and tritonclient.http.aio) against Nereid, the way Triton's
client examples use it: simple_http_infer_client.py, simple_http_async_infer_client.py,
simple_http_aio_infer_client.py, simple_http_string_infer_client.py, simple_http_health_metadata.py."""

from __future__ import annotations

import asyncio
import json
import zlib

import numpy as np
import pytest
import tritonclient.http as httpclient
import tritonclient.http.aio as aiohttpclient
from common import (
    INPUT0,
    INPUT1,
    check_classification,
    check_simple,
    check_simple_string,
    classifier_input,
    simple_inputs,
    simple_outputs,
    string_tensors,
)
from tritonclient.utils import InferenceServerException, np_to_triton_dtype


def status_of(excinfo) -> str:
    return str(excinfo.value.status())


# --- inference -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_infer_simple(http_client, binary):
    result = http_client.infer(
        "simple",
        simple_inputs(httpclient, binary=binary),
        outputs=simple_outputs(httpclient, binary=binary),
        request_id="req-1",
    )
    check_simple(result)
    response = result.get_response()
    assert response["model_name"] == "simple"
    assert response["model_version"] == "1"
    assert response["id"] == "req-1"
    out = result.get_output("OUTPUT0")
    assert out["datatype"] == "INT32" and out["shape"] == [1, 16]
    assert ("binary_data_size" in out.get("parameters", {})) == binary


def test_infer_without_requested_outputs_returns_all(http_client):
    result = http_client.infer("simple", simple_inputs(httpclient))
    check_simple(result)


def test_infer_mixed_json_and_binary_inputs_and_outputs(http_client):
    inputs = simple_inputs(httpclient)
    inputs[1].set_data_from_numpy(INPUT1, binary_data=False)
    outputs = [
        httpclient.InferRequestedOutput("OUTPUT0", binary_data=False),
        httpclient.InferRequestedOutput("OUTPUT1", binary_data=True),
    ]
    result = http_client.infer("simple", inputs, outputs=outputs)
    check_simple(result)
    assert result.get_output("OUTPUT0")["data"] == list((INPUT0 + INPUT1).flatten())


def test_infer_one_requested_output_only(http_client):
    result = http_client.infer("simple", simple_inputs(httpclient), outputs=[httpclient.InferRequestedOutput("OUTPUT1")])
    np.testing.assert_array_equal(result.as_numpy("OUTPUT1"), INPUT0 - INPUT1)
    assert result.as_numpy("OUTPUT0") is None


def test_infer_batch_and_explicit_version(http_client):
    a = np.arange(8 * 16, dtype=np.int32).reshape(8, 16)
    b = np.full((8, 16), 3, dtype=np.int32)
    result = http_client.infer("simple", simple_inputs(httpclient, a, b), model_version="1")
    check_simple(result, a, b)


@pytest.mark.parametrize("request_alg,response_alg", [("gzip", "gzip"), ("deflate", "deflate"), (None, "gzip")])
def test_infer_compressed(http_client, request_alg, response_alg):
    result = http_client.infer(
        "simple",
        simple_inputs(httpclient),
        request_compression_algorithm=request_alg,
        response_compression_algorithm=response_alg,
    )
    check_simple(result)


def test_infer_with_headers_parameters_and_query(http_client):
    result = http_client.infer(
        "simple",
        simple_inputs(httpclient),
        headers={"x-compat": "1"},
        query_params={"test_1": 1},
        parameters={"custom_str": "x", "custom_int": 3, "custom_bool": True},
    )
    check_simple(result)


def test_infer_reuses_input_objects(http_client):
    """reuse_infer_objects_client.py's pattern (without shared memory): one set of InferInputs, new data each time."""
    inputs = simple_inputs(httpclient)
    outputs = simple_outputs(httpclient)
    for k in range(3):
        a = INPUT0 * k
        inputs[0].set_data_from_numpy(a)
        check_simple(http_client.infer("simple", inputs, outputs=outputs), a, INPUT1)


def test_async_infer(http_url):
    client = httpclient.InferenceServerClient(http_url, concurrency=4)
    try:
        pending = [
            client.async_infer("simple", simple_inputs(httpclient, INPUT0 + k), request_id=str(k)) for k in range(8)
        ]
        for k, request in enumerate(pending):
            result = request.get_result()
            check_simple(result, INPUT0 + k)
            assert result.get_response()["id"] == str(k)
    finally:
        client.close()


async def _aio_flow(url: str) -> None:
    async with aiohttpclient.InferenceServerClient(url) as client:
        assert await client.is_server_live()
        assert await client.is_server_ready()
        assert await client.is_model_ready("simple")
        metadata = await client.get_model_metadata("simple")
        assert metadata["name"] == "simple"
        results = await asyncio.gather(
            *(client.infer("simple", simple_inputs(httpclient, INPUT0 + k), request_id=str(k)) for k in range(4))
        )
        for k, result in enumerate(results):
            check_simple(result, INPUT0 + k)
        with pytest.raises(InferenceServerException) as err:
            await client.infer("no_such_model", simple_inputs(httpclient))
        assert status_of(err) == "404"


def test_aio_client_flow(http_url):
    asyncio.run(_aio_flow(http_url))


def test_aio_large_infer_response(http_url):
    """A response big enough for Nereid to compress (aiohttp asks for gzip): the aio client decodes it itself."""

    async def flow():
        async with aiohttpclient.InferenceServerClient(http_url) as client:
            ids = np.arange(2 * 32, dtype=np.int32).reshape(2, 32) % 100
            inputs = []
            for name, data in (("input_ids", ids), ("attention_mask", np.ones_like(ids)), ("token_type_ids", 0 * ids)):
                inputs.append(httpclient.InferInput(name, list(data.shape), "INT32"))
                inputs[-1].set_data_from_numpy(data)
            result = await client.infer("text_encoder", inputs)
            assert result.as_numpy("output").shape == (2, 32, 64)

    asyncio.run(flow())


def test_aio_config_and_statistics(http_url):
    async def flow():
        async with aiohttpclient.InferenceServerClient(http_url) as client:
            config = await client.get_model_config("simple")
            assert config["max_batch_size"] == 8
            stats = await client.get_inference_statistics()
            assert {"simple", "classifier"} <= {s["name"] for s in stats["model_stats"]}
            assert {m["name"] for m in await client.get_model_repository_index()} >= {"simple"}

    asyncio.run(flow())


# --- datatypes -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_bytes_simple_string(http_client, binary):
    a, b = string_tensors()
    result = http_client.infer(
        "simple_string",
        simple_inputs(httpclient, a, b, "BYTES", binary=binary),
        outputs=simple_outputs(httpclient, binary=binary),
    )
    check_simple_string(result)
    assert result.get_output("OUTPUT0")["datatype"] == "BYTES"


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_bytes_identity_utf8(http_client, binary):
    data = np.array([["hello", "wörld", "", "日本語"]], dtype=np.object_)
    inp = httpclient.InferInput("INPUT0", list(data.shape), "BYTES")
    inp.set_data_from_numpy(data, binary_data=binary)
    result = http_client.infer(
        "simple_identity", [inp], outputs=[httpclient.InferRequestedOutput("OUTPUT0", binary_data=binary)]
    )
    out = result.as_numpy("OUTPUT0")
    assert [(s.decode() if isinstance(s, bytes) else s) for s in out.flatten()] == list(data.flatten())


def test_bytes_with_embedded_nul_is_never_silently_truncated(http_client):
    data = np.array([[b"he\x00llo"] * 4], dtype=np.object_)
    inp = httpclient.InferInput("INPUT0", [1, 4], "BYTES")
    inp.set_data_from_numpy(data)
    try:
        result = http_client.infer("simple_identity", [inp])
    except InferenceServerException as e:
        assert str(e.status()) == "400"
        return
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


def test_bytes_not_utf8_is_invalid_argument(http_client):
    data = np.array([[b"\xff\xfe"]], dtype=np.object_)
    inp = httpclient.InferInput("INPUT0", [1, 1], "BYTES")
    inp.set_data_from_numpy(data)
    with pytest.raises(InferenceServerException) as err:
        http_client.infer("simple_identity", [inp])
    assert status_of(err) == "400"


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_int8(http_client, binary):
    a = np.arange(-8, 8, dtype=np.int8).reshape(1, 16)
    b = np.full((1, 16), 2, dtype=np.int8)
    result = http_client.infer(
        "simple_int8",
        simple_inputs(httpclient, a, b, np_to_triton_dtype(a.dtype), binary=binary),
        outputs=simple_outputs(httpclient, binary=binary),
    )
    check_simple(result, a, b)
    assert result.as_numpy("OUTPUT0").dtype == np.int8


# --- classification ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize("binary", [True, False], ids=["binary", "json"])
def test_classification_class_count(http_client, binary):
    inputs = classifier_input(httpclient, batch=3)
    probs = http_client.infer("classifier", inputs).as_numpy("PROBS")
    result = http_client.infer(
        "classifier", inputs, outputs=[httpclient.InferRequestedOutput("PROBS", binary_data=binary, class_count=3)]
    )
    assert result.get_output("PROBS")["datatype"] == "BYTES"
    check_classification(probs, result.as_numpy("PROBS"), 3)


# --- health, metadata, config, statistics ----------------------------------------------------------------------


def test_health(http_client):
    """simple_http_health_metadata.py's health calls, including its query parameters."""
    assert http_client.is_server_live(query_params={"test_1": 1, "test_2": 2})
    assert http_client.is_server_ready()
    assert http_client.is_model_ready("simple")
    assert http_client.is_model_ready("simple", "1")
    assert not http_client.is_model_ready("simple", "2")
    assert not http_client.is_model_ready("no_such_model")


def test_server_metadata(http_client):
    metadata = http_client.get_server_metadata()
    assert metadata["name"] == "triton"
    assert metadata["version"]
    for ext in ("binary_tensor_data", "classification", "model_repository", "model_configuration", "statistics"):
        assert ext in metadata["extensions"]


def test_model_metadata(http_client):
    metadata = http_client.get_model_metadata("simple", query_params={"test_1": 1})
    assert metadata["name"] == "simple"
    assert metadata["versions"] == ["1"]
    assert metadata["platform"] == "onnxruntime_onnx"
    assert [(t["name"], t["datatype"], t["shape"]) for t in metadata["inputs"]] == [
        ("INPUT0", "INT32", [-1, 16]),
        ("INPUT1", "INT32", [-1, 16]),
    ]
    assert [t["name"] for t in metadata["outputs"]] == ["OUTPUT0", "OUTPUT1"]
    assert http_client.get_model_metadata("simple", "1")["name"] == "simple"


def test_model_config(http_client):
    config = http_client.get_model_config("simple")
    assert config["name"] == "simple"
    assert config["max_batch_size"] == 8
    assert [(i["name"], i["data_type"], i["dims"]) for i in config["input"]] == [
        ("INPUT0", "TYPE_INT32", [16]),
        ("INPUT1", "TYPE_INT32", [16]),
    ]
    # text_encoder's partial config is auto-completed from the ONNX file, as Triton's onnxruntime backend does.
    encoder = http_client.get_model_config("text_encoder")
    assert {i["name"] for i in encoder["input"]} == {"input_ids", "attention_mask", "token_type_ids"}
    assert encoder["output"][0]["name"] == "output"
    assert "dynamic_batching" in encoder


def test_statistics_count_inferences(http_client):
    def count():
        stats = http_client.get_inference_statistics("simple", "1")["model_stats"]
        assert len(stats) == 1 and stats[0]["name"] == "simple" and stats[0]["version"] == "1"
        return stats[0]

    before = count()
    http_client.infer("simple", simple_inputs(httpclient))
    http_client.infer("simple", simple_inputs(httpclient, np.zeros((4, 16), np.int32), np.ones((4, 16), np.int32)))
    after = count()
    assert after["inference_count"] - before["inference_count"] == 5
    assert after["execution_count"] > before["execution_count"]
    assert after["inference_stats"]["success"]["count"] - before["inference_stats"]["success"]["count"] == 2
    assert after["last_inference"] >= before["last_inference"]
    for key in ("queue", "compute_input", "compute_infer", "compute_output"):
        assert after["inference_stats"][key]["ns"] >= before["inference_stats"][key]["ns"]
    all_stats = http_client.get_inference_statistics()["model_stats"]
    assert {"simple", "classifier", "text_encoder"} <= {s["name"] for s in all_stats}


def test_repository_index_in_none_mode(http_client):
    index = http_client.get_model_repository_index()
    states = {m["name"]: m["state"] for m in index}
    assert states["simple"] == "READY" and states["text_encoder"] == "READY"


def test_load_is_refused_outside_explicit_mode(http_client):
    with pytest.raises(InferenceServerException) as err:
        http_client.load_model("simple")
    assert "explicit" in err.value.message()


def test_log_and_trace_settings(http_client):
    settings = http_client.get_log_settings()
    assert {"log_info", "log_warning", "log_error", "log_verbose_level", "log_format"} <= set(settings)
    updated = http_client.update_log_settings({"log_verbose_level": 0})
    assert updated["log_verbose_level"] == 0
    trace = http_client.get_trace_settings()
    assert "trace_level" in trace and "trace_rate" in trace
    assert http_client.update_trace_settings("simple", {"trace_rate": "100"})["trace_rate"] == "100"
    assert http_client.update_trace_settings("simple", {"trace_rate": None})["trace_rate"] == trace["trace_rate"]


def test_shared_memory_is_unsupported_501(http_client):
    # Status answers with no regions (as over gRPC); registering is not implemented.
    assert http_client.get_system_shared_memory_status() == []
    with pytest.raises(InferenceServerException) as err:
        http_client.register_cuda_shared_memory("r", b"", 0, 64)
    assert status_of(err) == "501"


# --- errors --------------------------------------------------------------------------------------------------------


def test_unknown_model_is_404(http_client):
    """simple_http_infer_client.py ends with an infer on 'wrong_model_name' and expects this exception."""
    with pytest.raises(InferenceServerException) as err:
        http_client.infer("wrong_model_name", simple_inputs(httpclient), outputs=simple_outputs(httpclient))
    assert status_of(err) == "404"
    assert "wrong_model_name" in err.value.message()
    for call in (
        lambda: http_client.get_model_metadata("wrong_model_name"),
        lambda: http_client.get_model_config("wrong_model_name"),
        lambda: http_client.get_inference_statistics("wrong_model_name"),
        lambda: http_client.get_model_metadata("simple", "7"),
    ):
        with pytest.raises(InferenceServerException) as err:
            call()
        assert status_of(err) == "404"


@pytest.mark.parametrize(
    "case",
    ["wrong_dtype", "wrong_shape", "batch_too_large", "unknown_input", "missing_input", "unknown_output"],
)
def test_bad_requests_are_400(http_client, case):
    inputs = simple_inputs(httpclient)
    outputs = None
    if case == "wrong_dtype":
        inputs[0] = httpclient.InferInput("INPUT0", [1, 16], "FP32")
        inputs[0].set_data_from_numpy(INPUT0.astype(np.float32))
    elif case == "wrong_shape":
        inputs = simple_inputs(httpclient, INPUT0[:, :15], INPUT1[:, :15])
    elif case == "batch_too_large":
        inputs = simple_inputs(httpclient, np.zeros((9, 16), np.int32), np.zeros((9, 16), np.int32))
    elif case == "unknown_input":
        inputs[1] = httpclient.InferInput("INPUT9", [1, 16], "INT32")
        inputs[1].set_data_from_numpy(INPUT1)
    elif case == "missing_input":
        inputs = inputs[:1]
    elif case == "unknown_output":
        outputs = [httpclient.InferRequestedOutput("OUTPUT9")]
    with pytest.raises(InferenceServerException) as err:
        http_client.infer("simple", inputs, outputs=outputs)
    assert status_of(err) == "400", err.value.message()
    assert err.value.message()


def test_malformed_body_is_400(http_url):
    import urllib.error
    import urllib.request

    req = urllib.request.Request(
        f"http://{http_url}/v2/models/simple/infer",
        data=zlib.compress(b"x")[:3] + json.dumps({"inputs": 1}).encode(),
        headers={"content-type": "application/json"},
        method="POST",
    )
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=10)
    assert err.value.code == 400
    assert "error" in json.loads(err.value.read())
