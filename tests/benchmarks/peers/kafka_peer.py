"""Apache Kafka 3.9 (ZooKeeper mode): ZooKeeper and 3 brokers with Kafka's defaults but for
Highwater's peer settings (tests/benchmarks/kafka/cluster.py), a topic per measure with 1
partition, RF=3, min.insync.replicas=2, led by broker 1; confluent-kafka's clients
(confluent_client.py), the same that run against Highwater's Kafka listener."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from functools import partial
from pathlib import Path

from confluent_kafka.admin import AdminClient, NewTopic

from tests.benchmarks.kafka import cluster as kafka_cluster
from tests.benchmarks.peers import confluent_client
from tests.benchmarks.peers.common import Workload, wait_until

LEADER = 1
# Untimed records through a fresh cluster before the first run: the brokers' JVMs interpret
# their code at first and compile it as it runs hot, which a long-running Kafka has done.
WARM_UP = Workload(records=50_000)


class KafkaPeer:
    name = "Kafka"

    def __init__(self, cluster: kafka_cluster.KafkaCluster) -> None:
        self.cluster = cluster

    def server_pids(self) -> list[int]:
        return self.cluster.pids()

    def broker_pids(self) -> list[int]:
        return [b.process.pid for b in self.cluster.brokers.values() if b.process is not None]

    def prepare(self, run: int) -> None:
        create_topics(self.cluster.bootstrap, [f"produce-{run}", f"e2e-{run}"])

    def produce(self, run: int, workload: Workload) -> float:
        topic = f"produce-{run}"
        return confluent_client.produce(self.name, self.cluster.bootstrap, topic, workload)

    def consume(self, run: int, workload: Workload) -> float:
        topic = f"produce-{run}"
        return confluent_client.consume(self.name, self.cluster.bootstrap, topic, workload)

    def end_to_end(self, run: int, workload: Workload) -> list[float]:
        topic = f"e2e-{run}"
        return confluent_client.end_to_end(self.name, self.cluster.bootstrap, topic, workload)


def create_topics(bootstrap: str, names: list[str], timeout_s: float = 30) -> None:
    """Each with partition 0 on brokers 1, 2, 3 (1 leads) and min.insync.replicas=2; returns
    once every broker's metadata shows broker 1 leading with all 3 in sync."""
    admin = AdminClient({"bootstrap.servers": bootstrap, "logger": confluent_client.QUIET})
    topics = [
        NewTopic(name, 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})
        for name in names
    ]
    for future in admin.create_topics(topics, request_timeout=timeout_s).values():
        future.result(timeout_s)
    for address in bootstrap.split(","):
        one = AdminClient({"bootstrap.servers": address, "logger": confluent_client.QUIET})
        for name in names:
            wait_until(partial(_led_and_in_sync, one, name), timeout_s, f"{name}'s leader")


def _led_and_in_sync(admin: AdminClient, topic: str) -> bool:
    partitions = admin.list_topics(topic, timeout=5).topics[topic].partitions
    partition = partitions.get(confluent_client.PARTITION)
    return (
        partition is not None
        and partition.error is None
        and partition.leader == LEADER
        and sorted(partition.isrs) == [1, 2, 3]
    )


@contextmanager
def running() -> Iterator[KafkaPeer]:
    with (
        tempfile.TemporaryDirectory(prefix="kafka-bench-peers-") as root,
        kafka_cluster.running(Path(root)) as cluster,
    ):
        create_topics(cluster.bootstrap, ["warm-up"])
        confluent_client.produce("Kafka warm-up", cluster.bootstrap, "warm-up", WARM_UP)
        confluent_client.consume("Kafka warm-up", cluster.bootstrap, "warm-up", WARM_UP)
        yield KafkaPeer(cluster)
