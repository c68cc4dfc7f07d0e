"""Highwater: ZooKeeper and 3 brokers (Kafka's default settings), a topic per measure with
1 partition, RF=3, min.insync.replicas=2, led by broker 1; the clients of `highwater perf`,
or (`HighwaterKafkaWirePeer`) confluent-kafka's through the brokers' Kafka listener, the same
clients and settings that drive Apache Kafka (kafka_peer.py)."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import trio

from client.cli import perf_tools
from client.cli.zookeeper_server import ZooKeeperServer, free_port
from tests.benchmarks.peers import confluent_client
from tests.benchmarks.peers.common import Workload
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import create_topic, prepare_cluster

ACKS_ALL = -1
KAFKA_LISTENER = "KAFKA"


class HighwaterPeer:
    name = "Highwater"

    def __init__(self, zookeeper: ZooKeeperServer, cluster: Cluster) -> None:
        self.zookeeper = zookeeper
        self.cluster = cluster

    def server_pids(self) -> list[int]:
        brokers = [b.process.pid for b in self.cluster.brokers.values() if b.process is not None]
        return [*brokers, *([self.zookeeper.pid] if self.zookeeper.pid is not None else [])]

    def prepare(self, run: int) -> None:
        for name in (f"produce-{run}", f"e2e-{run}"):
            trio.run(create_topic, self.cluster, name, [[1, 2, 3]], {"min.insync.replicas": "2"})

    def produce(self, run: int, workload: Workload) -> float:
        topic = f"produce-{run}"
        result = trio.run(
            lambda: perf_tools.run_produce_perf(
                self.cluster.bootstrap,
                topic,
                num_records=workload.records,
                record_size=workload.record_size,
                acks=ACKS_ALL,
                echo=lambda _line: None,
            )
        )
        if result.failed:
            raise SystemExit(f"Highwater: {result.failed} records failed: {result.first_error}")
        return result.rate

    def consume(self, run: int, workload: Workload) -> float:
        result = trio.run(
            lambda: perf_tools.run_consume_perf(
                self.cluster.bootstrap,
                f"produce-{run}",
                messages=workload.records,
                timeout_ms=10_000,
            )
        )
        return result.rate

    def end_to_end(self, run: int, workload: Workload) -> list[float]:
        topic = f"e2e-{run}"
        return trio.run(
            lambda: perf_tools.run_end_to_end_perf(
                self.cluster.bootstrap,
                topic,
                num_records=workload.e2e_records,
                record_size=workload.record_size,
                throughput=workload.rate,
                acks=ACKS_ALL,
                timeout_s=workload.timeout_s,
            )
        )


class HighwaterKafkaWirePeer(HighwaterPeer):
    name = "Highwater (Kafka wire)"

    @property
    def kafka_bootstrap(self) -> str:
        return self.cluster.bootstrap_on(KAFKA_LISTENER)

    def produce(self, run: int, workload: Workload) -> float:
        topic = f"produce-{run}"
        return confluent_client.produce(self.name, self.kafka_bootstrap, topic, workload)

    def consume(self, run: int, workload: Workload) -> float:
        topic = f"produce-{run}"
        return confluent_client.consume(self.name, self.kafka_bootstrap, topic, workload)

    def end_to_end(self, run: int, workload: Workload) -> list[float]:
        topic = f"e2e-{run}"
        return confluent_client.end_to_end(self.name, self.kafka_bootstrap, topic, workload)


def running_kafka_wire() -> AbstractContextManager[HighwaterPeer]:
    return running(kafka_wire=True)


@contextmanager
def running(kafka_wire: bool = False) -> Iterator[HighwaterPeer]:
    with tempfile.TemporaryDirectory(prefix="hw-bench-peers-") as root:
        zookeeper = ZooKeeperServer(Path(root) / "zookeeper", free_port())
        zookeeper.start()
        # Leaders stay where they were created (broker 1), as Redis's primary and a stream's
        # JetStream leader stay put.
        overrides = {"auto.leader.rebalance.enable": "false"}
        listeners = None
        if kafka_wire:
            # As tests/integration/test_kafka_clients.py starts it: the inter-broker listener
            # first, then one speaking Kafka's protocol.
            overrides["listener.wire.protocol.map"] = f"{KAFKA_LISTENER}:kafka"
            listeners = {"PLAINTEXT": "PLAINTEXT", KAFKA_LISTENER: "PLAINTEXT"}
        cluster = Cluster(zookeeper.port, Path(root) / "brokers", 3, overrides, None, listeners)
        try:
            cluster.start()
            prepare_cluster(cluster, timeout_s=60)
            yield (HighwaterKafkaWirePeer if kafka_wire else HighwaterPeer)(zookeeper, cluster)
        finally:
            cluster.stop()
            zookeeper.stop()
