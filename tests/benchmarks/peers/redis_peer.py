"""Redis Streams: a primary and 2 replicas (`replicaof`), AOF on with `appendfsync no` (written
to the page cache, never fsynced by Redis) and no RDB snapshots. The producer pipelines XADDs
and ends each pipeline with `WAIT 2`: both replicas have the writes in memory. The consumer
reads with XREAD from a replica, so a record it sees has reached two nodes."""

from __future__ import annotations

import asyncio
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import cast

import redis
import redis.asyncio as aioredis

from client.cli.zookeeper_server import free_port
from tests.benchmarks.peers.common import Workload, wait_until

PIPELINE_RECORDS = 1000  # XADDs per pipeline (each pipeline then WAITs for both replicas)
READ_COUNT = 5000  # XREAD COUNT
REPLICAS = 2
WAIT_TIMEOUT_MS = 10_000


class RedisPeer:
    name = "Redis Streams"

    def __init__(self, processes: list[subprocess.Popen[bytes]], ports: list[int]) -> None:
        self.processes = processes
        self.primary, self.replica = ports[0], ports[1]

    def server_pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def prepare(self, run: int) -> None:
        pass  # XADD creates a stream

    def produce(self, run: int, workload: Workload) -> float:
        key, fields = f"produce-{run}", {b"v": workload.value()}
        # redis-py's blocking client: twice the async one's rate for pipelines here.
        with redis.Redis(port=self.primary, socket_timeout=workload.timeout_s) as client:
            started = time.perf_counter()
            sent = 0
            while sent < workload.records:
                count = min(PIPELINE_RECORDS, workload.records - sent)
                pipe = client.pipeline(transaction=False)
                for _ in range(count):
                    pipe.xadd(key, fields)
                pipe.execute_command("WAIT", REPLICAS, WAIT_TIMEOUT_MS)
                _check_wait(pipe.execute()[-1])
                sent += count
            return sent / (time.perf_counter() - started)

    def consume(self, run: int, workload: Workload) -> float:
        key = f"produce-{run}"
        with redis.Redis(port=self.replica, socket_timeout=workload.timeout_s) as client:
            started = time.perf_counter()
            last_id, count = b"0-0", 0
            while count < workload.records:
                answer = client.xread({key: last_id}, count=READ_COUNT, block=1000)
                entries = _entries(answer)
                if entries:
                    count += len(entries)
                    last_id = entries[-1][0]
            return count / (time.perf_counter() - started)

    def end_to_end(self, run: int, workload: Workload) -> list[float]:
        return asyncio.run(self._end_to_end(f"e2e-{run}", workload))

    async def _end_to_end(self, key: str, workload: Workload) -> list[float]:
        filler = workload.filler()
        sent_at: dict[int, float] = {}
        latencies: list[float] = []
        clock = time.perf_counter
        total = workload.e2e_records
        async with (
            aioredis.Redis(port=self.primary) as producer,
            aioredis.Redis(port=self.replica) as consumer,
            asyncio.timeout(workload.timeout_s),
        ):
            await producer.xadd(key, {b"v": b"start"})  # the stream exists: XREAD $ works

            async def consume() -> None:
                last_id = (await consumer.xinfo_stream(key))["last-generated-id"]
                ready.set()
                while len(latencies) < total:
                    answer = await consumer.xread({key: last_id}, count=READ_COUNT, block=100)
                    entries = _entries(answer)
                    now = clock()
                    for _id, fields in entries:
                        started = sent_at.pop(int.from_bytes(fields[b"v"][:8], "big"), None)
                        if started is not None:
                            latencies.append((now - started) * 1000)
                    if entries:
                        last_id = entries[-1][0]

            ready = asyncio.Event()
            reader = asyncio.create_task(consume())
            await ready.wait()
            # Send what is due, then WAIT for the replicas; while that round trip lasts, more
            # records fall due and go in the next pipeline (as a producer with linger 0).
            started, sequence = clock(), 0
            while sequence < total:
                due = min(total, int((clock() - started) * workload.rate) + 1)
                if due <= sequence:
                    await asyncio.sleep(started + sequence / workload.rate - clock())
                    continue
                pipe = producer.pipeline(transaction=False)
                for s in range(sequence, due):
                    sent_at[s] = clock()
                    pipe.xadd(key, {b"v": s.to_bytes(8, "big") + filler})
                pipe.execute_command("WAIT", REPLICAS, WAIT_TIMEOUT_MS)
                _check_wait((await pipe.execute())[-1])
                sequence = due
            await reader
        return sorted(latencies)


Entry = tuple[bytes, dict[bytes, bytes]]


def _entries(answer: object) -> list[Entry]:
    """The entries of an XREAD of one stream (RESP2: [[name, [[id, {field: value}], ...]]])."""
    streams = cast(list[tuple[bytes, list[Entry]]], answer or [])
    return streams[0][1] if streams else []


def _check_wait(acknowledged: int) -> None:
    if acknowledged < REPLICAS:
        raise SystemExit(f"Redis: WAIT {REPLICAS} answered {acknowledged} replicas")


def _config(port: int, directory: Path, primary: int | None) -> list[str]:
    settings = [
        "--port", str(port), "--bind", "127.0.0.1", "--dir", str(directory),
        "--save", "", "--appendonly", "yes", "--appendfsync", "no",
        "--daemonize", "no", "--logfile", str(directory / "redis.log"),
    ]  # fmt: skip
    return settings + (["--replicaof", "127.0.0.1", str(primary)] if primary else [])


def _replicas_up(primary: int) -> bool:
    try:
        with redis.Redis(port=primary) as client:
            info = client.info("replication")
    except redis.ConnectionError:
        return False
    online = [v for k, v in info.items() if k.startswith("slave") and isinstance(v, dict)]
    return len([s for s in online if s.get("state") == "online"]) == REPLICAS


@contextmanager
def running() -> Iterator[RedisPeer]:
    with tempfile.TemporaryDirectory(prefix="redis-bench-peers-") as root:
        ports = [free_port() for _ in range(1 + REPLICAS)]
        processes: list[subprocess.Popen[bytes]] = []
        try:
            for i, port in enumerate(ports):
                directory = Path(root) / f"node-{i + 1}"
                directory.mkdir()
                command = ["redis-server", *_config(port, directory, ports[0] if i else None)]
                processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
            wait_until(lambda: _replicas_up(ports[0]), 30, "Redis's replicas to be online")
            yield RedisPeer(processes, ports)
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)
