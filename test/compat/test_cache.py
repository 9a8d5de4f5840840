"""Triton's clients against Nereid's response cache (``nereid serve --cache-config=local,size=1048576``, model
``simple_cached``): a repeated request is answered identically from the cache, and the statistics extension shows
``cache_hit`` / ``cache_miss`` as Triton's clients read them."""

from __future__ import annotations

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
import tritonclient.http as httpclient
from common import check_simple, simple_inputs


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_repeated_request_is_a_cache_hit(http_client, grpc_client, protocol):
    client, module = (http_client, httpclient) if protocol == "http" else (grpc_client, grpcclient)
    a = np.full((1, 16), 41 if protocol == "http" else 42, dtype=np.int32)
    b = np.arange(16, dtype=np.int32).reshape(1, 16)
    first = client.infer("simple_cached", simple_inputs(module, a, b))
    second = client.infer("simple_cached", simple_inputs(module, a, b))
    check_simple(first, a, b)
    check_simple(second, a, b)
    stats = client.get_inference_statistics("simple_cached")
    if protocol == "grpc":
        s = stats.model_stats[0]
        hits, misses, success = s.inference_stats.cache_hit.count, s.inference_stats.cache_miss.count, s.inference_stats.success.count
        inferences = s.inference_count
    else:
        s = stats["model_stats"][0]
        hits = s["inference_stats"]["cache_hit"]["count"]
        misses = s["inference_stats"]["cache_miss"]["count"]
        success = s["inference_stats"]["success"]["count"]
        inferences = s["inference_count"]
    assert hits >= 1 and misses >= 1
    # A hit is a success but not an inference (Triton's counting).
    assert success == hits + misses and inferences == misses
