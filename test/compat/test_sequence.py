"""Triton's sequence client flows against Nereid's sequence batcher, written after the shape of Triton's
simple_{http,grpc}_sequence_sync_infer_client.py and simple_grpc_sequence_stream_infer_client.py (with and
without --dyna): two integer-id sequences interleaved, one string-id sequence, START on the first request and END
on the last. Nereid's models (models.py) accumulate INPUT in implicit state; the dyna ones add the correlation id
to the END response."""

from __future__ import annotations

import queue
import uuid

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from tritonclient.utils import InferenceServerException

VALUES = [11, 7, 5, 3, 2, 0, 1]


def _inputs(client, value: int):
    inp = client.InferInput("INPUT", [1, 1], "INT32")
    inp.set_data_from_numpy(np.full((1, 1), value, dtype=np.int32))
    return [inp]


def _expected(values: list[int], corrid: int = 0) -> list[int]:
    sums = list(np.cumsum(values))
    sums[-1] += corrid
    return [int(v) for v in sums]


def _sync_sequence(client, module, model: str, sequence_id, values: list[int]) -> list[int]:
    results = []
    for i, value in enumerate(values):
        result = client.infer(
            model,
            _inputs(module, value),
            outputs=[module.InferRequestedOutput("OUTPUT")],
            sequence_id=sequence_id,
            sequence_start=(i == 0),
            sequence_end=(i == len(values) - 1),
        )
        results.append(int(result.as_numpy("OUTPUT")[0][0]))
    return results


@pytest.mark.parametrize("dyna", [False, True])
@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sequence_sync_flow(http_client, grpc_client, protocol, dyna):
    client, module = (http_client, httpclient) if protocol == "http" else (grpc_client, grpcclient)
    int_model = "simple_dyna_sequence" if dyna else "simple_sequence"
    string_model = "simple_string_dyna_sequence" if dyna else "simple_sequence"
    offset = 10 if protocol == "grpc" else 0
    id0, id1 = 1000 + offset, 1001 + offset
    # The dyna string model casts its id to an integer; the other takes any string, as Triton's example does.
    string_id = str(1002 + offset) if dyna else str(uuid.uuid4())
    seq0 = [0] + VALUES
    seq1 = [100] + [-v for v in VALUES]
    seq2 = [20] + [-v for v in VALUES]
    got0 = _sync_sequence(client, module, int_model, id0, seq0)
    got1 = _sync_sequence(client, module, int_model, id1, seq1)
    got2 = _sync_sequence(client, module, string_model, string_id, seq2)
    assert got0 == _expected(seq0, id0 if dyna else 0)
    assert got1 == _expected(seq1, id1 if dyna else 0)
    assert got2 == _expected(seq2, int(string_id) if dyna else 0)


@pytest.mark.parametrize("dyna", [False, True])
def test_sequence_stream_flow(grpc_client, dyna):
    """simple_grpc_sequence_stream_infer_client.py: both sequences interleaved on one stream."""
    model = "simple_dyna_sequence" if dyna else "simple_sequence"
    id0, id1 = 2000 + int(dyna), 2002 + int(dyna)
    seq0 = [0] + VALUES
    seq1 = [100] + [-v for v in VALUES]
    responses: queue.Queue = queue.Queue()
    grpc_client.start_stream(callback=lambda result, error: responses.put((result, error)))
    try:
        for i in range(len(seq0)):
            for sid, values in ((id0, seq0), (id1, seq1)):
                grpc_client.async_stream_infer(
                    model,
                    _inputs(grpcclient, values[i]),
                    request_id=f"{sid}_{i}",
                    sequence_id=sid,
                    sequence_start=(i == 0),
                    sequence_end=(i == len(values) - 1),
                )
        got: dict[int, list[int]] = {id0: [], id1: []}
        for _ in range(2 * len(seq0)):
            result, error = responses.get(timeout=30)
            assert error is None, error
            sid = int(result.get_response().id.split("_")[0])
            got[sid].append(int(result.as_numpy("OUTPUT")[0][0]))
    finally:
        grpc_client.stop_stream()
    assert got[id0] == _expected(seq0, id0 if dyna else 0)
    assert got[id1] == _expected(seq1, id1 if dyna else 0)


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sequence_errors_reach_the_client(http_client, grpc_client, protocol):
    client, module = (http_client, httpclient) if protocol == "http" else (grpc_client, grpcclient)
    with pytest.raises(InferenceServerException, match="must specify the START flag on the first request"):
        client.infer("simple_sequence", _inputs(module, 1), sequence_id=31337)
    with pytest.raises(InferenceServerException, match="must specify a non-zero or non-empty correlation ID"):
        client.infer("simple_sequence", _inputs(module, 1))
    with pytest.raises(InferenceServerException, match="data-type is 'BYTES', but model 'simple_dyna_sequence'"):
        client.infer("simple_dyna_sequence", _inputs(module, 1), sequence_id="abc", sequence_start=True)
