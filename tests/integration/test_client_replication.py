"""`topics describe` against real brokers and ZooKeeper: the ISR, the high watermark and every
replica's log end offset, each LEO asked of the replica's own broker (ListOffsets with the debug
replica id), and "-" for a replica whose broker is down.

Followers fetching is built separately, so nothing here waits for followers to catch up: a
follower's LEO is only required to be known (its broker hosts the partition) and not past the
leader's.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Iterator

import pytest
import trio

from client.admin import Admin, PartitionDescription
from client.cli.zookeeper_server import ZooKeeperServer
from client.producer import Producer
from tests.integration.cluster_harness import Cluster, eventually
from tests.integration.replication_checks import running_cluster, wait_whole

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RECORDS = 20


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("cluster"), {}) as cluster:
        yield cluster


@pytest.fixture
async def admin(cluster: Cluster) -> AsyncIterator[Admin]:
    await wait_whole(cluster)
    async with Admin(cluster.bootstrap) as admin:
        yield admin


async def _describe(admin: Admin, topic: str) -> PartitionDescription:
    (described,) = await admin.describe_topics([topic], offsets_timeout_ms=2000)
    (partition,) = described.partitions
    return partition


async def _create_with_records(cluster: Cluster, admin: Admin, topic: str) -> None:
    await admin.create_topic(topic, partitions=1, replication_factor=3)
    async with Producer(cluster.bootstrap, acks=1) as producer:
        for i in range(RECORDS):
            await producer.send(topic, b"v%d" % i, partition=0)
        await producer.flush()


async def test_describe_asks_every_replica_for_its_log_end_offset(
    cluster: Cluster, admin: Admin
) -> None:
    await _create_with_records(cluster, admin, "described")
    p = await _describe(admin, "described")
    assert sorted(p.replicas) == [1, 2, 3] and p.leader in p.replicas
    assert set(p.isr) <= set(p.replicas) and p.leader in p.isr
    assert list(p.replica_log_end_offsets) == list(p.replicas)
    assert p.replica_log_end_offsets[p.leader] == p.log_end_offset == RECORDS
    assert p.high_watermark is not None and 0 <= p.high_watermark <= RECORDS
    for replica, leo in p.replica_log_end_offsets.items():
        assert leo is not None and 0 <= leo <= RECORDS, (replica, leo)

    with trio.fail_after(60):
        shown = await trio.run_process(
            [sys.executable, "-m", "client.cli", "topics", "describe", "described"],
            env={**os.environ, "HIGHWATER_BOOTSTRAP": cluster.bootstrap},
            capture_stdout=True,
        )
    lines = shown.stdout.decode().splitlines()
    topic, topic_id, *counts = lines[0].split("\t")
    assert (topic, counts) == ("Topic: described", ["PartitionCount: 1", "ReplicationFactor: 3"])
    assert topic_id.startswith("TopicId: ") and len(topic_id) == len("TopicId: ") + 22
    assert lines[1].split() == [
        "Partition",
        "Leader",
        "LeaderEpoch",
        "Replicas",
        "Isr",
        "Offline",
        "HighWatermark",
        "LogEndOffsets",
    ]
    row = lines[2].split()
    assert row[0] == "0" and row[1] == str(p.leader)
    assert f"{p.leader}={RECORDS}" in row[7].split(",")


async def test_a_down_replica_shows_no_log_end_offset(cluster: Cluster, admin: Admin) -> None:
    await _create_with_records(cluster, admin, "one-down")
    p = await _describe(admin, "one-down")
    follower = next(r for r in p.replicas if r != p.leader)
    cluster.brokers[follower].kill()
    try:

        async def shown_down() -> PartitionDescription | None:
            now = await _describe(admin, "one-down")
            return now if now.replica_log_end_offsets.get(follower, 0) is None else None

        down = await eventually(shown_down, 60, f"broker {follower}'s LEO to show as unknown")
        assert down is not None
        assert down.leader == p.leader
        assert down.replica_log_end_offsets[p.leader] == RECORDS
    finally:
        cluster.brokers[follower].start()
    await wait_whole(cluster)
