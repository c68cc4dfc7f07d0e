"""The floor of an acks=all round: three processes passing a round's messages, no work.

Run: `.venv/bin/python -m tests.benchmarks.round_floor [--rounds-per-s 570] [--seconds 10]`.
A leader and two followers exchange the messages of `perf end-to-end`'s rounds: a Produce
(2 KB) at the leader, which answers each follower's parked fetch with the batch; each follower
"appends" it (one write to a file) and fetches again with its new log end; the leader moves
the high watermark when both have it, answers the Produce and the consumer's parked fetch, and
the consumer fetches again. Nothing is decoded, checked or logged. Each server is either a
trio program with one task per connection on non-blocking sockets, parking on one event per
partition (the brokers' design: client/socket_io.py, broker/purgatory.py), or one plain epoll
loop. The producer and consumer run in a fourth process, outside the figure, which is the
three servers' CPU (docs/performance.md, "The floor of a round").
"""

from __future__ import annotations

import argparse
import contextlib
import os
import select
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable

import trio

from tests.benchmarks.proc_cpu import cpu_seconds, load_average

BATCH = 2000  # about 17 records of 100 bytes: one round's Produce at 10,000 records/s
SMALL = 64  # a fetch, an acknowledgement
WARM_UP_ROUNDS = 300
ROLES = ("leader", "follower0", "follower1")


def message(number: int, size: int) -> bytes:
    """A frame of `size` bytes after its length: `number` (a log end or offset), then padding."""
    return size.to_bytes(4, "big") + number.to_bytes(8, "big") + bytes(size - 8)


class Connection:
    """Length-prefixed frames over a non-blocking socket: recv first, wait only when empty."""

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.sock = sock
        self.buffer = bytearray()

    def take_frame(self) -> bytes | None:
        """A whole frame from what has arrived, or None."""
        buffer = self.buffer
        if len(buffer) >= 4:
            size = int.from_bytes(buffer[:4], "big")
            if len(buffer) >= 4 + size:
                frame = bytes(buffer[4 : 4 + size])
                del buffer[: 4 + size]
                return frame
        return None

    def fill(self) -> bool:
        """Take in what the socket holds; False if it held nothing."""
        try:
            data = self.sock.recv(65536)
        except BlockingIOError:
            return False
        if not data:
            raise EOFError
        self.buffer += data
        return True

    async def read(self) -> bytes:
        while (frame := self.take_frame()) is None:
            if not self.fill():
                await trio.lowlevel.wait_readable(self.sock)
        return frame

    def read_blocking(self) -> bytes:
        while (frame := self.take_frame()) is None:
            if not self.fill():
                select.select([self.sock], [], [])
        return frame

    def send_now(self, number: int, size: int) -> None:
        """The plain servers' send: a small frame on loopback fits the socket's buffer."""
        frame = message(number, size)
        if self.sock.send(frame) != len(frame):
            raise RuntimeError("a short send")

    async def write(self, number: int, size: int) -> None:
        frame = memoryview(message(number, size))
        while frame:
            try:
                frame = frame[self.sock.send(frame) :]
            except BlockingIOError:
                await trio.lowlevel.wait_writable(self.sock)


class Partition:
    """The leader's one partition: log end, high watermark, each follower's log end."""

    def __init__(self) -> None:
        self.log_end = 0
        self.high_watermark = 0
        self.follower_log_ends = [0, 0]
        self.changed = trio.Event()

    def notify(self) -> None:
        self.changed.set()
        self.changed = trio.Event()

    async def park_until(self, ready: Callable[[], bool]) -> None:
        while not ready():
            await self.changed.wait()


async def serve_producer(conn: Connection, partition: Partition) -> None:
    while True:
        await conn.read()
        partition.log_end += 1
        offset = partition.log_end
        partition.notify()  # the followers' parked fetches (and, needlessly, the consumer's)
        await partition.park_until(lambda offset=offset: partition.high_watermark >= offset)
        await conn.write(offset, SMALL)


async def serve_follower(conn: Connection, partition: Partition, index: int) -> None:
    while True:
        log_end = int.from_bytes((await conn.read())[:8], "big")
        partition.follower_log_ends[index] = log_end
        high_watermark = min(partition.log_end, *partition.follower_log_ends)
        if high_watermark > partition.high_watermark:
            partition.high_watermark = high_watermark
            partition.notify()
        await partition.park_until(lambda log_end=log_end: partition.log_end > log_end)
        await conn.write(partition.log_end, BATCH)


