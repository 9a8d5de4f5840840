"""tritonclient.utils.shared_memory flows against Nereid with --allow-client-shm, over HTTP and gRPC, unchanged from
how Triton's own clients and qa/L0_shared_memory use them: create and fill regions, register them, infer `simple`
with inputs read from and outputs written into shared memory, status, unregister (one, all), Triton's bounds checks
and their messages, reserved and invalid keys, a region registered twice, raw and shared-memory inputs mixed."""

from __future__ import annotations

import base64
import os

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
import tritonclient.utils.shared_memory as shm
from common import INPUT0, INPUT1
from conftest import _start
from tritonclient.utils import InferenceServerException

SIZE = 64  # one [1, 16] INT32 tensor
PID = os.getpid()


@pytest.fixture(scope="module")
def shm_server(extra_repository, tmp_path_factory):
    from conftest import EXAMPLES

    args = [f"--model-repository={EXAMPLES}", "--allow-client-shm=true"]
    server = _start("shm", "NEREID_SHM", args, tmp_path_factory.mktemp("logs"), pinned=False)
    yield server
    server.stop()


@pytest.fixture(params=["http", "grpc"])
def proto(request, shm_server):
    if request.param == "grpc" and not shm_server.grpc_ok:
        pytest.skip(shm_server.grpc_reason)
    module = httpclient if request.param == "http" else grpcclient
    url = shm_server.http_url if request.param == "http" else shm_server.grpc_url
    client = module.InferenceServerClient(url)
    client.unregister_system_shared_memory()
    handles = []
    yield request.param, module, client, handles
    client.unregister_system_shared_memory()
    for h in handles:
        shm.destroy_shared_memory_region(h)
    client.close()


def regions_of(protocol, status):
    return [r["name"] for r in status] if protocol == "http" else list(status.regions.keys())


def make(handles, client, name, size=SIZE, data=None, offset=0, register=True):
    key = f"/nereid_compat_{PID}_{name}"
    h = shm.create_shared_memory_region(name, key, size)
    handles.append(h)
    if data is not None:
        shm.set_shared_memory_region(h, [data], offset=offset)
    if register:
        client.register_system_shared_memory(name, key, size)
    return h, key


def simple_shm_infer(module, client, out_offset=0, out_size=SIZE, in1=None):
    inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("input0", SIZE)
    if in1 is None:
        inputs[1].set_shared_memory("input1", SIZE)
    else:
        inputs[1].set_data_from_numpy(in1)
    outputs = [module.InferRequestedOutput("OUTPUT0"), module.InferRequestedOutput("OUTPUT1")]
    outputs[0].set_shared_memory("output0", out_size, offset=out_offset)
    outputs[1].set_shared_memory("output1", SIZE)
    return client.infer("simple", inputs, outputs=outputs)


def test_infer_with_inputs_and_outputs_in_shared_memory(proto):
    protocol, module, client, handles = proto
    make(handles, client, "input0", data=INPUT0)
    make(handles, client, "input1", data=INPUT1)
    out0, _ = make(handles, client, "output0")
    out1, _ = make(handles, client, "output1")
    result = simple_shm_infer(module, client)
    o0 = result.get_output("OUTPUT0")
    shape = o0["shape"] if protocol == "http" else list(o0.shape)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out0, np.int32, shape), INPUT0 + INPUT1)
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out1, np.int32, [1, 16]), INPUT0 - INPUT1)
    assert sorted(regions_of(protocol, client.get_system_shared_memory_status())) == [
        "input0",
        "input1",
        "output0",
        "output1",
    ]


def test_mixed_raw_and_shared_memory_inputs(proto):
    _, module, client, handles = proto
    make(handles, client, "input0", data=INPUT0)
    out0, _ = make(handles, client, "output0")
    make(handles, client, "output1")
    simple_shm_infer(module, client, in1=np.full((1, 16), 3, dtype=np.int32))
    np.testing.assert_array_equal(shm.get_contents_as_numpy(out0, np.int32, [1, 16]), INPUT0 + 3)


