"""The stub process: ``python -m nereid_python [--spin-us S] --fd N --prefix P --shm-default-byte-size B
--shm-growth-byte-size G``.

Hosts one or more model instances (the first on the main thread, others on their own threads), each driven by the
host's messages. Messages (JSON, see channel.py), host -> stub: ``init``, ``exec``, ``cancel``, ``took``, ``fini``,
``bls_resp``, ``autocomplete``, ``cuda_close`` (client CUDA regions the server closed: cuda.py), ``free``; stub -> host: ``ready``, ``inited``/``init_error``, ``resp``, ``done``,
``finied``, ``bls``, ``mctl`` (model loading API: loading.py), ``log``, ``autocompleted``/``error``. Any message may carry ``free``: blocks of the other side's
segments this side has finished with.
"""

from __future__ import annotations

import argparse
import atexit
import ctypes
import os
import signal
import sys
import threading
from collections import deque

import numpy as np

from . import cuda
from .api import ModelConfig, format_exception
from .channel import Channel
from .runner import InstanceRunner, exit_now, last_line, load_model_class
from .runtime import STATE
from .shm import ChildArena, HostSegments

PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    """If the server dies (even SIGKILL), so does this process: Linux's parent-death signal."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(0)


def _profile_on_request(folder: str | None) -> None:
    """Benchmarks only (NEREID_PY_PROFILE=DIR): profiles this process's main thread, where models execute; each
    SIGUSR1 writes what was seen so far to DIR/py-<pid>.txt (top functions by own time) and starts afresh. The
    process never returns from its loop, so a signal is how a benchmark asks for the profile of a run it timed."""
    if not folder:
        return
    import cProfile
    import io
    import pstats

    prof = cProfile.Profile()

    def dump(_sig, _frame) -> None:
        prof.disable()
        text = io.StringIO()
        pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(45)
        with open(os.path.join(folder, f"py-{os.getpid()}.txt"), "a", encoding="utf-8") as f:
            f.write(text.getvalue())
        prof.clear()
        prof.enable()

    os.makedirs(folder, exist_ok=True)
    signal.signal(signal.SIGUSR1, dump)
    prof.enable()


class Stub:
    def __init__(self, ch_fd: int, prefix: str, default_size: int, growth: int, spin_us: int) -> None:
        STATE.arena = ChildArena(prefix, default_size, growth)
        STATE.host = HostSegments(prefix)
        atexit.register(STATE.arena.unlink_all)
        self.main_q: deque = deque()
        self.runners: dict[int, InstanceRunner] = {}
        self.main_runner: InstanceRunner | None = None
        self.ch = Channel(ch_fd, self._dispatch, STATE.host.drain, spin_us)
        STATE.channel = self.ch

    # Runs on whichever thread reads the channel, with ch.cv held: route, never block.
    def _dispatch(self, m: dict) -> None:
        frees = m.get("free")
        if frees:
            for seg, off in frees:
                STATE.arena.free(seg, off)
        op = m.get("op")
        if op == "exec" or op == "fini":
            runner = self.runners.get(m["inst"])
            if runner is not None:
                runner.queue.append(m)
        elif op == "took":
            runner = self.runners.get(m["inst"])
            if runner is not None:
                runner.took(m["b"], m["i"])
        elif op == "cancel":
            runner = self.runners.get(m["inst"])
            if runner is not None:
                runner.cancel(m["b"])
        elif op == "bls_resp" or op == "metric_resp":
            call = STATE.calls.get(m["call"])
            if call is not None:
                call.deliver(m)
        elif op == "init":
            runner = InstanceRunner(m["inst"])
            self.runners[m["inst"]] = runner
            if self.main_runner is None:
                self.main_runner = runner
                runner.queue = self.main_q
            else:
                runner.queue = deque()
                threading.Thread(target=self._serve, args=(runner,), daemon=True, name=f"instance-{m['inst']}").start()
            runner.queue.append(m)
        elif op == "autocomplete" or op == "cuda_close":
            # Closing a CUDA mapping is a driver call: done on the main thread, not on the reader.
            self.main_q.append(m)

    def _serve(self, runner: InstanceRunner) -> None:
        q = runner.queue
        while True:
            self.ch.wait_for(lambda: len(q) > 0)
            if runner.handle(q.popleft()):
                self._forget(runner)
                return

    def _forget(self, runner: InstanceRunner) -> None:
        with self.ch.cv:
            self.runners.pop(runner.inst, None)
            if self.main_runner is runner:
                self.main_runner = None

    def run(self) -> None:
        self.ch.send(
            {"op": "ready", "pid": os.getpid(), "python": sys.version.split()[0], "numpy": np.__version__, "exe": sys.executable}
        )
        q = self.main_q
        while True:
            self.ch.wait_for(lambda: len(q) > 0)
            m = q.popleft()
            if m["op"] == "autocomplete":
                self._autocomplete(m)
            elif m["op"] == "cuda_close":
                self._close_regions(m["r"])
            elif self.main_runner is not None and self.main_runner.handle(m):
                self._forget(self.main_runner)

    def _close_regions(self, regions) -> None:
        try:
            cuda.REGIONS.close(regions)
        except Exception as e:  # noqa: BLE001 - the mapping goes with the process; the server should know
            self.ch.send({"op": "log", "lvl": "warn", "msg": f"closing client CUDA regions {regions}: {last_line(e)}"})

    def _autocomplete(self, m: dict) -> None:
        # The model loading API refuses calls from auto_complete_config (loading.py), as Triton's does.
        STATE.local.phase = "auto_complete"
        try:
            cls = load_model_class(m["model_path"])
            fn = getattr(cls, "auto_complete_config", None)
            config = ModelConfig(m["config"])
            if fn is not None:
                result = fn(config)
                if not isinstance(result, ModelConfig):
                    raise TypeError(
                        f"auto_complete_config must return the pb_utils.ModelConfig it was given, got {type(result).__name__}"
                    )
                config = result
            self.ch.send({"op": "autocompleted", "config": config.as_dict(), "defined": fn is not None})
        except SystemExit as e:
            exit_now(e)
        except BaseException as e:  # noqa: BLE001
            self.ch.send({"op": "error", "e": {"c": "INTERNAL", "m": last_line(e)}, "tb": format_exception(e)})


def main() -> None:
    parser = argparse.ArgumentParser(prog="nereid_python")
    parser.add_argument("--fd", type=int, required=True)
    parser.add_argument("--prefix", required=True)
    parser.add_argument("--shm-default-byte-size", type=int, default=1 << 20)
    parser.add_argument("--shm-growth-byte-size", type=int, default=1 << 20)
    parser.add_argument("--spin-us", type=int, default=0)
    args = parser.parse_args()
    # Ctrl-C in a terminal reaches the whole process group; the server decides when instances finalize.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent()
    _profile_on_request(os.environ.get("NEREID_PY_PROFILE"))
    Stub(args.fd, args.prefix, args.shm_default_byte_size, args.shm_growth_byte_size, args.spin_us).run()
