"""Model repository extension through Triton's clients on a server in explicit model control mode (started with
`--id triton`): the flows of simple_http_model_control.py, simple_grpc_model_control.py and
simple_{http,grpc}_health_metadata.py, over both protocols."""

from __future__ import annotations

import json

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from common import ROOT, check_simple, simple_inputs
from tritonclient.utils import InferenceServerException

SIMPLE_ONNX = (ROOT / "examples" / "model_repository" / "simple" / "1" / "model.onnx").read_bytes()


class Http:
    """The calls the tests need, over tritonclient.http; configs and indexes as plain JSON."""

    module = httpclient
    not_found = "404"

    def __init__(self, url: str):
        self.client = httpclient.InferenceServerClient(url)

    def index(self) -> list[dict]:
        return self.client.get_model_repository_index()

    def config(self, name: str) -> dict:
        return self.client.get_model_config(name)

    def server_name(self) -> str:
        return self.client.get_server_metadata()["name"]

    def close(self) -> None:
        self.client.close()


class Grpc:
    module = grpcclient
    not_found = "StatusCode.NOT_FOUND"

    def __init__(self, url: str):
        self.client = grpcclient.InferenceServerClient(url)

    def index(self) -> list[dict]:
        return self.client.get_model_repository_index(as_json=True).get("models", [])

    def config(self, name: str) -> dict:
        return self.client.get_model_config(name, as_json=True)["config"]

    def server_name(self) -> str:
        return self.client.get_server_metadata().name

    def close(self) -> None:
        self.client.close()


@pytest.fixture(params=["http", "grpc"])
def repo(request, explicit):
    if request.param == "http":
        api = Http(explicit.http_url)
    else:
        api = Grpc(request.getfixturevalue("explicit_grpc_url"))
    yield api
    api.close()


def _int(v) -> int:
    return int(v)  # gRPC JSON prints int64 as strings


def test_server_named_by_id_passes_health_metadata_flow(repo):
    """simple_*_health_metadata.py require the name 'triton': `--id triton` gives it."""
    assert repo.client.is_server_live()
    assert repo.server_name() == "triton"


def test_index_lists_every_model_before_any_load(repo):
    names = {m["name"] for m in repo.index()}
    assert {"simple", "classifier", "text_encoder", "simple_string", "simple_int8", "simple_identity"} <= names


def test_load_infer_unload(repo):
    c = repo.client
    c.load_model("simple")
    assert c.is_model_ready("simple")
    assert any(m["name"] == "simple" and m["state"] == "READY" for m in repo.index())
    check_simple(c.infer("simple", simple_inputs(repo.module)))
    c.unload_model("simple")
    assert not c.is_model_ready("simple")
    states = {m["name"]: m for m in repo.index()}
    assert states["simple"]["state"] == "UNAVAILABLE"
    with pytest.raises(InferenceServerException):
        c.infer("simple", simple_inputs(repo.module))


def test_load_with_config_override(repo):
    c = repo.client
    c.load_model("simple")
    c.load_model("simple", config='{"max_batch_size":"16"}')
    assert _int(repo.config("simple")["max_batch_size"]) == 16
    a = np.zeros((12, 16), np.int32)
    check_simple(c.infer("simple", simple_inputs(repo.module, a, a + 1)), a, a + 1)
    # Loading again without an override goes back to the repository's config.
    c.load_model("simple")
    assert _int(repo.config("simple")["max_batch_size"]) == 8
    c.unload_model("simple")


def test_malformed_config_override_is_refused_and_model_keeps_serving(repo):
    c = repo.client
    c.load_model("simple")
    with pytest.raises(InferenceServerException):
        c.load_model("simple", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
    assert c.is_model_ready("simple")
    assert _int(repo.config("simple")["max_batch_size"]) == 8
    c.unload_model("simple")


def test_malformed_config_override_message_matches_triton(repo):
    with pytest.raises(InferenceServerException) as err:
        repo.client.load_model("simple", config='"parameters": {"config": {{"max_batch_size": "16"}}}')
    assert "failed to load" in err.value.message()


def test_load_unknown_model_fails_to_load(repo):
    with pytest.raises(InferenceServerException) as err:
        repo.client.load_model("wrong_model_name")
    assert "failed to load" in err.value.message()
    assert repo.client.is_server_live()


def test_load_new_model_from_file_override(repo):
    """A model that is not in the repository, sent as config + `file:1/model.onnx`."""
    name = f"override_{type(repo).__name__.lower()}"
    config = {
        "name": name,
        "platform": "onnxruntime_onnx",
        "max_batch_size": 8,
        "input": [{"name": n, "data_type": "TYPE_INT32", "dims": [16]} for n in ("INPUT0", "INPUT1")],
        "output": [{"name": n, "data_type": "TYPE_INT32", "dims": [16]} for n in ("OUTPUT0", "OUTPUT1")],
    }
    c = repo.client
    c.load_model(name, config=json.dumps(config), files={"file:1/model.onnx": SIMPLE_ONNX})
    assert c.is_model_ready(name)
    check_simple(c.infer(name, simple_inputs(repo.module)))
    c.unload_model(name)
    assert not c.is_model_ready(name)


def test_file_override_escaping_the_model_directory_is_refused(repo):
    c = repo.client
    for path in ("file:../../evil/model.onnx", "file:" + "A" * 256):
        with pytest.raises(InferenceServerException):
            c.load_model("simple", config="{}", files={path: b"a"})
    assert c.is_server_live()


def test_unload_with_dependents_flag(repo):
    c = repo.client
    c.load_model("classifier")
    c.unload_model("classifier", unload_dependents=True)
    assert not c.is_model_ready("classifier")


def test_unknown_model_readiness_and_metadata(repo):
    assert not repo.client.is_model_ready("wrong_model_name")
    with pytest.raises(InferenceServerException) as err:
        repo.client.get_model_metadata("wrong_model_name")
    assert str(err.value.status()) == repo.not_found
