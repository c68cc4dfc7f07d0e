"""NATS JetStream: 3 nats-server nodes in one cluster, JetStream on each (file storage), a
stream per measure with 3 replicas (R3). A publish is acknowledged once the stream's Raft
group has the message on a quorum (2 of 3) of nodes, written to their files (page cache: the
server syncs them on an interval). The producer publishes asynchronously with at most
MAX_PENDING unacknowledged messages; the consumer is an ordered push consumer (no acks)."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import nats
from nats.aio.client import Client
from nats.aio.msg import Msg
from nats.js.api import DeliverPolicy, StorageType, StreamConfig
from nats.js.errors import Error as JetStreamError

from client.cli.zookeeper_server import free_port
from tests.benchmarks.peers.common import Workload, wait_until

MAX_PENDING = 4000  # unacknowledged async publishes
NODES = 3
# Debian puts it in /usr/sbin, which a user's PATH may lack.
NATS_SERVER = shutil.which("nats-server") or "/usr/sbin/nats-server"


class NatsPeer:
    name = "NATS JetStream"

    def __init__(self, processes: list[subprocess.Popen[bytes]], ports: list[int]) -> None:
        self.processes = processes
        self.servers = [f"nats://127.0.0.1:{p}" for p in ports]

    def server_pids(self) -> list[int]:
        return [p.pid for p in self.processes]

    def prepare(self, run: int) -> None:
        async def create() -> None:
            nc = await self._connect()
            try:
                for name in (f"produce{run}", f"e2e{run}"):
                    await _create_stream(nc.jetstream(), name)
            finally:
                await nc.close()

        asyncio.run(create())

    def produce(self, run: int, workload: Workload) -> float:
        return asyncio.run(self._produce(f"produce{run}", workload))

    def consume(self, run: int, workload: Workload) -> float:
        return asyncio.run(self._consume(f"produce{run}", workload))

    def end_to_end(self, run: int, workload: Workload) -> list[float]:
        return asyncio.run(self._end_to_end(f"e2e{run}", workload))

    async def _connect(self) -> Client:
        return await nats.connect(servers=self.servers, max_reconnect_attempts=3)

    async def _produce(self, stream: str, workload: Workload) -> float:
        nc = await self._connect()
        try:
            async with asyncio.timeout(workload.timeout_s):
                js = nc.jetstream(publish_async_max_pending=MAX_PENDING)
                value = workload.value()
                futures = []
                started = time.perf_counter()
                for _ in range(workload.records):
                    futures.append(await js.publish_async(stream, value))
                await js.publish_async_completed()
                elapsed = time.perf_counter() - started
                failed = [f.exception() for f in futures if f.exception() is not None]
                if failed:
                    raise SystemExit(f"NATS: {len(failed)} publishes failed: {failed[0]}")
                return workload.records / elapsed
        finally:
            await nc.close()

    async def _consume(self, stream: str, workload: Workload) -> float:
        nc = await self._connect()
        try:
            async with asyncio.timeout(workload.timeout_s):
                js = nc.jetstream()
                done = asyncio.Event()
                count = 0

                async def on_message(_msg: object) -> None:
                    nonlocal count
                    count += 1
                    if count >= workload.records:
                        done.set()

                started = time.perf_counter()
                sub = await js.subscribe(
                    stream, cb=on_message, ordered_consumer=True, deliver_policy=DeliverPolicy.ALL
                )
                await done.wait()
                elapsed = time.perf_counter() - started
                await sub.unsubscribe()
                return count / elapsed
        finally:
            await nc.close()

    async def _end_to_end(self, stream: str, workload: Workload) -> list[float]:
        filler = workload.filler()
        sent_at: dict[int, float] = {}
        latencies: list[float] = []
        clock = time.perf_counter
        total = workload.e2e_records
        nc = await self._connect()
        try:
            async with asyncio.timeout(workload.timeout_s):
                js = nc.jetstream(publish_async_max_pending=MAX_PENDING)
                done = asyncio.Event()

                async def on_message(msg: Msg) -> None:
                    started = sent_at.pop(int.from_bytes(msg.data[:8], "big"), None)
                    if started is not None:
                        latencies.append((clock() - started) * 1000)
                    if len(latencies) >= total:
                        done.set()

                sub = await js.subscribe(
                    stream, cb=on_message, ordered_consumer=True, deliver_policy=DeliverPolicy.NEW
                )
                futures = []
                started = clock()
                for sequence in range(total):
                    ahead_s = started + sequence / workload.rate - clock()
                    if ahead_s > 0:
                        await asyncio.sleep(ahead_s)
                    sent_at[sequence] = clock()
                    payload = sequence.to_bytes(8, "big") + filler
                    futures.append(await js.publish_async(stream, payload))
                await js.publish_async_completed()
                await done.wait()
                await sub.unsubscribe()
                failed = [f.exception() for f in futures if f.exception() is not None]
                if failed:
                    raise SystemExit(f"NATS: {len(failed)} publishes failed: {failed[0]}")
        finally:
            await nc.close()
        return sorted(latencies)


async def _create_stream(js: nats.js.JetStreamContext, name: str) -> None:
    config = StreamConfig(name=name, subjects=[name], storage=StorageType.FILE, num_replicas=3)
    await js.add_stream(config)
    async with asyncio.timeout(30):  # its Raft group has a leader and both followers current
        while True:
            cluster = (await js.stream_info(name)).cluster
            replicas = (cluster.replicas or []) if cluster else []
            if (
                cluster
                and cluster.leader
                and len(replicas) == 2
                and all(r.current for r in replicas)
            ):
                return
            await asyncio.sleep(0.1)


def _config(index: int, ports: list[int], routes: list[int], directory: Path) -> str:
    others = ", ".join(f"nats-route://127.0.0.1:{p}" for j, p in enumerate(routes) if j != index)
    return (
        f"server_name: n{index + 1}\nlisten: 127.0.0.1:{ports[index]}\n"
        f'jetstream {{ store_dir: "{directory}" }}\n'
        f"cluster {{ name: bench, listen: 127.0.0.1:{routes[index]}, routes: [{others}] }}\n"
    )


def _jetstream_ready(servers: list[str]) -> bool:
    async def probe() -> bool:
        async def quiet(_error: Exception) -> None:
            pass  # refused while the nodes start: expected, and retried

        try:
            nc = await nats.connect(
                servers=servers, connect_timeout=1, max_reconnect_attempts=0, error_cb=quiet
            )
        except (OSError, nats.errors.Error):
            return False
        try:
            js = nc.jetstream()
            await js.add_stream(StreamConfig(name="ready", subjects=["ready"], num_replicas=3))
            await js.delete_stream("ready")
            return True
        except (JetStreamError, nats.errors.Error):
            return False
        finally:
            await nc.close()

    return asyncio.run(probe())


@contextmanager
def running() -> Iterator[NatsPeer]:
    with tempfile.TemporaryDirectory(prefix="nats-bench-peers-") as root:
        ports = [free_port() for _ in range(NODES)]
        routes = [free_port() for _ in range(NODES)]
        processes: list[subprocess.Popen[bytes]] = []
        try:
            for i in range(NODES):
                directory = Path(root) / f"node-{i + 1}"
                directory.mkdir()
                config = directory / "nats.conf"
                config.write_text(_config(i, ports, routes, directory / "jetstream"))
                command = [NATS_SERVER, "-c", str(config), "-l", str(directory / "nats.log")]
                processes.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
            peer = NatsPeer(processes, ports)
            wait_until(lambda: _jetstream_ready(peer.servers), 60, "JetStream's meta leader")
            yield peer
        finally:
            for process in processes:
                process.terminate()
            for process in processes:
                try:
                    process.wait(10)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait(5)