async def serve_consumer(conn: Connection, partition: Partition) -> None:
    while True:
        position = int.from_bytes((await conn.read())[:8], "big")
        await partition.park_until(lambda position=position: partition.high_watermark > position)
        await conn.write(partition.high_watermark, BATCH)


async def leader(listener: socket.socket) -> None:
    partition = Partition()
    async with trio.open_nursery() as nursery:
        for _ in range(4):  # two followers, then the producer and the consumer
            await trio.lowlevel.wait_readable(listener)
            sock, _ = listener.accept()
            conn = Connection(sock)
            role = (await conn.read())[:1]
            if role in (b"0", b"1"):
                nursery.start_soon(serve_follower, conn, partition, int(role))
            elif role == b"p":
                nursery.start_soon(serve_producer, conn, partition)
            else:
                nursery.start_soon(serve_consumer, conn, partition)


def connect(port: int, role: bytes) -> Connection:
    """A connection to the leader that has said which role it plays (its first frame)."""
    conn = Connection(socket.create_connection(("127.0.0.1", port)))
    conn.sock.send(len(role).to_bytes(4, "big") + role)
    return conn


async def follower(port: int, index: int) -> None:
    conn = connect(port, str(index).encode())
    with tempfile.TemporaryFile() as log:
        log_end = 0
        while True:
            await conn.write(log_end, SMALL)
            frame = await conn.read()
            os.write(log.fileno(), frame)  # the append (page cache, as a broker's)
            log_end = int.from_bytes(frame[:8], "big")


async def clients(port: int, rounds_per_s: float, rounds: int) -> None:
    """The producer sends a round's batch on each tick, or at once if its answer came late;
    the consumer long-polls. Prints "measuring" after the warm-up and the round times at the
    end, for the parent to read."""
    producer = connect(port, b"p")
    consumer = connect(port, b"c")
    round_ms: list[float] = []

    async def consume() -> None:
        position = 0
        while position < rounds:
            await consumer.write(position, SMALL)
            position = int.from_bytes((await consumer.read())[:8], "big")

    # A lost wake in a server would stall the rounds: fail, and the parent reports it.
    with trio.fail_after(30 + 2 * rounds / rounds_per_s):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(consume)
            start = trio.current_time()
            for number in range(rounds):
                if number == WARM_UP_ROUNDS:
                    print("measuring", flush=True)
                await trio.sleep_until(start + number / rounds_per_s)
                sent = trio.current_time()
                await producer.write(number, BATCH)
                await producer.read()
                round_ms.append((trio.current_time() - sent) * 1000)
    print("done", statistics.median(round_ms[WARM_UP_ROUNDS:]), flush=True)


def plain_leader(listener: socket.socket) -> None:
    """The same leader in one plain epoll loop: no tasks, no events; after each batch of
    readiness it answers whatever the new state lets it answer."""
    listener.setblocking(True)
    poller = select.epoll()
    connections: dict[int, tuple[Connection, bytes]] = {}
    for _ in range(4):
        conn = Connection(listener.accept()[0])
        connections[conn.sock.fileno()] = (conn, conn.read_blocking()[:1])
        poller.register(conn.sock.fileno(), select.EPOLLIN)
    by_role = {role: conn for conn, role in connections.values()}
    log_end = high_watermark = 0
    follower_log_ends = [0, 0]
    parked: list[int | None] = [None, None]  # each follower's parked fetch: its log end
    produce: int | None = None  # the offset the Produce in flight waits for
    consume: int | None = None  # the consumer's parked fetch: its position
    ready = list(connections)  # at first all: a role's frame may have come with a fetch
    while True:
        for fd in ready:
            conn, role = connections[fd]
            conn.fill()
            while (frame := conn.take_frame()) is not None:
                number = int.from_bytes(frame[:8], "big")
                if role == b"p":
                    log_end += 1
                    produce = log_end
                elif role == b"c":
                    consume = number
                else:
                    follower_log_ends[int(role)] = parked[int(role)] = number
                    high_watermark = max(high_watermark, min(log_end, *follower_log_ends))
        for index, parked_log_end in enumerate(parked):
            if parked_log_end is not None and log_end > parked_log_end:
                by_role[str(index).encode()].send_now(log_end, BATCH)
                parked[index] = None
        if produce is not None and high_watermark >= produce:
            by_role[b"p"].send_now(produce, SMALL)
            produce = None
        if consume is not None and high_watermark > consume:
            by_role[b"c"].send_now(high_watermark, BATCH)
            consume = None
        ready = [fd for fd, _ in poller.poll()]


