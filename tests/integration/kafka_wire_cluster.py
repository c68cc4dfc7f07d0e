"""A 3-broker cluster with a Kafka listener (KAFKA, Kafka's wire) beside the native one on
every broker, and the tools the Kafka-client tests drive: kcat, the CLI (docs/kafka.md)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import FAST_REPLICATION, prepare_cluster

__all__ = [
    "CLI",
    "DEADLINE_S",
    "KCAT",
    "cli",
    "create_topic",
    "kafka_bootstrap",
    "kafka_cluster",
    "kcat",
]

CLI = [sys.executable, "-m", "client.cli"]
DEADLINE_S = 60
KCAT = shutil.which("kcat")
KAFKA_LISTENER = {
    **FAST_REPLICATION,
    "listener.wire.protocol.map": "KAFKA:kafka",
    # A member that stops heart-beating leaves its group in 6 s, not 45 s.
    "group.consumer.session.timeout.ms": "6000",
    "group.consumer.heartbeat.interval.ms": "1000",
}


@contextmanager
def kafka_cluster(zookeeper_port: int, directory: Path) -> Iterator[Cluster]:
    if KCAT is None:
        pytest.fail("kcat is not installed (make kcat)")  # make test installs it: never skip
    cluster = Cluster(
        zookeeper_port,
        directory,
        3,
        dict(KAFKA_LISTENER),
        listeners={"PLAINTEXT": "PLAINTEXT", "KAFKA": "PLAINTEXT"},
    )
    cluster.start()
    try:
        prepare_cluster(cluster, timeout_s=60)
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


def kafka_bootstrap(cluster: Cluster) -> str:
    return cluster.bootstrap_on("KAFKA")


def cli(cluster: Cluster, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "HIGHWATER_DEBUG"}
    env["HIGHWATER_BOOTSTRAP"] = cluster.bootstrap
    result = subprocess.run(
        [*CLI, *args], input=stdin, capture_output=True, env=env, timeout=DEADLINE_S
    )
    assert result.returncode == 0, result.stderr.decode()
    return result


def kcat(cluster: Cluster, *args: str, stdin: bytes = b"") -> subprocess.CompletedProcess[bytes]:
    assert KCAT is not None
    result = subprocess.run(
        [KCAT, "-b", kafka_bootstrap(cluster), *args],
        input=stdin,
        capture_output=True,
        timeout=DEADLINE_S,
    )
    assert result.returncode == 0, result.stderr.decode()
    return result


def create_topic(cluster: Cluster, name: str, partitions: int = 3) -> None:
    cli(
        cluster,
        "topics",
        "create",
        name,
        "--partitions",
        str(partitions),
        "--replication-factor",
        "3",
        "--config",
        "min.insync.replicas=2",
    )
