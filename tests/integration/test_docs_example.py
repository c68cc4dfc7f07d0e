"""docs/examples/python_clients.py, the Python clients' page, runs as a user would run it
against a real cluster and prints what docs/operations.md says it prints."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import running_cluster, wait_whole

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "docs" / "examples" / "python_clients.py"


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("cluster"), {}) as cluster:
        yield cluster


def _run_example(cluster: Cluster) -> list[str]:
    done = subprocess.run(
        [sys.executable, str(EXAMPLE), cluster.bootstrap, "orders"],
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    consumed = [line for line in lines if line.startswith("  ")]
    assert sorted(line.split()[-1] for line in consumed) == sorted(
        f"b'order-{i}'" for i in range(10)
    )
    assert lines[-2].startswith("blocking produce: partition ")
    assert lines[-1].startswith("blocking consume: ConsumerRecord(topic='orders'")
    assert "value=b'from plain Python'" in lines[-1]
    return lines


def test_the_python_clients_example_runs_and_runs_again(cluster: Cluster) -> None:
    trio.run(wait_whole, cluster)
    first = _run_example(cluster)
    assert first[0].startswith("produced 10; the last is partition ")
    again = _run_example(cluster)  # the group reads this run's records only
    assert again[0] == "orders exists: the group goes on from its committed offsets"
    assert again[1].startswith("produced 10; the last is partition ")
