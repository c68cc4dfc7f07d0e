"""Topic deletion reaches replicas that were down when it happened.

StopReplica goes only to live replicas; a replica that was down keeps the topic's log until
it is back and the controller's next (full) UpdateMetadata shows the topic gone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from client.admin import Admin
from client.zookeeper_server import ZooKeeperServer
from tests.integration.cluster_harness import Cluster, wait_until
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    produce,
    running_cluster,
    wait_converged,
    wait_whole,
    whole_cluster_around,
    zk_view,
)

pytestmark = [pytest.mark.integration]


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("deletion")
    with running_cluster(zookeeper.port, directory, FAST_REPLICATION) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


@pytest.mark.timeout(90)
async def test_a_replica_down_during_deletion_deletes_the_log_when_back(cluster: Cluster) -> None:
    topic = "deleted-while-down"
    ids = sorted(cluster.brokers)
    await create_topic(cluster, topic, [ids])
    await produce(cluster, topic, 0, [b"a", b"b"])
    replicas = [cluster.brokers[b] for b in ids]
    await wait_converged(replicas, topic, 0, 2)
    down = cluster.brokers[ids[-1]]
    assert down.stop() == 0
    assert down.partition_dir(topic, 0).exists()

    async with Admin(cluster.live_bootstrap) as admin:
        await admin.delete_topic(topic)
    for broker in replicas[:-1]:
        gone = broker.partition_dir(topic, 0)
        wait_until(lambda gone=gone: not gone.exists(), 30, "deleted on a live replica")
    async with zk_view(cluster) as zk:
        assert await zk.partition_state(topic, 0) is None, "the topic's znodes are gone"
    assert down.partition_dir(topic, 0).exists(), "the stopped replica still has it"

    down.start()
    await wait_whole(cluster)
    wait_until(lambda: not down.partition_dir(topic, 0).exists(), 30, "the stray log deleted")
