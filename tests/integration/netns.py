"""Several hosts on one machine: each broker in its own network namespace (iproute2).

A bridge in the root namespace is the hub (it also carries ZooKeeper and the test's clients);
each broker namespace has one veth leg on it with its own address. `cut(i)` takes broker i's
leg down inside its namespace: the broker is cut off from its peers, from ZooKeeper and from
clients (connections fail with ENETUNREACH or time out) while the process runs on; `heal(i)`
brings it back. Needs root (CAP_NET_ADMIN); `available()` says whether this machine allows it.
Names carry a random suffix and are removed on exit, so runs do not collide.
"""

from __future__ import annotations

import contextlib
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType

from client.cli.zookeeper_server import ZooKeeperServer, free_port
from tests.integration.cluster_harness import BrokerProcess

__all__ = ["NetnsBrokerProcess", "NetworkLab", "available", "zookeeper_on_hub"]


def _ip(*args: str) -> None:
    subprocess.run(["ip", *args], check=True, capture_output=True, timeout=10)


def available() -> bool:
    """Whether namespaces can be created here (root with iproute2)."""
    name = f"hwprobe{os.getpid()}"
    try:
        _ip("netns", "add", name)
    except (OSError, subprocess.SubprocessError):
        return False
    with contextlib.suppress(OSError, subprocess.SubprocessError):
        _ip("netns", "del", name)
    return True


@dataclass
class NetworkLab:
    """A bridge and `hosts` namespaces, addresses 10.<a>.<b>.1 (the hub) and .11, .12, ..."""

    hosts: int
    tag: str = field(default_factory=lambda: f"{random.randrange(16**4):04x}")
    subnet: str = field(
        default_factory=lambda: f"10.{random.randrange(200, 250)}.{random.randrange(256)}"
    )
    _made: list[str] = field(default_factory=list)

    @property
    def bridge(self) -> str:
        return f"hwbr{self.tag}"

    @property
    def hub_address(self) -> str:
        return f"{self.subnet}.1"

    def namespace(self, host: int) -> str:
        return f"hw{self.tag}n{host}"

    def address(self, host: int) -> str:
        return f"{self.subnet}.{10 + host}"

    def _leg(self, host: int) -> tuple[str, str]:
        return f"hw{self.tag}h{host}", f"hw{self.tag}v{host}"  # root side, namespace side

    def __enter__(self) -> NetworkLab:
        try:
            _ip("link", "add", self.bridge, "type", "bridge")
            self._made.append(f"link:{self.bridge}")
            _ip("addr", "add", f"{self.hub_address}/24", "dev", self.bridge)
            _ip("link", "set", self.bridge, "up")
            for host in range(1, self.hosts + 1):
                ns = self.namespace(host)
                outside, inside = self._leg(host)
                _ip("netns", "add", ns)
                self._made.append(f"netns:{ns}")
                _ip("link", "add", outside, "type", "veth", "peer", "name", inside)
                self._made.append(f"link:{outside}")
                _ip("link", "set", inside, "netns", ns)
                _ip("link", "set", outside, "master", self.bridge)
                _ip("link", "set", outside, "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                _ip("-n", ns, "addr", "add", f"{self.address(host)}/24", "dev", inside)
                _ip("-n", ns, "link", "set", inside, "up")
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def close(self) -> None:
        for made in reversed(self._made):
            kind, name = made.split(":", 1)
            try:
                if kind == "netns":
                    _ip("netns", "del", name)
                else:
                    _ip("link", "del", name)
            except subprocess.SubprocessError:
                pass  # already gone with its namespace
        self._made.clear()

    def cut(self, host: int) -> None:
        """Cut `host` off the network: its leg goes down inside its namespace."""
        _ip("-n", self.namespace(host), "link", "set", self._leg(host)[1], "down")

    def heal(self, host: int) -> None:
        _ip("-n", self.namespace(host), "link", "set", self._leg(host)[1], "up")


@contextlib.contextmanager
def zookeeper_on_hub(lab: NetworkLab, directory: Path) -> Iterator[int]:
    """ZooKeeper on the hub address, reachable from every namespace; yields its port."""
    port = free_port(lab.hub_address)
    server = ZooKeeperServer(directory, port, host=lab.hub_address)
    server.start()
    try:
        yield port
    finally:
        server.stop()


@dataclass
class NetnsBrokerProcess(BrokerProcess):
    """A broker started inside a namespace (`ip netns exec`), listening on its own address."""

    namespace: str = ""

    def start(self) -> None:
        assert self.process is None or self.process.poll() is not None, "already running"
        self.write_config()
        log = self.log_path.open("ab")
        command = [sys.executable, "-m", "client.cli", "broker", "--config", str(self.config_path)]
        self.process = subprocess.Popen(
            ["ip", "netns", "exec", self.namespace, *command],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, "PYTHONUNBUFFERED": "1", **self.env},
        )
        log.close()
