"""Apache Kafka 3.9 in ZooKeeper mode: the project's Debian ZooKeeper launcher and 3 brokers
(`kafka.Kafka`) on loopback, each a JVM with the jars `make kafka-jars` fetched. Kafka's
defaults throughout, except what the peer benchmark sets to match Highwater's cluster
(docs/performance.md, "Peers": min.insync.replicas 2, RF 3 for internal topics, no leader
rebalance)."""

from __future__ import annotations

import logging
import subprocess
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka.admin import AdminClient

from client.cli.zookeeper_server import ZooKeeperServer, find_java, free_port, pid_alive
from tests.benchmarks.kafka.jars import classpath

BROKERS = 3
# kafka-server-start.sh's default heap, which also fits this machine (2 cores, 24 GiB): three
# brokers take 3 GiB and ZooKeeper 256 MiB, and the rest stays page cache, where Kafka keeps
# its log. More heap buys a broker nothing here: it holds no log data.
HEAP = ("-Xms1g", "-Xmx1g")
# kafka-run-class.sh's KAFKA_JVM_PERFORMANCE_OPTS.
JVM_OPTIONS = (
    "-server",
    "-XX:+UseG1GC",
    "-XX:MaxGCPauseMillis=20",
    "-XX:InitiatingHeapOccupancyPercent=35",
    "-XX:+ExplicitGCInvokesConcurrent",
    "-XX:MaxInlineLevel=15",
    "-Djava.awt.headless=true",
)
# What differs from Kafka's defaults, each as Highwater's peer cluster has it.
SETTINGS = {
    "min.insync.replicas": "2",
    "default.replication.factor": "3",
    "offsets.topic.replication.factor": "3",
    "transaction.state.log.replication.factor": "3",
    "transaction.state.log.min.isr": "2",
    # Leaders stay where they were created (broker 1), as in Highwater's peer cluster.
    "auto.leader.rebalance.enable": "false",
}
STOP_TIMEOUT_S = 30.0
QUIET = logging.getLogger("tests.benchmarks.kafka.quiet")
QUIET.addHandler(logging.NullHandler())
QUIET.propagate = False


class KafkaBroker:
    def __init__(self, broker_id: int, directory: Path, zookeeper_connect: str) -> None:
        self.broker_id = broker_id
        self.directory = directory
        self.port = free_port()
        self.zookeeper_connect = zookeeper_connect
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def address(self) -> str:
        return f"127.0.0.1:{self.port}"

    def properties(self, overrides: Mapping[str, str]) -> dict[str, str]:
        return {
            "broker.id": str(self.broker_id),
            "listeners": f"PLAINTEXT://{self.address}",
            "advertised.listeners": f"PLAINTEXT://{self.address}",
            "log.dirs": str(self.directory / "data"),
            "zookeeper.connect": self.zookeeper_connect,
            **SETTINGS,
            **overrides,
        }

    def start(self, jars: str, overrides: Mapping[str, str], heap: tuple[str, ...] = HEAP) -> None:
        self.directory.mkdir(parents=True, exist_ok=True)
        config = self.directory / "server.properties"
        config.write_text("".join(f"{k}={v}\n" for k, v in self.properties(overrides).items()))
        log4j = self.directory / "log4j.properties"
        log4j.write_text(_log4j(self.directory / "server.log"))
        command = [
            find_java(),
            *heap,
            *JVM_OPTIONS,
            f"-Dlog4j.configuration=file:{log4j}",
            f"-Dkafka.logs.dir={self.directory}",
            "-cp",
            jars,
            "kafka.Kafka",
            str(config),
        ]
        with (self.directory / "console.out").open("ab") as console:
            # A session of its own: Ctrl-C in the terminal reaches the benchmark, which stops
            # the brokers in order, not the brokers themselves.
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=console,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                start_new_session=True,
            )

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> int | None:
        """SIGTERM (Kafka's controlled shutdown), SIGKILL after timeout_s; the exit code."""
        process = self.process
        if process is None:
            return None
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout_s)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)
        return process.returncode

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for name in ("console.out", "server.log"):
            try:
                text = (self.directory / name).read_text(errors="replace")
            except OSError:
                continue
            parts.append(
                f"--- broker {self.broker_id} {name} ---\n" + "\n".join(text.splitlines()[-lines:])
            )
        return "\n".join(parts)


