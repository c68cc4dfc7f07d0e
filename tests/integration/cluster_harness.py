"""Real broker processes on loopback against a real ZooKeeper, for integration tests.

Each cluster gets its own ZooKeeper chroot, so tests can share the session's ZooKeeper server.
Brokers run as `python -m client.cli broker --config FILE` (the `highwater broker` command),
with stdout/stderr in `<dir>/broker-N/broker.log`. Waits poll a condition with a deadline.
"""

from __future__ import annotations

import contextlib
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

from client.network import BrokerConnectionError, connect
from client.zookeeper_server import free_port
from protocol.messages.metadata import MetadataRequest, MetadataResponse

__all__ = ["BrokerProcess", "Cluster", "eventually", "fetch_metadata", "wait_until"]

T = TypeVar("T")


def wait_until(condition: Callable[[], T], timeout_s: float, what: str) -> T:
    """Poll `condition` until it returns something truthy; fail after `timeout_s`."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = condition()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)


async def eventually(condition: Callable[[], Awaitable[T]], timeout_s: float, what: str) -> T:
    """Await `condition()` until it returns something truthy; fail after `timeout_s`."""
    deadline = trio.current_time() + timeout_s
    while True:
        result = await condition()
        if result:
            return result
        if trio.current_time() > deadline:
            raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")
        await trio.sleep(0.05)


async def fetch_metadata(port: int, timeout_ms: int = 2000) -> MetadataResponse | None:
    try:
        conn = await connect("127.0.0.1", port, timeout_ms=timeout_ms)
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


@dataclass
class BrokerProcess:
    broker_id: int
    port: int
    directory: Path
    zookeeper_connect: str
    overrides: dict[str, str] = field(default_factory=dict)
    process: subprocess.Popen[bytes] | None = None

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
        settings = {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://127.0.0.1:{self.port}",
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
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        log.close()

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def signal(self, signum: int) -> None:
        assert self.process is not None
        self.process.send_signal(signum)

    def kill(self) -> None:
        """SIGKILL: no clean shutdown, the ZooKeeper session lingers until it times out."""
        if self.running:
            self.signal(signal.SIGKILL)
            assert self.process is not None
            self.process.wait(10)

    def stop(self, timeout_s: float = 30) -> int:
        """SIGTERM and wait; returns the exit status."""
        assert self.process is not None
        if self.running:
            self.signal(signal.SIGTERM)
        try:
            return self.process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
        raise AssertionError(f"broker {self.broker_id} ignored SIGTERM for {timeout_s}s")

    def log_text(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""


class Cluster:
    def __init__(
        self,
        zookeeper_port: int,
        directory: Path,
        size: int,
        overrides: dict[str, str] | None = None,
    ) -> None:
        chroot = f"/highwater-test-{uuid.uuid4().hex[:8]}"
        self.zookeeper_connect = f"127.0.0.1:{zookeeper_port}{chroot}"
        self.brokers = {
            i: BrokerProcess(
                i, free_port(), directory / f"broker-{i}", self.zookeeper_connect, overrides or {}
            )
            for i in range(1, size + 1)
        }

    @property
    def bootstrap(self) -> str:
        return ",".join(f"127.0.0.1:{b.port}" for b in self.brokers.values())

    def start(self) -> None:
        for broker in self.brokers.values():
            broker.start()

    def stop(self) -> None:
        for broker in self.brokers.values():
            if broker.running:
                with contextlib.suppress(AssertionError):
                    broker.stop()

    def logs(self) -> str:
        return "\n".join(
            f"--- broker {b.broker_id} ---\n{b.log_text()[-4000:]}" for b in self.brokers.values()
        )
