"""Real broker processes on loopback against a real ZooKeeper, for integration tests.

Each cluster gets its own ZooKeeper chroot, so tests can share the session's ZooKeeper server.
Brokers run as `python -m client.cli broker --config FILE` (the `highwater broker` command),
with stdout/stderr in `<dir>/broker-N/broker.log`. Waits poll a condition with a deadline.

Failure tools for scenario tests: bounce (SIGTERM + start), hard kill (SIGKILL), pause/resume
(SIGSTOP/SIGCONT: a broker that is alive but silent, e.g. to let its ZooKeeper session expire),
and, on a stopped broker, reading its files directly: a partition's batch headers (CRCs) across
its segments, its leader-epoch-checkpoint and its high-watermark checkpoint, and cutting bytes
off the end of the active segment (a torn tail: what a power loss leaves).
"""

from __future__ import annotations

import contextlib
import math
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

import trio

from broker.log.checkpoints import EpochEntry, LeaderEpochCheckpointFile, OffsetCheckpointFile
from broker.log.log import LEADER_EPOCH_CHECKPOINT_FILE
from broker.log.manager import HIGH_WATERMARK_CHECKPOINT_FILE
from client.cli.zookeeper_server import free_port
from client.network import BrokerConnectionError, connect
from client.security import ClientSecurity
from protocol.errors import HighwaterError
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.records import BatchHeader, read_header, validate_batch

__all__ = [
    "BrokerProcess",
    "Cluster",
    "eventually",
    "fetch_metadata",
    "read_batch_headers",
    "slow_tcp_proxy",
    "wait_until",
]

T = TypeVar("T")


