"""perf_analyzer (Triton's load generator, .venv/bin/perf_analyzer from scripts/setup-python.sh) measures `simple`
against Nereid without errors. It reads Nereid's statistics extension before and after each window for its
"Server:" section, so that section must parse and count what was sent."""

from __future__ import annotations

import csv
import os
import re
import subprocess
from pathlib import Path

import pytest
from common import ROOT

PERF_ANALYZER = Path(os.environ.get("PERF_ANALYZER", ROOT / ".venv" / "bin" / "perf_analyzer"))
# Stability is not what is tested here (and a busy 2-core CI machine is noisy): a wide band keeps runs short.
COMMON = ["--measurement-interval", "1000", "--stability-percentage", "100", "--max-trials", "10"]


def perf_analyzer(args: list[str], tmp_path: Path) -> tuple[str, list[dict]]:
    if not PERF_ANALYZER.exists():
        pytest.skip(f"no perf_analyzer at {PERF_ANALYZER} (run scripts/setup-python.sh)")
    out_csv = tmp_path / "out.csv"
    proc = subprocess.run(
        [str(PERF_ANALYZER), *args, *COMMON, "-f", str(out_csv)],
        capture_output=True,
        text=True,
        timeout=180,
    )
    output = proc.stdout + proc.stderr
    assert proc.returncode == 0, output
    assert not re.search(r"error|failed", output, re.IGNORECASE), output
    with open(out_csv, newline="") as f:
        rows = list(csv.DictReader(f))
    return output, rows


def check_server_sections(output: str, levels: int) -> None:
    """Each concurrency level has a "Server:" section whose counts come from Nereid's statistics."""
    sections = output.split("Server:")[1:]
    assert len(sections) == levels, output
    for section in sections:
        counts = {
            k: int(v)
            for k, v in re.findall(r"(Inference count|Execution count|Successful request count): (\d+)", section)
        }
        assert counts.keys() == {"Inference count", "Execution count", "Successful request count"}, section
        assert counts["Inference count"] > 0 and counts["Successful request count"] > 0, section
        assert counts["Execution count"] <= counts["Inference count"], section
        assert re.search(r"Avg request latency: \d+ usec \(overhead \d+ usec \+ queue \d+ usec", section), section


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_concurrency_1_to_8(request, protocol, tmp_path):
    url = request.getfixturevalue("http_url" if protocol == "http" else "grpc_url")
    output, rows = perf_analyzer(
        ["-m", "simple", "-u", url, "-i", protocol, "--concurrency-range", "1:8:7"], tmp_path
    )
    assert [int(r["Concurrency"]) for r in rows] == [1, 8]
    assert all(float(r["Inferences/Second"]) > 0 for r in rows)
    check_server_sections(output, 2)
    assert output.count("Request count:") == 2


def test_grpc_streaming(grpc_url, tmp_path):
    output, rows = perf_analyzer(
        ["-m", "simple", "-u", grpc_url, "-i", "grpc", "--streaming", "--concurrency-range", "4"], tmp_path
    )
    assert float(rows[0]["Inferences/Second"]) > 0
    check_server_sections(output, 1)


def test_http_async_batched(http_url, tmp_path):
    output, rows = perf_analyzer(
        ["-m", "simple", "-u", http_url, "-i", "http", "--async", "-b", "4", "--concurrency-range", "4"], tmp_path
    )
    assert float(rows[0]["Inferences/Second"]) > 0
    check_server_sections(output, 1)
    # A batch of 4 counts 4 inferences per request.
    section = output.split("Server:")[1]
    inferences = int(re.search(r"Inference count: (\d+)", section).group(1))
    requests = int(re.search(r"Successful request count: (\d+)", section).group(1))
    assert inferences == 4 * requests


@pytest.mark.parametrize("protocol", ["http", "grpc"])
def test_sequence_model(request, protocol, tmp_path):
    """perf_analyzer drives a sequence model the way it drives Triton's: it reads sequence_batching from the config
    and sends sequences (sequence_id, START on the first request, END on the last) from several concurrent slots."""
    url = request.getfixturevalue("http_url" if protocol == "http" else "grpc_url")
    output, rows = perf_analyzer(
        ["-m", "simple_sequence", "-u", url, "-i", protocol, "--sequence-length", "5", "--concurrency-range", "4"],
        tmp_path,
    )
    assert float(rows[0]["Inferences/Second"]) > 0
    check_server_sections(output, 1)


def test_ensemble_model(grpc_url, tmp_path):
    """An ensemble measured like any model; its statistics count the ensemble requests."""
    output, rows = perf_analyzer(
        ["-m", "simple_ensemble", "-u", grpc_url, "-i", "grpc", "--concurrency-range", "4"], tmp_path
    )
    assert float(rows[0]["Inferences/Second"]) > 0
