"""A whole cluster stopped at once, as `docker compose down` does: every broker gets SIGTERM at
the same moment, and in one variant its ZooKeeper too.

Each broker must exit 0 on its own, well inside a container engine's 30 s grace period (a
controlled shutdown whose controller, or ZooKeeper, is stopping too must give up in time), with
its logs closed cleanly; the next start must be whole again, with every acknowledged record.
The bound is generous on purpose: it tells "stops by itself" from "hangs until killed".
Each test runs its own ZooKeeper (one stops it).
"""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from broker.log.manager import CLEAN_SHUTDOWN_FILE
from client.cli.zookeeper_server import ZooKeeperServer, free_port
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    logged_events,
    produce,
    read_committed,
    wait_isr,
    wait_whole,
    zk_view,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

STOP_BOUND_S = 20  # a container engine kills after 30 s
WHOLE_S = 60  # includes, when ZooKeeper stopped too, the old sessions' expiry (6 s here)
TOPIC = "stop-together"
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]] * 2
SETTINGS = {
    **FAST_REPLICATION,
    # Kafka's controlled shutdown defaults (FAST_REPLICATION shortens the backoff): the bound
    # must hold with them.
    "controlled.shutdown.max.retries": "3",
    "controlled.shutdown.retry.backoff.ms": "5000",
}


@pytest.fixture
def zookeeper_server(zookeeper_available: None, tmp_path: Path) -> Iterator[ZooKeeperServer]:
    server = ZooKeeperServer(tmp_path / "zookeeper", free_port())
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def cluster(zookeeper_server: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    cluster = Cluster(zookeeper_server.port, tmp_path / "cluster", 3, SETTINGS)
    cluster.start()
    try:
        yield cluster
    except BaseException:
        print(cluster.logs(tail_chars=20_000))
        raise
    finally:
        for broker in cluster.brokers.values():
            if broker.running:
                broker.kill()


@pytest.mark.parametrize("zookeeper_stops_too", [False, True], ids=["brokers", "and-zookeeper"])
def test_every_broker_stops_by_itself_and_the_cluster_comes_back_whole(
    cluster: Cluster, zookeeper_server: ZooKeeperServer, zookeeper_stops_too: bool
) -> None:
    acked = trio.run(_prepare, cluster)
    marks = cluster.log_marks()

    deadline = time.monotonic() + STOP_BOUND_S
    for broker in cluster.brokers.values():
        broker.signal(signal.SIGTERM)
    if zookeeper_stops_too:
        zookeeper_server.stop()  # SIGTERM, then waits for the JVM (about a second)
    exits = _exit_statuses(cluster, deadline)

    assert exits == {1: 0, 2: 0, 3: 0}, f"exit statuses within {STOP_BOUND_S} s: {exits}"
    for broker in cluster.brokers.values():
        assert (broker.data_dir / CLEAN_SHUTDOWN_FILE).exists(), broker.broker_id
        assert logged_events(broker, "stopped cleanly", since=marks[broker.broker_id])
        assert "Traceback" not in broker.log_text()
    if zookeeper_stops_too:
        for broker in cluster.brokers.values():
            # Either nothing was tried (ZooKeeper already gone) or the attempt in progress
            # ended when it went; never a wait for the request timeout.
            gave_up = logged_events(
                broker,
                "controlled shutdown skipped",
                since=marks[broker.broker_id],
                reason="ZooKeeper session not connected",
            ) or logged_events(
                broker,
                "controlled shutdown failed; stopping anyway",
                since=marks[broker.broker_id],
                reason="ZooKeeper session not connected",
            )
            accepted = logged_events(
                broker, "controlled shutdown accepted", since=marks[broker.broker_id]
            )
            assert gave_up or accepted, broker.broker_id

    if zookeeper_stops_too:
        zookeeper_server.start()
    cluster.start()
    assert trio.run(_whole_with, cluster, acked) == acked


def _exit_statuses(cluster: Cluster, deadline: float) -> dict[int, int | None]:
    """Each broker's exit status, None for one still running at `deadline` (monotonic)."""
    exits: dict[int, int | None] = {}
    for broker_id, broker in cluster.brokers.items():
        assert broker.process is not None
        try:
            exits[broker_id] = broker.process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            exits[broker_id] = None
    return exits


async def _prepare(cluster: Cluster) -> dict[int, list[bytes | None]]:
    """The cluster whole, a replicated topic with acknowledged records in every partition."""
    await wait_whole(cluster, 60)
    await create_topic(cluster, TOPIC, ASSIGNMENT)
    acked: dict[int, list[bytes | None]] = {}
    async with zk_view(cluster) as view:
        for partition in range(len(ASSIGNMENT)):
            await wait_isr(cluster, view, TOPIC, partition, [1, 2, 3])
            values = [f"{partition}-{i}".encode() for i in range(20)]
            await produce(cluster, TOPIC, partition, values)
            acked[partition] = list(values)
    return acked


async def _whole_with(
    cluster: Cluster, acked: dict[int, list[bytes | None]]
) -> dict[int, list[bytes | None]]:
    """Wait until every broker is registered and every ISR whole; what each partition holds."""
    await wait_whole(cluster, WHOLE_S)
    async with zk_view(cluster) as view:
        for partition in acked:
            await wait_isr(cluster, view, TOPIC, partition, [1, 2, 3], timeout_s=WHOLE_S)
    return {partition: await read_committed(cluster, TOPIC, partition) for partition in acked}
