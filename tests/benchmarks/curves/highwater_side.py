"""Highwater's side of the curves: ZooKeeper and 3 brokers (tests/integration/cluster_harness.py,
Highwater's defaults), one topic grown to each partition count (RF=3), and the measures that
need a real cluster: the brokers' pids, a controller's failover, a controlled shutdown, and
`highwater perf produce` from several processes at once."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer, free_port
from protocol.messages.elect_leaders import ElectionType
from protocol.messages.metadata import MetadataResponse
from tests.benchmarks.curves.broker_log import events_since, seconds_to
from tests.benchmarks.curves.measure import wait_for
from tests.integration.cluster_harness import BrokerProcess, Cluster, fetch_metadata
from tests.integration.replication_checks import prepare_cluster

TOPIC = "curve"
REPLICATION_FACTOR = 3
SYNC_TIMEOUT_S = 600.0
ADMIN_TIMEOUT_MS = 300_000
_RATE = re.compile(r"(\d+) records sent, ([\d.]+) records/sec")


class HighwaterCurves:
    def __init__(self, zookeeper: ZooKeeperServer, cluster: Cluster) -> None:
        self.zookeeper = zookeeper
        self.cluster = cluster
        self.partitions = 0
        # With a path prefix: py-spy samples each surviving broker through each failover.
        self.profile_failover: str | None = None
        self._failovers = 0

    def broker_pids(self) -> list[int]:
        return [b.process.pid for b in self.cluster.running_brokers() if b.process is not None]

    def metadata(self, broker: BrokerProcess) -> MetadataResponse | None:
        return trio.run(fetch_metadata, broker.port)

    def controller_id(self) -> int:
        for broker in self.cluster.running_brokers():
            response = self.metadata(broker)
            if response is not None and response.controller_id in self.cluster.brokers:
                return response.controller_id
        raise RuntimeError("no broker names a controller")

    def grow(self, partitions: int, topic: str = TOPIC) -> None:
        """`topic` created with, or grown to, `partitions`; returns when every broker shows
        every partition led by its preferred leader with all replicas in sync."""

        async def create() -> None:
            async with Admin(self.cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin:
                if topic in await admin.list_topics():
                    await admin.create_partitions(topic, partitions)
                else:
                    await admin.create_topic(topic, partitions, REPLICATION_FACTOR)

        trio.run(create)
        if topic == TOPIC:
            self.partitions = partitions
        self.wait_in_sync(topic, partitions)

    def wait_in_sync(self, topic: str = TOPIC, partitions: int | None = None) -> float:
        count = self.partitions if partitions is None else partitions
        return wait_for(
            lambda: self._everywhere(topic, count, preferred=True),
            SYNC_TIMEOUT_S,
            f"{count} partitions in sync",
            every_s=0.5,
        )

    def _everywhere(self, topic: str, count: int, *, preferred: bool) -> bool:
        """Every running broker's metadata: `count` partitions of `topic`, each led by a live
        broker (and, when `preferred`, by its first replica with every replica in sync)."""
        live = {b.broker_id for b in self.cluster.running_brokers()}
        for broker in self.cluster.running_brokers():
            response = self.metadata(broker)
            if response is None:
                return False
            found = [t for t in response.topics if t.name == topic]
            if not found or len(found[0].partitions) != count:
                return False
            for p in found[0].partitions:
                if p.leader_id not in live:
                    return False
                if preferred and (
                    p.leader_id != p.replica_nodes[0] or len(p.isr_nodes) != REPLICATION_FACTOR
                ):
                    return False
        return True

    def in_every_isr(self, topic: str, broker_id: int) -> bool:
        """Every running broker's metadata: `broker_id` in the ISR of every partition of
        `topic`."""
        for broker in self.cluster.running_brokers():
            response = self.metadata(broker)
            if response is None:
                return False
            found = [t for t in response.topics if t.name == topic]
            if not found or not all(broker_id in p.isr_nodes for p in found[0].partitions):
                return False
        return True

    def leaders_of(self, broker_id: int) -> int:
        response = self.metadata(self.cluster.brokers[broker_id])
        assert response is not None
        (topic,) = [t for t in response.topics if t.name == TOPIC]
        return sum(1 for p in topic.partitions if p.leader_id == broker_id)

    def failover_s(self) -> float:
        """SIGKILL the controller; seconds until every live broker's metadata shows a live
        leader for every partition. Then the broker is back and leaders preferred again."""
        victim = self.cluster.brokers[self.controller_id()]
        assert victim.process is not None
        self._failovers += 1
        spies = self._spy_on_survivors(victim) if self.profile_failover else []
        started = time.monotonic()
        victim.process.send_signal(signal.SIGKILL)
        victim.process.wait(10)
        wait_for(
            lambda: self._everywhere(TOPIC, self.partitions, preferred=False),
            SYNC_TIMEOUT_S,
            "failover",
            every_s=0.05,
        )
        took = time.monotonic() - started
        for spy in spies:
            spy.send_signal(signal.SIGINT)  # py-spy writes what it has on SIGINT
            spy.wait(30)
        self.restore(victim)
        return took

    def _spy_on_survivors(self, victim: BrokerProcess) -> list[subprocess.Popen[bytes]]:
        """py-spy (the venv's; `pip install py-spy`) on each other broker, collapsed stacks
        into PREFIX-<partitions>p-failover<n>-b<id>.txt; such a failover's time is not clean."""
        spy = str(Path(sys.executable).with_name("py-spy"))
        spies = []
        for broker_id, broker in self.cluster.brokers.items():
            if broker is victim or broker.process is None:
                continue
            name = f"{self.partitions}p-failover{self._failovers}-b{broker_id}"
            path = f"{self.profile_failover}-{name}.txt"
            command = [spy, "record", "--pid", str(broker.process.pid), "--nonblocking"]
            command += ["--rate", "50", "--format", "raw", "--output", path]
            spies.append(subprocess.Popen(command, stdout=subprocess.DEVNULL))
        time.sleep(1.0)  # py-spy's time to attach: starting late would only lose samples
        return spies

    def controlled_shutdown_s(self) -> tuple[float, int, float | None]:
        """SIGTERM a broker that is not the controller (it leads a third of the partitions);
        seconds until it exited, how many it led, and seconds until the controller accepted
        (its "controlled shutdown accepted" line; None: it logged none). Then it is back,
        leaders preferred."""
        controller = self.controller_id()
        victim_id = max(b for b in self.cluster.brokers if b != controller)
        victim = self.cluster.brokers[victim_id]
        led = self.leaders_of(victim_id)
        offset = victim.log_path.stat().st_size
        signalled_at = time.time()
        started = time.monotonic()
        code = victim.stop(SYNC_TIMEOUT_S)
        took = time.monotonic() - started
        assert code == 0, f"broker {victim_id} exited with {code}"
        events = list(events_since(victim.log_path, offset))
        accepted = seconds_to(events, "controlled shutdown accepted", signalled_at)
        self.restore(victim)
        return took, led, accepted

    def restore(self, broker: BrokerProcess) -> None:
        broker.start()
        wait_for(
            lambda: (
                self._everywhere(TOPIC, self.partitions, preferred=False) and self._all_in_sync()
            ),
            SYNC_TIMEOUT_S,
            f"broker {broker.broker_id} back in sync",
            every_s=0.5,
        )

        async def elect() -> None:
            async with Admin(self.cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin:
                await admin.elect_leaders(ElectionType.PREFERRED, None)

        trio.run(elect)
        self.wait_in_sync()

    def _all_in_sync(self) -> bool:
        response = self.metadata(self.cluster.running_brokers()[0])
        if response is None:
            return False
        (topic,) = [t for t in response.topics if t.name == TOPIC]
        return all(len(p.isr_nodes) == REPLICATION_FACTOR for p in topic.partitions)

    def produce_rate(self, topic: str, producers: int, records_each: int) -> float:
        """`producers` processes of `highwater perf produce` (acks=all, 100-byte records) at
        once; records/s together: all their records over the longest one's own elapsed time
        (which leaves out each process's start-up)."""
        command = [
            sys.executable,
            "-m",
            "client.cli",
            "perf",
            "produce",
            "-b",
            self.cluster.bootstrap,
            "--topic",
            topic,
            "--num-records",
            str(records_each),
            "--record-size",
            "100",
            "--acks",
            "all",
        ]
        running = [
            subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            for _ in range(producers)
        ]
        elapsed_s = []
        for process in running:
            out, _ = process.communicate(timeout=600)
            text = out.decode(errors="replace")
            assert process.returncode == 0, text
            found = _RATE.findall(text)
            assert found, text
            count, rate = found[-1]
            elapsed_s.append(int(count) / float(rate))
        return producers * records_each / max(elapsed_s)


@contextmanager
def running(root: Path) -> Iterator[HighwaterCurves]:
    """ZooKeeper and 3 brokers under `root`; every process stopped on the way out."""
    zookeeper = ZooKeeperServer(root / "zookeeper", free_port())
    cluster = Cluster(zookeeper.port, root / "brokers", 3)
    try:
        zookeeper.start()
        cluster.start()
        prepare_cluster(cluster, timeout_s=120)
        yield HighwaterCurves(zookeeper, cluster)
    finally:
        stop(zookeeper, cluster)


def stop(zookeeper: ZooKeeperServer, cluster: Cluster) -> None:
    """Brokers (SIGTERM, SIGKILL for one that ignores it), then ZooKeeper."""
    cluster.stop()
    for broker in cluster.brokers.values():
        if broker.process is not None and broker.process.poll() is None:
            broker.process.kill()
            broker.process.wait(10)
    zookeeper.stop()
