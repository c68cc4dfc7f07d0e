"""Highwater: ZooKeeper and 3 brokers (Kafka's default settings), a topic per measure with
1 partition, RF=3, min.insync.replicas=2, led by broker 1; the clients of `highwater perf`."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import trio

from client.cli import perf_tools
from client.cli.zookeeper_server import ZooKeeperServer, free_port
from tests.benchmarks.peers.common import Workload
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import create_topic, prepare_cluster

ACKS_ALL = -1


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


@contextmanager
def running() -> Iterator[HighwaterPeer]:
    with tempfile.TemporaryDirectory(prefix="hw-bench-peers-") as root:
        zookeeper = ZooKeeperServer(Path(root) / "zookeeper", free_port())
        zookeeper.start()
        # Leaders stay where they were created (broker 1), as Redis's primary and a stream's
        # JetStream leader stay put.
        overrides = {"auto.leader.rebalance.enable": "false"}
        cluster = Cluster(zookeeper.port, Path(root) / "brokers", 3, overrides)
        try:
            cluster.start()
            prepare_cluster(cluster, timeout_s=60)
            yield HighwaterPeer(zookeeper, cluster)
        finally:
            cluster.stop()
            zookeeper.stop()
