"""The floor of a wake on this machine: an echo server's CPU per round trip, hot and paced.

Run: `.venv/bin/python -m tests.benchmarks.wake_floor [--round-trips 3000] [--pause-ms 1]`.
A client process sends 200 bytes and waits for them back, again and again: back to back, then
with a pause between round trips, as a broker's requests arrive at a steady rate. The server
is a trio task reading and writing the socket with trio's readiness waits (as a broker's
connections do, client/socket_io.py), or a bare epoll loop in plain Python. It prints the
server thread's CPU per round trip. What the paced figure adds to the back-to-back one is what
waiting costs whatever the code does after it (docs/performance.md, "The floor of a wake").
"""

from __future__ import annotations

import argparse
import select
import socket
import subprocess
import sys
import time

import trio

MESSAGE = b"x" * 200


def serve_plain(listener: socket.socket) -> float:
    conn, _ = listener.accept()
    conn.setblocking(False)
    poller = select.epoll()
    poller.register(conn.fileno(), select.EPOLLIN)
    started, count = time.thread_time(), 0
    while True:
        poller.poll()
        data = conn.recv(65536)
        if not data:
            return (time.thread_time() - started) / max(count, 1)
        conn.send(data)
        count += 1


def serve_trio(listener: socket.socket) -> float:
    async def serve() -> float:
        conn, _ = listener.accept()
        conn.setblocking(False)
        started, count = time.thread_time(), 0
        while True:
            await trio.lowlevel.wait_readable(conn)
            data = conn.recv(65536)
            if not data:
                return (time.thread_time() - started) / max(count, 1)
            conn.send(data)
            count += 1

    return trio.run(serve)


def client(port: int, round_trips: int, pause_s: float) -> None:
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(round_trips):
            sock.sendall(MESSAGE)
            received = 0
            while received < len(MESSAGE):
                received += len(sock.recv(65536))
            if pause_s:
                time.sleep(pause_s)


def one(server: str, round_trips: int, pause_s: float) -> float:
    """Server CPU (µs) per round trip; the client runs in its own process."""
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        listener.settimeout(60)  # a client that never connects fails the run, not hangs it
        port = listener.getsockname()[1]
        args = [sys.executable, "-m", __spec__.name, "--client", str(port)]  # type: ignore[name-defined]
        args += ["--round-trips", str(round_trips), "--pause-ms", str(pause_s * 1000)]
        with subprocess.Popen(args) as child:
            per_round_trip_s = (serve_trio if server == "trio" else serve_plain)(listener)
            if child.wait(timeout=600) != 0:
                raise SystemExit("the client failed")
    return per_round_trip_s * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--round-trips", type=int, default=3000)
    parser.add_argument("--pause-ms", type=float, default=1.0)
    parser.add_argument("--runs", type=int, default=2)
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)  # the client's own process
    args = parser.parse_args()
    if args.client is not None:
        client(args.client, args.round_trips, args.pause_ms / 1000)
        return
    print("server CPU per round trip (µs), 200 bytes each way, one connection")
    for run in range(1, args.runs + 1):
        cells = []
        for server in ("plain epoll", "trio"):
            hot = one(server, args.round_trips, 0.0)
            paced = one(server, args.round_trips, args.pause_ms / 1000)
            cells.append(f"{server}: back to back {hot:4.0f}, paced {paced:4.0f}")
        print(f"  run {run}: " + "; ".join(cells))


if __name__ == "__main__":
    main()
