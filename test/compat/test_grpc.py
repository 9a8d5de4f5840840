"""Triton's Python gRPC client (tritonclient.grpc and tritonclient.grpc.aio) and the raw generated stubs against
Nereid, the way Triton's client examples use them: simple_grpc_infer_client.py, simple_grpc_async_infer_client.py,
simple_grpc_aio_infer_client.py, the streaming examples, simple_grpc_string_infer_client.py,
grpc_explicit_{int,int8,byte}_content_client.py, simple_grpc_health_metadata.py, simple_grpc_keepalive_client.py,
simple_grpc_custom_args_client.py. Skipped (with the reason) while `nereid serve` does not serve gRPC."""

from __future__ import annotations

import asyncio
import queue

import grpc
import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.grpc.aio as aiogrpcclient
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
from tritonclient.grpc import service_pb2, service_pb2_grpc
from tritonclient.utils import InferenceServerException


def status_of(excinfo) -> str:
    return str(excinfo.value.status())


# --- inference ---------------------------------------------------------------------------------------------------


def test_infer_simple(grpc_client):
    result = grpc_client.infer("simple", simple_inputs(grpcclient), outputs=simple_outputs(grpcclient), request_id="r1")
    check_simple(result)
    response = result.get_response()
    assert response.model_name == "simple" and response.model_version == "1" and response.id == "r1"
    assert result.get_output("OUTPUT0").datatype == "INT32"
    assert list(result.get_output("OUTPUT0").shape) == [1, 16]
    as_json = result.get_response(as_json=True)
    assert as_json["model_name"] == "simple"


def test_infer_all_outputs_batch_and_version(grpc_client):
    a = np.arange(8 * 16, dtype=np.int32).reshape(8, 16)
    b = np.full((8, 16), -2, dtype=np.int32)
    check_simple(grpc_client.infer("simple", simple_inputs(grpcclient, a, b), model_version="1"), a, b)


@pytest.mark.parametrize("algorithm", ["gzip", "deflate"])
def test_infer_compressed_request(grpc_client, algorithm):
    check_simple(grpc_client.infer("simple", simple_inputs(grpcclient), compression_algorithm=algorithm))


def test_infer_with_headers_parameters_and_timeouts(grpc_client):
    result = grpc_client.infer(
        "simple",
        simple_inputs(grpcclient),
        headers={"x-compat": "1"},
        parameters={"custom_str": "x", "custom_int": 3, "custom_bool": True},
        client_timeout=30,
        priority=0,
    )
    check_simple(result)


def test_async_infer_with_callbacks(grpc_client):
    done: queue.Queue = queue.Queue()
    for k in range(6):
        grpc_client.async_infer(
            "simple",
            simple_inputs(grpcclient, INPUT0 + k),
            callback=lambda result, error, k=k: done.put((k, result, error)),
            request_id=str(k),
        )
    seen = set()
    for _ in range(6):
        k, result, error = done.get(timeout=30)
        assert error is None, error
        check_simple(result, INPUT0 + k)
        assert result.get_response().id == str(k)
        seen.add(k)
    assert seen == set(range(6))


def test_async_infer_error_reaches_callback(grpc_client):
    done: queue.Queue = queue.Queue()
    grpc_client.async_infer("wrong_model_name", simple_inputs(grpcclient), callback=lambda result, error: done.put((result, error)))
    result, error = done.get(timeout=30)
    assert result is None and isinstance(error, InferenceServerException)
    assert error.status() == "StatusCode.NOT_FOUND"


def test_keepalive_and_channel_args(grpc_url):
    """simple_grpc_keepalive_client.py / simple_grpc_custom_args_client.py: client-side channel settings."""
    keepalive = grpcclient.KeepAliveOptions(keepalive_time_ms=2**31 - 1, keepalive_timeout_ms=20000)
    client = grpcclient.InferenceServerClient(grpc_url, keepalive_options=keepalive)
    try:
        check_simple(client.infer("simple", simple_inputs(grpcclient)))
    finally:
        client.close()
    client = grpcclient.InferenceServerClient(grpc_url, channel_args=[("grpc.max_receive_message_length", 2**31 - 1)])
    try:
        check_simple(client.infer("simple", simple_inputs(grpcclient)))
    finally:
        client.close()


# --- streaming ---------------------------------------------------------------------------------------------------