def test_status_unregister_one_and_all(proto):
    protocol, _, client, handles = proto
    make(handles, client, "a")
    make(handles, client, "b")
    make(handles, client, "c", register=False)
    client.unregister_system_shared_memory("c")  # never registered: fine, as in Triton
    assert sorted(regions_of(protocol, client.get_system_shared_memory_status())) == ["a", "b"]
    client.unregister_system_shared_memory("a")
    assert regions_of(protocol, client.get_system_shared_memory_status()) == ["b"]
    client.unregister_system_shared_memory()
    assert regions_of(protocol, client.get_system_shared_memory_status()) == []


def test_reregister_is_already_in_manager(proto):
    _, _, client, handles = proto
    _, key = make(handles, client, "dummy_data")
    with pytest.raises(InferenceServerException, match="shared memory region 'dummy_data' already in manager"):
        client.register_system_shared_memory("dummy_data", key, SIZE)


def test_register_out_of_bound(proto):
    _, _, client, handles = proto
    _, key = make(handles, client, "oob", register=False)
    for byte_size, offset in ((SIZE + 1, 0), (SIZE, 1), (1, SIZE), (0, SIZE + 1)):
        with pytest.raises(InferenceServerException, match="failed to register shared memory region.*invalid args"):
            client.register_system_shared_memory("oob", key, byte_size, offset=offset)


def test_infer_offset_and_byte_size_out_of_bound(proto):
    protocol, module, client, handles = proto
    make(handles, client, "input0", data=INPUT0)
    make(handles, client, "input1", data=INPUT1)
    make(handles, client, "output0")
    make(handles, client, "output1")
    offset = 2**64 - 32 if protocol == "http" else SIZE
    with pytest.raises(InferenceServerException, match="Invalid offset for shared memory region"):
        simple_shm_infer(module, client, out_offset=offset)
    with pytest.raises(InferenceServerException, match="Invalid offset \\+ byte size for shared memory region"):
        simple_shm_infer(module, client, out_offset=1)
    if protocol == "http":
        with pytest.raises(InferenceServerException, match="Integer overflow detected: byte_size "):
            simple_shm_infer(module, client, out_offset=32, out_size=2**64 - 32)


def test_input_region_larger_than_the_input(proto):
    _, module, client, handles = proto
    make(handles, client, "input0", data=INPUT0)
    make(handles, client, "input1", data=INPUT1, size=128)
    make(handles, client, "output0")
    make(handles, client, "output1")
    inputs = [module.InferInput("INPUT0", [1, 16], "INT32"), module.InferInput("INPUT1", [1, 16], "INT32")]
    inputs[0].set_shared_memory("input0", SIZE)
    inputs[1].set_shared_memory("input1", 128)
    with pytest.raises(
        InferenceServerException,
        match="input byte size mismatch for input 'INPUT1' for model 'simple'. Expected 64, got 128",
    ):
        client.infer("simple", inputs)


def test_reserved_and_invalid_keys(proto):
    _, _, client, _ = proto
    reserved = "triton_python_backend_shm_region_"
    for key in (f"{reserved}_k", f"/{reserved}_k", f"///{reserved}_k"):
        with pytest.raises(InferenceServerException) as err:
            client.register_system_shared_memory("my_test_shm_name", key, 10000)
        assert (
            f"cannot register shared memory region 'my_test_shm_name' with key '{key}' as the key contains the "
            f"reserved prefix '{reserved}'"
        ) in str(err.value)
    for key in ("/", "///"):
        with pytest.raises(InferenceServerException) as err:
            client.register_system_shared_memory("my_test_shm_name", key, 10000)
        assert f"cannot register shared memory region 'my_test_shm_name' - invalid shm key '{key}'" in str(err.value)


def test_cuda_shared_memory_is_refused_without_gpu_support(proto):
    protocol, _, client, _ = proto
    with pytest.raises(InferenceServerException) as err:
        # What cuda_shared_memory.get_raw_handle returns: the 64-byte cudaIpcMemHandle_t, base64-encoded.
        client.register_cuda_shared_memory("c", base64.b64encode(b"\0" * 64), 0, 64)
    assert "GPUs not supported" in str(err.value)
    status = client.get_cuda_shared_memory_status()
    assert (status == []) if protocol == "http" else (len(status.regions) == 0)