class KafkaCluster:
    """ZooKeeper and BROKERS brokers, ids 1..BROKERS, everything under `directory`."""

    def __init__(
        self,
        directory: Path,
        overrides: Mapping[str, str] | None = None,
        jars: str | None = None,
        heap: tuple[str, ...] = HEAP,
    ) -> None:
        """`heap`: the brokers' -Xms/-Xmx (a test holding little data passes smaller ones)."""
        self.directory = directory
        self.overrides = dict(overrides or {})
        self.heap = heap
        self.jars = jars if jars is not None else classpath()
        self.zookeeper = ZooKeeperServer(directory / "zookeeper", free_port())
        connect = self.zookeeper.connect_string
        self.brokers = {
            i: KafkaBroker(i, directory / f"broker-{i}", connect) for i in range(1, BROKERS + 1)
        }
        self.exit_codes: dict[int, int | None] = {}

    @property
    def bootstrap(self) -> str:
        return ",".join(b.address for b in self.brokers.values())

    def pids(self) -> list[int]:
        brokers = [b.process.pid for b in self.brokers.values() if b.process is not None]
        return [*brokers, *([self.zookeeper.pid] if self.zookeeper.pid is not None else [])]

    def start(self, timeout_s: float = 60.0) -> None:
        """ZooKeeper, then the brokers at once; returns when all are in the cluster's metadata
        and a controller is elected."""
        self.zookeeper.start()
        for broker in self.brokers.values():
            broker.start(self.jars, self.overrides, self.heap)
        self._wait_whole(timeout_s)

    def stop(self) -> None:
        """The brokers one at a time, the highest id first (each controlled shutdown finds the
        others up to take its leaders), then ZooKeeper."""
        for broker_id in sorted(self.brokers, reverse=True):
            self.exit_codes[broker_id] = self.brokers[broker_id].stop()
        self.zookeeper.stop()

    def logs(self) -> str:
        return "\n".join(b.log_tail() for b in self.brokers.values())

    def _wait_whole(self, timeout_s: float) -> None:
        # Refused connections while the brokers start are expected: not logged.
        admin = AdminClient({"bootstrap.servers": self.bootstrap, "logger": QUIET})
        deadline = time.monotonic() + timeout_s
        while True:
            for broker in self.brokers.values():
                code = broker.process.poll() if broker.process else None
                if code is not None:
                    raise RuntimeError(
                        f"Kafka broker {broker.broker_id} exited with {code}\n{self.logs()}"
                    )
            try:
                metadata = admin.list_topics(timeout=2)
                if len(metadata.brokers) == BROKERS and metadata.controller_id in self.brokers:
                    return
            except Exception:
                pass
            if time.monotonic() > deadline:
                raise RuntimeError(f"Kafka not whole within {timeout_s:g} s\n{self.logs()}")
            time.sleep(0.2)


def left_running(directory: Path) -> list[int]:
    """Pids of live processes whose command line names `directory` (its brokers, ZooKeeper)."""
    found = []
    needle = str(directory).encode()
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        if needle in cmdline and pid_alive(int(entry.name)):
            found.append(int(entry.name))
    return found


@contextmanager
def running(directory: Path, overrides: Mapping[str, str] | None = None) -> Iterator[KafkaCluster]:
    cluster = KafkaCluster(directory, overrides)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()


def _log4j(path: Path) -> str:
    lines = [
        "log4j.rootLogger=INFO, FILE",
        "log4j.appender.FILE=org.apache.log4j.FileAppender",
        f"log4j.appender.FILE.File={path}",
        "log4j.appender.FILE.layout=org.apache.log4j.PatternLayout",
        "log4j.appender.FILE.layout.ConversionPattern=[%d] %p %m (%c)%n",
        # As Kafka's config/log4j.properties: the request log and the state change log off the
        # main one.
        "log4j.logger.kafka.request.logger=WARN",
        "log4j.logger.state.change.logger=WARN",
    ]
    return "\n".join(lines) + "\n"
