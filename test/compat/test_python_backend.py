"""Python models (the python backend, model.py) through Triton's own clients, as Triton's python_backend examples
call them: add_sub (examples/add_sub/client.py), BLS, auto-complete, and an execute that raises.

The server here serves examples/python_repository plus test/fixtures/python (some of whose models fail on purpose,
hence --exit-on-error=false).
"""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from conftest import ROOT, _start
from tritonclient.utils import InferenceServerException, np_to_triton_dtype

FIXTURES = ROOT / "test" / "fixtures" / "python"
EXAMPLES = ROOT / "examples" / "python_repository"


@pytest.fixture(scope="module")
def pyserver(tmp_path_factory):
    args = [f"--model-repository={EXAMPLES}", f"--model-repository={FIXTURES}", "--exit-on-error=false"]
    server = _start("python", "NEREID_PYTHON", args, tmp_path_factory.mktemp("python-logs"), pinned=False)
    yield server
    server.stop()


def add_sub_inputs(client, a, b):
    inputs = [
        client.InferInput("INPUT0", list(a.shape), np_to_triton_dtype(a.dtype)),
        client.InferInput("INPUT1", list(b.shape), np_to_triton_dtype(b.dtype)),
    ]
    inputs[0].set_data_from_numpy(a)
    inputs[1].set_data_from_numpy(b)
    return inputs


A = np.random.default_rng(0).random(4, dtype=np.float32)
B = np.random.default_rng(1).random(4, dtype=np.float32)


@pytest.mark.parametrize("client_module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_add_sub(pyserver, client_module):
    url = pyserver.http_url if client_module is httpclient else pyserver.grpc_url
    with client_module.InferenceServerClient(url) as client:
        outputs = [client_module.InferRequestedOutput("OUTPUT0"), client_module.InferRequestedOutput("OUTPUT1")]
        result = client.infer("add_sub", add_sub_inputs(client_module, A, B), request_id="1", outputs=outputs)
        np.testing.assert_allclose(result.as_numpy("OUTPUT0"), A + B)
        np.testing.assert_allclose(result.as_numpy("OUTPUT1"), A - B)


def test_add_sub_metadata_and_config(pyserver):
    with httpclient.InferenceServerClient(pyserver.http_url) as client:
        assert client.is_model_ready("add_sub")
        meta = client.get_model_metadata("add_sub")
        assert [i["name"] for i in meta["inputs"]] == ["INPUT0", "INPUT1"]
        assert client.get_model_config("add_sub")["backend"] == "python"


@pytest.mark.parametrize("mode", [{}, {"async": True}], ids=["exec", "async_exec"])
def test_bls(pyserver, mode):
    with httpclient.InferenceServerClient(pyserver.http_url) as client:
        name = httpclient.InferInput("MODEL_NAME", [1], "BYTES")
        name.set_data_from_numpy(np.array(["add_sub"], dtype=np.object_))
        result = client.infer("bls", [name, *add_sub_inputs(httpclient, A, B)], parameters=mode)
        np.testing.assert_allclose(result.as_numpy("OUTPUT0"), A + B)
        np.testing.assert_allclose(result.as_numpy("OUTPUT1"), A - B)


def test_bls_to_unknown_model_fails_with_the_model_error(pyserver):
    with httpclient.InferenceServerClient(pyserver.http_url) as client:
        name = httpclient.InferInput("MODEL_NAME", [1], "BYTES")
        name.set_data_from_numpy(np.array(["no_such_model"], dtype=np.object_))
        with pytest.raises(InferenceServerException) as e:
            client.infer("bls", [name, *add_sub_inputs(httpclient, A, B)])
        assert "Failed to process the request(s) for model instance 'bls_0'" in e.value.message()
        assert "no_such_model" in e.value.message()


def test_auto_complete(pyserver):
    with grpcclient.InferenceServerClient(pyserver.grpc_url) as client:
        config = client.get_model_config("auto_complete", as_json=True)["config"]
        assert config["max_batch_size"] == 4
        assert [i["name"] for i in config["input"]] == ["INPUT0", "INPUT1"]
        a = A.reshape(1, 4)
        result = client.infer("auto_complete", add_sub_inputs(grpcclient, a, a))
        np.testing.assert_allclose(result.as_numpy("OUTPUT0"), a + a)


@pytest.mark.parametrize("client_module", [httpclient, grpcclient], ids=["http", "grpc"])
def test_execute_raising(pyserver, client_module):
    url = pyserver.http_url if client_module is httpclient else pyserver.grpc_url
    with client_module.InferenceServerClient(url) as client:
        x = client_module.InferInput("INPUT0", [4], "FP32")
        x.set_data_from_numpy(A)
        with pytest.raises(InferenceServerException) as e:
            client.infer("faulty", [x], parameters={"mode": "raise"})
        assert e.value.message().startswith(
            "Failed to process the request(s) for model instance 'faulty_0', message: ValueError: boom from execute"
        )
        assert str(e.value.status()) in ("500", "StatusCode.INTERNAL")
        # The model serves on.
        np.testing.assert_allclose(client.infer("faulty", [x]).as_numpy("OUTPUT0"), A)


def test_model_failing_initialize_is_unavailable(pyserver):
    with httpclient.InferenceServerClient(pyserver.http_url) as client:
        index = {m["name"]: m for m in client.get_model_repository_index()}
        assert index["init_raises"]["state"] == "UNAVAILABLE"
        assert "RuntimeError: weights not found under" in index["init_raises"]["reason"]
        assert not client.is_model_ready("init_raises")


def test_decoupled_repeat_over_grpc_stream(pyserver):
    """Triton's decoupled client shape: start_stream, async_stream_infer, the empty final response flag."""
    import queue

    results: queue.Queue = queue.Queue()
    with grpcclient.InferenceServerClient(pyserver.grpc_url) as client:
        client.start_stream(callback=lambda result, error: results.put((result, error)))
        values = np.array([4, 2, 0, 1], dtype=np.int32)
        inputs = [
            grpcclient.InferInput("IN", [4], "INT32"),
            grpcclient.InferInput("DELAY", [4], "UINT32"),
            grpcclient.InferInput("WAIT", [1], "UINT32"),
        ]
        inputs[0].set_data_from_numpy(values)
        inputs[1].set_data_from_numpy(np.array([5, 5, 5, 5], dtype=np.uint32))
        inputs[2].set_data_from_numpy(np.array([5], dtype=np.uint32))
        client.async_stream_infer("repeat", inputs, request_id="r1", enable_empty_final_response=True)
        got = []
        while True:
            result, error = results.get(timeout=30)
            assert error is None, error
            response = result.get_response()
            if response.parameters["triton_final_response"].bool_param:
                break
            got.append((int(result.as_numpy("OUT")[0]), int(result.as_numpy("IDX")[0])))
            assert response.id == "r1"
        client.stop_stream()
    assert got == [(4, 0), (2, 1), (0, 2), (1, 3)]


def test_decoupled_model_on_unary_infer_is_refused(pyserver):
    with grpcclient.InferenceServerClient(pyserver.grpc_url) as client:
        x = grpcclient.InferInput("IN", [1], "INT32")
        x.set_data_from_numpy(np.array([3], dtype=np.int32))
        with pytest.raises(InferenceServerException) as e:
            client.infer("square", [x])
        assert "doesn't support models with decoupled transaction policy" in e.value.message()