def test_stream_infer_in_order_with_mid_stream_error(grpc_client):
    responses: queue.Queue = queue.Queue()
    grpc_client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        for k in range(5):
            model = "wrong_model_name" if k == 2 else "simple"
            grpc_client.async_stream_infer(
                model, simple_inputs(grpcclient, INPUT0 * k), outputs=simple_outputs(grpcclient), request_id=f"s{k}"
            )
        got = [responses.get(timeout=30) for _ in range(5)]
    finally:
        grpc_client.stop_stream()
    ok = [(r, e) for r, e in got if e is None]
    errors = [e for r, e in got if e is not None]
    assert len(ok) == 4 and len(errors) == 1
    assert "wrong_model_name" in errors[0].message()
    for result, _ in ok:
        k = int(result.get_response().id[1:])
        check_simple(result, INPUT0 * k)
    assert [r.get_response().id for r, _ in ok] == ["s0", "s1", "s3", "s4"]


def test_stream_restarts_after_stop(grpc_client):
    for round_ in range(2):
        responses: queue.Queue = queue.Queue()
        grpc_client.start_stream(callback=lambda result, error, q=responses: q.put((result, error)))
        grpc_client.async_stream_infer("simple", simple_inputs(grpcclient, INPUT0 + round_))
        result, error = responses.get(timeout=30)
        grpc_client.stop_stream()
        assert error is None
        check_simple(result, INPUT0 + round_)


def test_aio_client_flow(grpc_url):
    async def flow():
        async with aiogrpcclient.InferenceServerClient(grpc_url) as client:
            assert await client.is_server_live()
            assert await client.is_server_ready()
            assert await client.is_model_ready("simple")
            assert (await client.get_model_metadata("simple")).name == "simple"
            assert (await client.get_model_config("simple")).config.max_batch_size == 8
            results = await asyncio.gather(
                *(client.infer("simple", simple_inputs(grpcclient, INPUT0 + k)) for k in range(4))
            )
            for k, result in enumerate(results):
                check_simple(result, INPUT0 + k)
            stats = await client.get_inference_statistics("simple", as_json=True)
            assert stats["model_stats"][0]["name"] == "simple"
            with pytest.raises(InferenceServerException) as err:
                await client.infer("wrong_model_name", simple_inputs(grpcclient))
            assert status_of(err) == "StatusCode.NOT_FOUND"

            async def requests():
                for k in range(4):
                    yield {
                        "model_name": "simple",
                        "inputs": simple_inputs(grpcclient, INPUT0 + k),
                        "outputs": simple_outputs(grpcclient),
                        "request_id": str(k),
                    }

            seen = []
            async for result, error in client.stream_infer(inputs_iterator=requests()):
                assert error is None, error
                k = int(result.get_response().id)
                check_simple(result, INPUT0 + k)
                seen.append(k)
            assert seen == [0, 1, 2, 3]

    asyncio.run(flow())


# --- raw stubs with typed contents (grpc_explicit_*_content_client.py) ----------------------------------------------


def _raw_request(model, datatype, field, a, b):
    request = service_pb2.ModelInferRequest(model_name=model)
    for name, data in (("INPUT0", a), ("INPUT1", b)):
        tensor = service_pb2.ModelInferRequest().InferInputTensor(name=name, datatype=datatype, shape=[1, 16])
        getattr(tensor.contents, field)[:] = list(data.flatten())
        request.inputs.append(tensor)
    for name in ("OUTPUT0", "OUTPUT1"):
        request.outputs.append(service_pb2.ModelInferRequest().InferRequestedOutputTensor(name=name))
    return request


