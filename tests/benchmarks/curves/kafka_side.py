"""Apache Kafka 3.9's side (ZooKeeper mode, tests/benchmarks/kafka/cluster.py) of the idle,
controlled shutdown and failover curves: the same topic grown to the same partition counts,
RF=3, each broker's own metadata read with kafka_metadata.py."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from confluent_kafka import ElectionType, TopicPartition
from confluent_kafka.admin import AdminClient, NewPartitions, NewTopic

from tests.benchmarks.curves import kafka_metadata
from tests.benchmarks.curves.highwater_side import REPLICATION_FACTOR, SYNC_TIMEOUT_S, TOPIC
from tests.benchmarks.curves.kafka_log import lines_since, seconds_to
from tests.benchmarks.curves.measure import wait_for
from tests.benchmarks.kafka.cluster import QUIET, KafkaBroker, KafkaCluster

# Small heaps: the brokers hold no data here, and three 1 GiB JVMs beside the other engineers'
# work would crowd this machine.
HEAP = ("-Xms256m", "-Xmx512m")
# As Highwater's test clusters have it (tests/integration/cluster_harness.py): failover then
# waits on the same ZooKeeper session expiry on both sides (Kafka's default is 18 s).
OVERRIDES = {"zookeeper.session.timeout.ms": "6000"}
ADMIN_TIMEOUT_S = 300.0
PREFERRED_ATTEMPTS = 10
# KafkaServer.controlledShutdown's line once the controller moved every leadership away (its
# ControlledShutdown answer named no partition remaining).
SHUTDOWN_ACCEPTED = re.compile(r"Controlled shutdown request returned successfully")


class KafkaCurves:
    def __init__(self, cluster: KafkaCluster) -> None:
        self.cluster = cluster
        self.partitions = 0

    def _admin(self) -> AdminClient:
        return AdminClient({"bootstrap.servers": self.cluster.bootstrap, "logger": QUIET})

    def _live(self) -> list[KafkaBroker]:
        return [
            b
            for b in self.cluster.brokers.values()
            if b.process is not None and b.process.poll() is None
        ]

    def broker_pids(self) -> list[int]:
        return [b.process.pid for b in self._live() if b.process is not None]

    def _metadata(self, broker: KafkaBroker) -> kafka_metadata.KafkaMetadata | None:
        return kafka_metadata.fetch("127.0.0.1", broker.port)

    def controller_id(self) -> int:
        for broker in self._live():
            found = self._metadata(broker)
            if found is not None and found.controller_id in self.cluster.brokers:
                return found.controller_id
        raise RuntimeError("no Kafka broker names a controller")

    def grow(self, partitions: int) -> None:
        admin = self._admin()
        if TOPIC in admin.list_topics(timeout=30).topics:
            futures = admin.create_partitions(
                [NewPartitions(TOPIC, partitions)], request_timeout=ADMIN_TIMEOUT_S
            )
        else:
            futures = admin.create_topics(
                [NewTopic(TOPIC, partitions, REPLICATION_FACTOR)], request_timeout=ADMIN_TIMEOUT_S
            )
        for future in futures.values():
            future.result(ADMIN_TIMEOUT_S)
        self.partitions = partitions
        self.wait_in_sync()

    def wait_in_sync(self) -> float:
        return wait_for(
            lambda: self._everywhere(preferred=True),
            SYNC_TIMEOUT_S,
            f"Kafka: {self.partitions} partitions in sync",
            every_s=0.5,
        )

    def _everywhere(self, *, preferred: bool) -> bool:
        live = self._live()
        live_ids = {b.broker_id for b in live}
        for broker in live:
            found = self._metadata(broker)
            if found is None:
                return False
            partitions = found.topics.get(TOPIC, ())
            if len(partitions) != self.partitions:
                return False
            for p in partitions:
                if p.leader not in live_ids:
                    return False
                if preferred and (p.leader != p.replicas[0] or len(p.isr) != REPLICATION_FACTOR):
                    return False
        return True

    def failover_s(self) -> float:
        """SIGKILL the controller; seconds until every live broker's own metadata shows a live
        leader for every partition. Then the broker is back and leaders preferred again."""
        victim = self.cluster.brokers[self.controller_id()]
        assert victim.process is not None
        started = time.monotonic()
        victim.process.kill()
        victim.process.wait(10)
        wait_for(lambda: self._everywhere(preferred=False), SYNC_TIMEOUT_S, "Kafka failover", 0.05)
        took = time.monotonic() - started
        self._restore(victim)
        return took

    def controlled_shutdown_s(self) -> tuple[float, int, float | None]:
        """SIGTERM a broker that is not the controller (it leads a third of the partitions);
        seconds until it exited, how many it led, and seconds until the controller accepted
        (KafkaServer's "Controlled shutdown request returned successfully"; None: no such
        line). Then it is back, leaders preferred: highwater_side's measure, on Kafka."""
        controller = self.controller_id()
        victim = self.cluster.brokers[max(b for b in self.cluster.brokers if b != controller)]
        led = self.leaders_of(victim.broker_id)
        log = victim.directory / "server.log"
        offset = log.stat().st_size
        signalled_at = time.time()
        started = time.monotonic()
        code = victim.stop(SYNC_TIMEOUT_S)
        took = time.monotonic() - started
        # The JVM's exit on SIGTERM, once its shutdown hook (KafkaServer.shutdown) has run.
        assert code in (0, 143), f"Kafka broker {victim.broker_id} exited with {code}"
        accepted = seconds_to(lines_since(log, offset), SHUTDOWN_ACCEPTED, signalled_at)
        self._restore(victim)
        return took, led, accepted

    def leaders_of(self, broker_id: int) -> int:
        found = self._metadata(self.cluster.brokers[broker_id])
        if found is None:
            raise RuntimeError(f"Kafka broker {broker_id} gave no metadata")
        return sum(1 for p in found.topics.get(TOPIC, ()) if p.leader == broker_id)

    def _restore(self, victim: KafkaBroker) -> None:
        """Start `victim` again, wait until it is in every ISR, then leaders preferred."""
        victim.start(self.cluster.jars, self.cluster.overrides, self.cluster.heap)
        wait_for(self._all_in_sync, SYNC_TIMEOUT_S, "Kafka broker back in sync", every_s=0.5)
        partitions = [TopicPartition(TOPIC, i) for i in range(self.partitions)]
        # No request_timeout: confluent-kafka 2.16's elect_leaders fails on keyword arguments.
        admin = self._admin()  # held until the answer: a collected client drops its requests
        # The controller refuses a partition whose preferred replica it does not yet see in the
        # ISR (the brokers' metadata may be ahead of it): ask again until all are preferred.
        for _attempt in range(PREFERRED_ATTEMPTS):
            admin.elect_leaders(ElectionType.PREFERRED, partitions).result(ADMIN_TIMEOUT_S)
            try:
                wait_for(lambda: self._everywhere(preferred=True), 30, "preferred leaders", 0.5)
                break
            except TimeoutError:
                continue
        self.wait_in_sync()

    def _all_in_sync(self) -> bool:
        live = self._live()
        if len(live) != len(self.cluster.brokers):
            return False
        found = self._metadata(live[0])
        return found is not None and all(
            len(p.isr) == REPLICATION_FACTOR for p in found.topics.get(TOPIC, ())
        )


@contextmanager
def running(root: Path) -> Iterator[KafkaCurves]:
    """ZooKeeper and 3 Kafka brokers under `root`; every process stopped on the way out."""
    cluster = KafkaCluster(root, OVERRIDES, heap=HEAP)
    try:
        cluster.start(timeout_s=180)
        yield KafkaCurves(cluster)
    finally:
        cluster.stop()
