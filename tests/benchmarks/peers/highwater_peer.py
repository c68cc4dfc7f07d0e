"""Highwater: ZooKeeper and 3 brokers (Kafka's default settings), a topic per measure with
1 partition, RF=3, min.insync.replicas=2, led by broker 1; the clients of `highwater perf`,
or (`HighwaterKafkaWirePeer`) confluent-kafka's through the brokers' Kafka listener, the same
clients and settings that drive Apache Kafka (kafka_peer.py)."""

from __future__ import annotations

import tempfile
import urllib.request
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import trio

from client.cli import perf_tools
from client.cli.zookeeper_server import ZooKeeperServer, free_port
from tests.benchmarks.peers import confluent_client
from tests.benchmarks.peers.common import Workload
from tests.benchmarks.wakes import request_counts
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import create_topic, prepare_cluster

ACKS_ALL = -1
KAFKA_LISTENER = "KAFKA"
LEADER = 1


class HighwaterPeer:
    name = "Highwater"

    def __init__(self, zookeeper: ZooKeeperServer, cluster: Cluster, metrics_url: str) -> None:
        self.zookeeper = zookeeper
        self.cluster = cluster
        self.metrics_url = metrics_url

    def broker_pids(self) -> list[int]:
        return [b.process.pid for b in self.cluster.brokers.values() if b.process is not None]

    def server_pids(self) -> list[int]:
        zookeeper = [self.zookeeper.pid] if self.zookeeper.pid is not None else []
        return [*self.broker_pids(), *zookeeper]

    def leader_pid(self) -> int:
        process = self.cluster.brokers[LEADER].process
        assert process is not None, "the leader is not running"
        return process.pid

    def leader_produce_requests(self) -> float:
        """Produce requests broker 1 (every topic's leader) has served, from its /metrics."""
        with urllib.request.urlopen(self.metrics_url, timeout=5) as page:
            return request_counts(page.read().decode()).get("Produce", 0.0)

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
        # The leader's metrics listener, for its Produce request count (the rounds a second
        # the no-work floor is run at, run.py).
        metrics_port = free_port()
        leader_overrides = {LEADER: {"metrics.listener": f"http://127.0.0.1:{metrics_port}"}}
        cluster = Cluster(
            zookeeper.port, Path(root) / "brokers", 3, overrides, leader_overrides, listeners
        )
        try:
            cluster.start()
            prepare_cluster(cluster, timeout_s=60)
            peer = HighwaterKafkaWirePeer if kafka_wire else HighwaterPeer
            yield peer(zookeeper, cluster, f"http://127.0.0.1:{metrics_port}/metrics")
        finally:
            cluster.stop()
            zookeeper.stop()