@pytest.mark.parametrize(
    "model,datatype,field,dtype",
    [
        ("simple", "INT32", "int_contents", np.int32),
        ("simple_int8", "INT8", "int_contents", np.int8),
        ("simple_string", "BYTES", "bytes_contents", None),
    ],
)
def test_typed_contents_with_raw_stub(grpc_url, model, datatype, field, dtype):
    a, b = (INPUT0, INPUT1) if dtype is not np.int8 else (INPUT0.astype(np.int8), INPUT1.astype(np.int8))
    if dtype is None:
        a, b = string_tensors()
    with grpc.insecure_channel(grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        response = stub.ModelInfer(_raw_request(model, datatype, field, a, b))
    assert [o.name for o in response.outputs] == ["OUTPUT0", "OUTPUT1"]
    assert len(response.raw_output_contents) == 2
    if dtype is None:
        result = grpcclient.InferResult(response)
        check_simple_string(result)
    else:
        out0 = np.frombuffer(response.raw_output_contents[0], dtype=dtype).reshape(1, 16)
        out1 = np.frombuffer(response.raw_output_contents[1], dtype=dtype).reshape(1, 16)
        np.testing.assert_array_equal(out0, a + b)
        np.testing.assert_array_equal(out1, a - b)


def test_raw_stub_health_and_metadata(grpc_url):
    with grpc.insecure_channel(grpc_url) as channel:
        stub = service_pb2_grpc.GRPCInferenceServiceStub(channel)
        assert stub.ServerLive(service_pb2.ServerLiveRequest()).live
        assert stub.ServerReady(service_pb2.ServerReadyRequest()).ready
        assert stub.ModelReady(service_pb2.ModelReadyRequest(name="simple", version="")).ready
        metadata = stub.ModelMetadata(service_pb2.ModelMetadataRequest(name="simple"))
        assert [(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] == [
            ("INPUT0", "INT32", [-1, 16]),
            ("INPUT1", "INT32", [-1, 16]),
        ]
        with pytest.raises(grpc.RpcError) as err:
            stub.ModelMetadata(service_pb2.ModelMetadataRequest(name="wrong_model_name"))
        assert err.value.code() == grpc.StatusCode.NOT_FOUND


# --- datatypes ---------------------------------------------------------------------------------------------------


def test_bytes_simple_string(grpc_client):
    a, b = string_tensors()
    result = grpc_client.infer("simple_string", simple_inputs(grpcclient, a, b, "BYTES"), outputs=simple_outputs(grpcclient))
    check_simple_string(result)


def test_bytes_identity_utf8(grpc_client):
    data = np.array([["hello", "wörld", "", "日本語"]], dtype=np.object_)
    inp = grpcclient.InferInput("INPUT0", list(data.shape), "BYTES")
    inp.set_data_from_numpy(data)
    out = grpc_client.infer("simple_identity", [inp]).as_numpy("OUTPUT0")
    assert [s.decode() for s in out.flatten()] == list(data.flatten())


def test_bytes_with_embedded_nul_is_never_silently_truncated(grpc_client):
    data = np.array([[b"\x00\x01\x02\x03"] * 4], dtype=np.object_)
    inp = grpcclient.InferInput("INPUT0", [1, 4], "BYTES")
    inp.set_data_from_numpy(data)
    try:
        result = grpc_client.infer("simple_identity", [inp])
    except InferenceServerException as e:
        assert e.status() == "StatusCode.INVALID_ARGUMENT"
        return
    np.testing.assert_array_equal(result.as_numpy("OUTPUT0"), data)


def test_int8(grpc_client):
    a = np.arange(-8, 8, dtype=np.int8).reshape(1, 16)
    b = np.full((1, 16), 2, dtype=np.int8)
    result = grpc_client.infer("simple_int8", simple_inputs(grpcclient, a, b, "INT8"))
    check_simple(result, a, b)


def test_classification_class_count(grpc_client):
    inputs = classifier_input(grpcclient, batch=3)
    probs = grpc_client.infer("classifier", inputs).as_numpy("PROBS")
    result = grpc_client.infer("classifier", inputs, outputs=[grpcclient.InferRequestedOutput("PROBS", class_count=3)])
    assert result.get_output("PROBS").datatype == "BYTES"
    check_classification(probs, result.as_numpy("PROBS"), 3)


# --- health, metadata, config, statistics, settings -------------------------------------------------------------------


def test_health_and_metadata(grpc_client):
    """simple_grpc_health_metadata.py's calls (the name check is in test_repository.py, on a server named triton)."""
    assert grpc_client.is_server_live()
    assert grpc_client.is_server_ready()
    assert grpc_client.is_model_ready("simple")
    assert not grpc_client.is_model_ready("simple", "2")
    assert not grpc_client.is_model_ready("wrong_model_name")
    metadata = grpc_client.get_server_metadata()
    assert metadata.name == "triton" and metadata.version
    assert "binary_tensor_data" in metadata.extensions
    model = grpc_client.get_model_metadata("simple", headers={"x-compat": "1"})
    assert model.name == "simple" and list(model.versions) == ["1"] and model.platform == "onnxruntime_onnx"
    assert grpc_client.get_model_metadata("simple", as_json=True)["inputs"][0]["shape"] == ["-1", "16"]
    with pytest.raises(InferenceServerException) as err:
        grpc_client.get_model_metadata("wrong_model_name")
    assert status_of(err) == "StatusCode.NOT_FOUND"


def test_model_config(grpc_client):
    config = grpc_client.get_model_config("simple").config
    assert config.name == "simple" and config.max_batch_size == 8
    assert [(i.name, list(i.dims)) for i in config.input] == [("INPUT0", [16]), ("INPUT1", [16])]
    as_json = grpc_client.get_model_config("text_encoder", as_json=True)["config"]
    assert {i["name"] for i in as_json["input"]} == {"input_ids", "attention_mask", "token_type_ids"}


def test_statistics_count_inferences(grpc_client):
    def stats():
        s = grpc_client.get_inference_statistics("simple", "1").model_stats
        assert len(s) == 1
        return s[0]

    before = stats()
    grpc_client.infer("simple", simple_inputs(grpcclient, np.zeros((3, 16), np.int32), np.ones((3, 16), np.int32)))
    after = stats()
    assert after.inference_count - before.inference_count == 3
    assert after.inference_stats.success.count - before.inference_stats.success.count == 1
    assert after.inference_stats.compute_infer.ns >= before.inference_stats.compute_infer.ns
    all_stats = grpc_client.get_inference_statistics(as_json=True)["model_stats"]
    assert {"simple", "classifier", "text_encoder"} <= {s["name"] for s in all_stats}


def test_log_and_trace_settings(grpc_client):
    settings = grpc_client.get_log_settings(as_json=True)["settings"]
    assert "log_verbose_level" in settings
    grpc_client.update_log_settings({"log_verbose_level": 0})
    trace = grpc_client.get_trace_settings(as_json=True)["settings"]
    assert "trace_rate" in trace
    updated = grpc_client.update_trace_settings("simple", {"trace_rate": "100"}, as_json=True)["settings"]
    assert updated["trace_rate"]["value"] == ["100"]
    grpc_client.update_trace_settings("simple", {"trace_rate": None})


def test_shared_memory_register_is_unimplemented(grpc_client):
    with pytest.raises(InferenceServerException) as err:
        grpc_client.register_system_shared_memory("r", "/nereid_compat", 64)
    assert status_of(err) == "StatusCode.UNIMPLEMENTED"


# --- errors ------------------------------------------------------------------------------------------------------------


def test_metadata_of_256_kib_fails_fast(grpc_client):
    """Regression: metadata past HTTP/2's 64 KiB header field limit hung this client until its deadline."""
    with pytest.raises(InferenceServerException) as err:
        grpc_client.is_server_live(headers={"x-big": "a" * (256 * 1024)}, client_timeout=30)
    # Failing at once is told by the code, not a clock: waiting for the deadline would be DEADLINE_EXCEEDED.
    assert status_of(err) in ("StatusCode.UNAVAILABLE", "StatusCode.RESOURCE_EXHAUSTED", "StatusCode.INTERNAL")
    # A fresh connection serves normally.
    assert grpc_client.is_server_live()



def test_unknown_model_is_not_found(grpc_client):
    with pytest.raises(InferenceServerException) as err:
        grpc_client.infer("wrong_model_name", simple_inputs(grpcclient))
    assert status_of(err) == "StatusCode.NOT_FOUND"
    for call in (
        lambda: grpc_client.get_model_config("wrong_model_name"),
        lambda: grpc_client.get_inference_statistics("wrong_model_name"),
        lambda: grpc_client.get_model_metadata("simple", "7"),
    ):
        with pytest.raises(InferenceServerException) as err:
            call()
        assert status_of(err) == "StatusCode.NOT_FOUND"


@pytest.mark.parametrize("case", ["wrong_dtype", "wrong_shape", "batch_too_large", "unknown_input", "missing_input"])
def test_bad_requests_are_invalid_argument(grpc_client, case):
    inputs = simple_inputs(grpcclient)
    if case == "wrong_dtype":
        inputs[0] = grpcclient.InferInput("INPUT0", [1, 16], "FP32")
        inputs[0].set_data_from_numpy(INPUT0.astype(np.float32))
    elif case == "wrong_shape":
        inputs = simple_inputs(grpcclient, INPUT0[:, :15], INPUT1[:, :15])
    elif case == "batch_too_large":
        inputs = simple_inputs(grpcclient, np.zeros((9, 16), np.int32), np.zeros((9, 16), np.int32))
    elif case == "unknown_input":
        inputs[1] = grpcclient.InferInput("INPUT9", [1, 16], "INT32")
        inputs[1].set_data_from_numpy(INPUT1)
    elif case == "missing_input":
        inputs = inputs[:1]
    with pytest.raises(InferenceServerException) as err:
        grpc_client.infer("simple", inputs)
    assert status_of(err) == "StatusCode.INVALID_ARGUMENT", err.value.message()


def test_load_is_refused_outside_explicit_mode(grpc_client):
    with pytest.raises(InferenceServerException) as err:
        grpc_client.load_model("simple")
    assert "explicit" in err.value.message()
