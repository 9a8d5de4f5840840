"""Starts real Nereid servers (from dist/, as `nereid serve` runs) for the compatibility suite and stops them after.

Two servers share the session:

- ``nereid``: model control mode none, the example repository plus a temporary repository of tiny models the
  examples lack (``simple_string``, ``simple_int8``, ``simple_identity``, the sequence models; see models.py).
- ``explicit``: the same repositories with ``--model-control-mode=explicit`` and ``--id triton``, for
  repository index/load/unload.

Ports are free ports picked here (or NEREID_COMPAT_{HTTP,GRPC,METRICS}_PORT to pin the first server's); they are
exported as NEREID_HTTP_PORT / NEREID_GRPC_PORT / NEREID_METRICS_PORT (and NEREID_EXPLICIT_*) for anything the
tests start. NEREID_COMPAT_SERVE overrides the entry script (default dist/cli/main.js).

gRPC: `nereid serve --grpc-port` is probed after start-up. While the build does not serve gRPC, every gRPC test is
skipped with that reason, and they run as soon as it does.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).parent))
from models import write_extra_repository

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "model_repository"
START_TIMEOUT_S = 60.0
GRPC_PROBE_S = 5.0


_STARTED: list[Nereid] = []


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class Nereid:
    """One `nereid serve` child process."""

    name: str
    http_port: int
    grpc_port: int
    metrics_port: int
    log_path: Path
    args: list[str]
    proc: subprocess.Popen | None = None
    grpc_ok: bool = False
    grpc_reason: str = ""
    grpc_probe_error: str = ""
    extra_models: list[str] = field(default_factory=list)

    @property
    def http_url(self) -> str:
        return f"127.0.0.1:{self.http_port}"

    @property
    def grpc_url(self) -> str:
        return f"127.0.0.1:{self.grpc_port}"

    @property
    def metrics_url(self) -> str:
        return f"http://127.0.0.1:{self.metrics_port}/metrics"

    def start(self) -> None:
        entry = os.environ.get("NEREID_COMPAT_SERVE", str(ROOT / "dist" / "cli" / "main.js"))
        cmd = [
            "node",
            entry,
            "serve",
            f"--http-port={self.http_port}",
            f"--grpc-port={self.grpc_port}",
            f"--metrics-port={self.metrics_port}",
            *self.args,
        ]
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(cmd, cwd=ROOT, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"{self.name}: nereid exited with {self.proc.returncode}:\n{self.log()}")
            try:
                with urllib.request.urlopen(f"http://{self.http_url}/v2/health/live", timeout=1) as r:
                    if r.status == 200:
                        break
            except (urllib.error.URLError, ConnectionError, TimeoutError):
                pass
            time.sleep(0.1)
        else:
            self.stop()
            raise RuntimeError(f"{self.name}: nereid not live after {START_TIMEOUT_S}s:\n{self.log()}")
        self._probe_grpc()

    def _probe_grpc(self) -> None:
        import tritonclient.grpc as grpcclient

        deadline = time.monotonic() + GRPC_PROBE_S
        last = ""
        while time.monotonic() < deadline:
            try:
                client = grpcclient.InferenceServerClient(self.grpc_url)
                try:
                    if client.is_server_live(client_timeout=1):
                        self.grpc_ok = True
                        return
                finally:
                    client.close()
            except Exception as e:
                last = str(e).splitlines()[0] if str(e) else type(e).__name__
            time.sleep(0.25)
        self.grpc_reason = (
            "`nereid serve --grpc-port` does not serve gRPC in this build (nothing answers on the port); "
            "the gRPC compatibility tests run as soon as it does"
        )
        self.grpc_probe_error = last

    def log(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")[-4000:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        if getattr(self, "_log", None):
            self._log.close()


@pytest.fixture(scope="session")
def extra_repository(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("extra_repository")
    write_extra_repository(root)
    return root


def _env_port(key: str) -> int:
    v = os.environ.get(key)
    return int(v) if v else free_port()


def _start(name: str, prefix: str, args: list[str], tmp: Path, pinned: bool) -> Nereid:
    for attempt in range(3):
        ports = (
            [_env_port(f"NEREID_COMPAT_{k}_PORT") for k in ("HTTP", "GRPC", "METRICS")]
            if pinned
            else [free_port() for _ in range(3)]
        )
        server = Nereid(name, *ports, log_path=tmp / f"{name}-{attempt}.log", args=args)
        try:
            server.start()
            break
        except RuntimeError:
            # A free port picked here can be taken by another process before nereid binds it: pick again.
            if attempt == 2 or "EADDRINUSE" not in server.log():
                raise
    _STARTED.append(server)
    os.environ[f"{prefix}_HTTP_PORT"] = str(server.http_port)
    os.environ[f"{prefix}_GRPC_PORT"] = str(server.grpc_port)
    os.environ[f"{prefix}_METRICS_PORT"] = str(server.metrics_port)
    return server


@pytest.fixture(scope="session")
def nereid(extra_repository: Path, tmp_path_factory: pytest.TempPathFactory):
    """The default server: model control none, every model loaded."""
    args = [
        f"--model-repository={EXAMPLES}",
        f"--model-repository={extra_repository}",
        "--cache-config=local,size=1048576",
    ]
    server = _start("nereid", "NEREID", args, tmp_path_factory.mktemp("logs"), pinned=True)
    yield server
    server.stop()


@pytest.fixture(scope="session")
def explicit(extra_repository: Path, tmp_path_factory: pytest.TempPathFactory):
    """A server in explicit model control mode named 'triton' (`--id`), as Triton's examples expect."""
    args = [
        f"--model-repository={EXAMPLES}",
        f"--model-repository={extra_repository}",
        "--model-control-mode=explicit",
        "--id=triton",
    ]
    server = _start("explicit", "NEREID_EXPLICIT", args, tmp_path_factory.mktemp("logs"), pinned=False)
    yield server
    server.stop()


def _grpc_of(server: Nereid) -> str:
    if not server.grpc_ok:
        pytest.skip(server.grpc_reason)
    return server.grpc_url


@pytest.fixture(scope="session")
def http_url(nereid: Nereid) -> str:
    return nereid.http_url


@pytest.fixture(scope="session")
def grpc_url(nereid: Nereid) -> str:
    return _grpc_of(nereid)


@pytest.fixture(scope="session")
def explicit_http_url(explicit: Nereid) -> str:
    return explicit.http_url


@pytest.fixture(scope="session")
def explicit_grpc_url(explicit: Nereid) -> str:
    return _grpc_of(explicit)


@pytest.fixture()
def http_client(http_url: str):
    import tritonclient.http as httpclient

    client = httpclient.InferenceServerClient(http_url)
    yield client
    client.close()


@pytest.fixture()
def grpc_client(grpc_url: str):
    import tritonclient.grpc as grpcclient

    client = grpcclient.InferenceServerClient(grpc_url)
    yield client
    client.close()


def pytest_report_header(config: pytest.Config) -> list[str]:
    import importlib.metadata as md

    return [f"tritonclient {md.version('tritonclient')}, numpy {md.version('numpy')}, onnx {md.version('onnx')}"]


def pytest_terminal_summary(terminalreporter) -> None:
    for server in _STARTED:
        grpc_state = "gRPC served" if server.grpc_ok else f"gRPC NOT served ({server.grpc_probe_error})"
        terminalreporter.write_line(f"nereid[{server.name}]: http {server.http_url}, {grpc_state}")