def wait_until(condition: Callable[[], T | None], timeout_s: float, what: str) -> T:
    """Poll `condition` until it returns something truthy; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)


async def eventually(
    condition: Callable[[], Awaitable[T | None]], timeout_s: float, what: str
) -> T:
    """Await `condition()` until it returns something truthy (returned); fail after
    `timeout_s`."""
    deadline = trio.current_time() + timeout_s
    while True:
        result = await condition()
        if result:
            return result
        if trio.current_time() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await trio.sleep(0.05)


def read_batch_headers(path: Path) -> list[BatchHeader]:
    """The valid batches at the start of one segment file, in order. Stops at the first torn
    or corrupt batch, like recovery would, so a segment being appended to reads as its prefix."""
    data = path.read_bytes()
    headers: list[BatchHeader] = []
    position = 0
    while position < len(data):
        try:
            header = read_header(data, position)
            validate_batch(data, position, header)
        except HighwaterError:
            break
        headers.append(header)
        position += header.size
    return headers


async def fetch_metadata(
    port: int,
    timeout_ms: int = 2000,
    host: str = "127.0.0.1",
    security: ClientSecurity | None = None,
) -> MetadataResponse | None:
    try:
        conn = await connect(host, port, timeout_ms=timeout_ms, security=security)
    except BrokerConnectionError:
        return None
    try:
        response: MetadataResponse = await conn.request(
            MetadataRequest(None), timeout_ms=timeout_ms
        )
        return response
    except BrokerConnectionError:
        return None
    finally:
        await conn.aclose()


async def slow_tcp_proxy(
    target_port: int,
    delay_s: float,
    *,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Forward loopback connections to `target_port`, delivering everything the target sends
    `delay_s` late (in order): a slow link, e.g. between one broker and ZooKeeper. Reports
    its port through task_status; runs until cancelled."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    task_status.started(listeners[0].socket.getsockname()[1])

    async def forward(source: trio.SocketStream, sink: trio.SocketStream, delay: float) -> None:
        send, receive = trio.open_memory_channel[tuple[float, bytes]](math.inf)

        async def deliver() -> None:
            async for due, data in receive:
                await trio.sleep_until(due)
                await sink.send_all(data)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(deliver)
            async with send:
                while data := await source.receive_some():
                    send.send_nowait((trio.current_time() + delay, data))
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            await sink.send_eof()

    async def handle(client: trio.SocketStream) -> None:
        try:
            async with (
                client,
                await trio.open_tcp_stream("127.0.0.1", target_port) as server,
                trio.open_nursery() as nursery,
            ):
                nursery.start_soon(forward, client, server, 0.0)
                nursery.start_soon(forward, server, client, delay_s)
        except* (OSError, trio.BrokenResourceError, trio.ClosedResourceError):
            pass  # one side went away (a killed broker): this connection is over

    await trio.serve_listeners(handle, listeners)


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    directory: Path
    zookeeper_connect: str
    overrides: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None
    paused: bool = False
    host: str = "127.0.0.1"  # the address it listens on (its own, in a network namespace)
    # Named listeners (name -> (security protocol, port)); empty: one PLAINTEXT at `port`.
    # `port` is then the first one's, the inter-broker listener.
    listeners: dict[str, tuple[str, int]] = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)  # on top of ours (e.g. libfaketime's)

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def log_path(self) -> Path:
        return self.directory / "broker.log"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    def write_config(self) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        listeners = f"PLAINTEXT://{self.host}:{self.port}"
        named: dict[str, str] = {}
        if self.listeners:
            listeners = ",".join(f"{n}://{self.host}:{p}" for n, (_, p) in self.listeners.items())
            named = {
                "listener.security.protocol.map": ",".join(
                    f"{n}:{protocol}" for n, (protocol, _) in self.listeners.items()
                ),
                "inter.broker.listener.name": next(iter(self.listeners)),
            }
        settings = {
            "broker.id": str(self.broker_id),
            "listeners": listeners,
            **named,
            "zookeeper.connect": self.zookeeper_connect,
            "zookeeper.session.timeout.ms": "6000",
            "log.dirs": str(self.data_dir),
            **self.overrides,
        }
        self.config_path.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        self.write_config()
        log = self.log_path.open("ab")
        self.process = subprocess.Popen(
            [sys.executable, "-m", "client.cli", "broker", "--config", str(self.config_path)],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
        )
        log.close()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def pause(self) -> None:
        """SIGSTOP: the process holds its sockets and files but answers nothing (no fetches, no
        ZooKeeper heartbeats), like a stalled machine or a long GC pause."""
        assert self.running, f"broker {self.broker_id} is not running"
        self.signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        """SIGCONT after pause()."""
        if self.running and self.paused:
            self.signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, the ZooKeeper session lingers until it times out."""
        if self.running:
            self.signal(signal.SIGKILL)
            assert self.process is not None
            self.process.wait(10)
        self.paused = False

    def restart(self, timeout_s: float = 30) -> None:
        """A bounce: SIGTERM (controlled shutdown), wait for the exit, start again."""
        assert self.stop(timeout_s) == 0, f"broker {self.broker_id} did not stop cleanly"
        self.start()

    def stop(self, timeout_s: float = 30) -> int:
        """SIGTERM and wait; returns the exit status."""
        assert self.process is not None
        self.resume()  # a stopped process would keep SIGTERM pending forever
        if self.running:
            self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        raise AssertionError(f"broker {self.broker_id} ignored SIGTERM for {timeout_s}s")

    def port_of(self, listener: str) -> int:
        return self.listeners[listener][1] if self.listeners else self.port

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    # -- files, read (and cut) directly ----------------------------------------------------

    def partition_dir(self, topic: str, partition: int) -> Path:
        return self.data_dir / f"{topic}-{partition}"

    def segments(self, topic: str, partition: int) -> list[Path]:
        """The partition's .log files in offset order (names are 20-digit base offsets)."""
        return sorted(self.partition_dir(topic, partition).glob("*.log"))

    def batch_headers(self, topic: str, partition: int) -> list[BatchHeader]:
        """Every valid batch of the partition on this broker's disk, in offset order."""
        return [h for path in self.segments(topic, partition) for h in read_batch_headers(path)]

    def leader_epoch_entries(self, topic: str, partition: int) -> list[EpochEntry]:
        """The partition's leader-epoch-checkpoint file: (epoch, start offset) entries."""
        path = self.partition_dir(topic, partition) / LEADER_EPOCH_CHECKPOINT_FILE
        return LeaderEpochCheckpointFile(path).read()

    def checkpointed_high_watermark(self, topic: str, partition: int) -> int | None:
        """The partition's entry in the replication-offset-checkpoint (None: no entry)."""
        path = self.data_dir / HIGH_WATERMARK_CHECKPOINT_FILE
        return OffsetCheckpointFile(path).read().get((topic, partition))

    def cut_active_segment(self, topic: str, partition: int, cut_bytes: int) -> int:
        """A torn tail: cut `cut_bytes` off the end of the partition's newest segment, as a
        power loss would leave it. Only on a stopped broker. Returns the new file size."""
        assert not self.running, f"broker {self.broker_id} must be stopped to cut its log"
        active = self.segments(topic, partition)[-1]
        size = active.stat().st_size
        assert 0 < cut_bytes <= size, f"cannot cut {cut_bytes} of {size} bytes from {active}"
        with active.open("r+b") as f:
            f.truncate(size - cut_bytes)
        return size - cut_bytes