def plain_follower(port: int, index: int) -> None:
    conn = connect(port, str(index).encode())
    poller = select.epoll()
    poller.register(conn.sock.fileno(), select.EPOLLIN)
    with tempfile.TemporaryFile() as log:
        log_end = 0
        while True:
            conn.send_now(log_end, SMALL)
            while (frame := conn.take_frame()) is None:
                if not conn.fill():
                    poller.poll()
            os.write(log.fileno(), frame)
            log_end = int.from_bytes(frame[:8], "big")


def run_once(
    server: str, rounds_per_s: float, seconds: float
) -> tuple[float, list[float], float, float]:
    """(rounds/s achieved, each process's CPU µs per round, their cores, round p50 ms)."""
    me = [sys.executable, "-m", __spec__.name]  # type: ignore[name-defined]
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        port = str(listener.getsockname()[1])
        listener.close()
        rounds = WARM_UP_ROUNDS + int(rounds_per_s * seconds)
        # The followers and the clients retry their connects until the leader listens.
        servers = [
            subprocess.Popen([*me, "--role", role, port, "--server", server]) for role in ROLES
        ]
        try:
            client = subprocess.Popen(
                [
                    *me,
                    "--role",
                    "clients",
                    port,
                    "--rounds-per-s",
                    str(rounds_per_s),
                    "--rounds",
                    str(rounds),
                ],
                stdout=subprocess.PIPE,
                text=True,
            )
            assert client.stdout is not None
            if client.stdout.readline().strip() != "measuring":
                raise SystemExit("the clients failed before measuring")
            began, cpu_before = time.monotonic(), [cpu_seconds(p.pid) for p in servers]
            line = client.stdout.readline().split()
            elapsed, cpu_after = time.monotonic() - began, [cpu_seconds(p.pid) for p in servers]
            if client.wait(timeout=60) != 0 or not line or line[0] != "done":
                raise SystemExit("the clients failed")
        finally:
            for server in servers:
                server.kill()
                server.wait()
    measured = rounds - WARM_UP_ROUNDS
    used_s = [after - before for before, after in zip(cpu_before, cpu_after, strict=True)]
    per_round_us = [used / measured * 1e6 for used in used_s]
    cores = sum(used_s) / elapsed
    return measured / elapsed, per_round_us, cores, float(line[1])


async def _retrying(main: Callable[..., Awaitable[None]], port: int, *args: object) -> None:
    deadline = trio.current_time() + 10
    while True:
        try:
            await main(port, *args)
            return
        except ConnectionRefusedError:
            if trio.current_time() > deadline:
                raise
            await trio.sleep(0.05)


def plain_retrying(port: int, index: int) -> None:
    deadline = time.monotonic() + 10
    while True:
        try:
            plain_follower(port, index)
            return
        except ConnectionRefusedError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.05)  # a retry's pause, until the leader listens


def serve(role: str, port: int, server: str) -> None:
    if role == "leader":
        with socket.socket() as listener:
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", port))
            listener.listen()
            listener.setblocking(False)
            try:
                if server == "plain":
                    plain_leader(listener)
                else:
                    trio.run(leader, listener)
            except* EOFError:
                pass  # the clients finished
        return
    with contextlib.suppress(EOFError):  # the leader stopped
        if server == "plain":
            plain_retrying(port, int(role[-1]))
        else:
            trio.run(_retrying, follower, port, int(role[-1]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds-per-s", type=float, default=570.0)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument(
        "--servers", default="trio,plain", help="trio, plain (one epoll loop) or both, in turn"
    )
    parser.add_argument("--role", help=argparse.SUPPRESS)
    parser.add_argument("port", nargs="?", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--server", help=argparse.SUPPRESS)
    parser.add_argument("--rounds", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.role == "clients":
        trio.run(_retrying, clients, args.port, args.rounds_per_s, args.rounds)
        return
    if args.role:
        serve(args.role, args.port, args.server)
        return
    print(f"{load_average()}; {args.rounds_per_s:.0f} rounds/s asked, {args.seconds:.0f} s a run")
    for run in range(1, args.runs + 1):
        for server in args.servers.split(","):
            rate, per_round_us, cores, p50_ms = run_once(server, args.rounds_per_s, args.seconds)
            shares = ", ".join(f"{us:.0f}" for us in per_round_us)
            print(
                f"  run {run}, {server:5}: {rate:.0f} rounds/s, round p50 {p50_ms:.2f} ms; "
                f"CPU µs per round (leader, followers) {shares}; "
                f"the three together {cores:.2f} cores"
            )


if __name__ == "__main__":
    main()
