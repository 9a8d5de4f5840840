"""How long a process blocked in a socket read takes to wake, by how long it slept: two processes ping-pong over a
Unix socket; the answering side busy-waits D µs before it answers, so the asking side sleeps ~D µs in its read.
The round trip less D is what a wake-up after a sleep of D costs (plus two syscalls). On a VM whose vCPUs halt when
idle, a wake-up after a long sleep can cost far more than after a short one (the host stops polling the halted vCPU
and must schedule it again); that is what a request at concurrency 1 pays at every hop where a process sleeps while
the GPU computes. Also with --spin-us S: the asking side polls the socket S µs before it blocks (as the stub does).

    python3 bench/gpu/wake-latency.py [--rounds 2000] [--spin-us 0]
Prints one JSON line per D: median and p90 µs of (round trip - D)."""

from __future__ import annotations

import argparse
import json
import os
import socket
import time


def busy(us: float) -> None:
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass


def answer(sock: socket.socket) -> None:
    while True:
        msg = sock.recv(16)
        if not msg:
            os._exit(0)
        busy(int.from_bytes(msg[:8], "little"))
        sock.sendall(msg)


def recv(sock: socket.socket, spin_ns: int) -> bytes:
    if spin_ns:
        until = time.perf_counter_ns() + spin_ns
        while time.perf_counter_ns() < until:
            try:
                return sock.recv(16, socket.MSG_DONTWAIT)
            except BlockingIOError:
                pass
    return sock.recv(16)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=2000)
    ap.add_argument("--spin-us", type=int, default=0)
    args = ap.parse_args()
    a, b = socket.socketpair()
    if os.fork() == 0:
        a.close()
        answer(b)
    b.close()
    for d in (0, 25, 50, 100, 200, 400, 800, 1600):
        costs = []
        for _ in range(args.rounds):
            t = time.perf_counter_ns()
            a.sendall(d.to_bytes(8, "little") + bytes(8))
            recv(a, args.spin_us * 1000)
            costs.append((time.perf_counter_ns() - t) / 1000 - d)
        costs.sort()
        print(json.dumps({"sleep_us": d, "spin_us": args.spin_us, "p50_us": round(costs[len(costs) // 2], 1), "p90_us": round(costs[int(len(costs) * 0.9)], 1)}), flush=True)
    a.close()


if __name__ == "__main__":
    main()