class Cluster:
    def __init__(
        self,
        zookeeper_port: int,
        directory: Path,
        size: int,
        overrides: dict[str, str] | None = None,
        broker_overrides: dict[int, dict[str, str]] | None = None,
        listeners: dict[str, str] | None = None,
    ) -> None:
        """`overrides` apply to every broker, `broker_overrides[id]` to one (on top).
        `listeners`: name -> security protocol, each on a free port per broker; the first is
        the inter-broker listener (and `BrokerProcess.port`)."""
        chroot = f"/highwater-test-{uuid.uuid4().hex[:8]}"
        self.zookeeper_connect = f"127.0.0.1:{zookeeper_port}{chroot}"
        per_broker = broker_overrides or {}
        self.brokers = {}
        for i in range(1, size + 1):
            named = {name: (protocol, free_port()) for name, protocol in (listeners or {}).items()}
            self.brokers[i] = BrokerProcess(
                i,
                next(iter(named.values()))[1] if named else free_port(),
                directory / f"broker-{i}",
                self.zookeeper_connect,
                {**(overrides or {}), **per_broker.get(i, {})},
                listeners=named,
            )

    @property
    def bootstrap(self) -> str:
        return ",".join(f"{b.host}:{b.port}" for b in self.brokers.values())

    def bootstrap_on(self, listener: str) -> str:
        return ",".join(f"{b.host}:{b.port_of(listener)}" for b in self.brokers.values())

    @property
    def live_bootstrap(self) -> str:
        """The running, unpaused brokers: a client bootstrapping from a paused broker waits
        for it a second (metadata_attempt_timeout_ms) before trying the next."""
        return ",".join(f"{b.host}:{b.port}" for b in self.running_brokers())

    def start(self) -> None:
        for broker in self.brokers.values():
            broker.start()

    def running_brokers(self) -> list[BrokerProcess]:
        """Brokers that run and are not paused (a paused one answers nothing)."""
        return [b for b in self.brokers.values() if b.running and not b.paused]

    def stop(self) -> None:
        for broker in self.brokers.values():
            broker.resume()
            if broker.running:
                with contextlib.suppress(AssertionError):
                    broker.stop()

    def log_marks(self) -> dict[int, int]:
        """Each broker's log size now: pass to logs(since=...) to see only what came after."""
        return {b.broker_id: len(b.log_text()) for b in self.brokers.values()}

    def logs(self, tail_chars: int = 4000, since: dict[int, int] | None = None) -> str:
        return "\n".join(
            f"--- broker {b.broker_id} ---\n"
            f"{b.log_text()[(since or {}).get(b.broker_id, 0) :][-tail_chars:]}"
            for b in self.brokers.values()
        )

    def ensure_running(self) -> None:
        """Resume paused brokers and start stopped ones (after a test that failed midway)."""
        for broker in self.brokers.values():
            broker.resume()
            if not broker.running:
                broker.start()
