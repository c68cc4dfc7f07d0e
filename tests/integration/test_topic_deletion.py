"""Topic deletion reaches replicas that were down when it happened, and survives a
controller failover.

StopReplica goes only to live replicas; a replica that was down keeps the topic's log until
it is back and the controller's next (full) UpdateMetadata shows the topic gone. A pending
deletion is a znode under /admin/delete_topics, so the next controller finishes it. A topic
created again under the same name while a replica was down has a new id (KIP-516): the
replica's old log holds the old id (partition.metadata), so it is deleted, not served.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from controller import zk_data
from controller.zk_topics import create_topic as create_zk_topic
from tests.integration.cluster_harness import Cluster, eventually, wait_until
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    ZkView,
    create_topic,
    produce,
    read_committed,
    running_cluster,
    wait_converged,
    wait_isr,
    wait_led,
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


def _gone(path: Path) -> Callable[[], bool]:
    return lambda: not path.exists()


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
        wait_until(_gone(broker.partition_dir(topic, 0)), 30, "deleted on a live replica")
    async with zk_view(cluster) as zk:
        assert await zk.partition_state(topic, 0) is None, "the topic's znodes are gone"
    assert down.partition_dir(topic, 0).exists(), "the stopped replica still has it"

    down.start()
    await wait_whole(cluster)
    wait_until(lambda: not down.partition_dir(topic, 0).exists(), 30, "the stray log deleted")


@pytest.mark.timeout(90)
async def test_deletion_requested_while_the_controller_is_down_completes(cluster: Cluster) -> None:
    """The controller fails with a deletion pending (the marker under /admin/delete_topics is
    all that is written): the next controller finds it at load and finishes the deletion,
    and the old controller's replica deletes its log when it is back."""
    topic = "deleted-across-failover"
    ids = sorted(cluster.brokers)
    await create_topic(cluster, topic, [ids])
    await produce(cluster, topic, 0, [b"a"])
    await wait_converged([cluster.brokers[b] for b in ids], topic, 0, 1)
    async with zk_view(cluster) as zk:
        found = await zk.controller()
        assert found is not None
        old_controller = cluster.brokers[found[0]]
        old_controller.kill()
        # What a DeleteTopics leaves for the controller, written while there is none.
        await zk.zk.create(zk_data.delete_topic_path(topic), makepath=True)

        async def deleted() -> bool:
            return await zk.partition_state(topic, 0) is None

        await eventually(deleted, 60, "the next controller to delete the topic")
        assert await zk.zk.exists(zk_data.delete_topic_path(topic)) is None
    for broker in cluster.brokers.values():
        if broker is not old_controller:
            wait_until(_gone(broker.partition_dir(topic, 0)), 30, "deleted on a live replica")
    old_controller.start()
    await wait_whole(cluster)
    gone = old_controller.partition_dir(topic, 0)
    wait_until(lambda: not gone.exists(), 30, "deleted on the old controller when back")


@pytest.mark.timeout(120)
async def test_a_topic_recreated_while_a_replica_was_down_drops_the_old_log(
    cluster: Cluster,
) -> None:
    """The data-safety point of KIP-516: the replica that was down must not take the deleted
    topic's records for the new topic's (before topic ids it truncated them to the new
    leader's end and kept the rest, and served them once it led)."""
    topic = "recreated-while-down"
    ids = sorted(cluster.brokers)
    leader, down = cluster.brokers[ids[0]], cluster.brokers[ids[-1]]
    await create_topic(cluster, topic, [[leader.broker_id, down.broker_id]])
    await produce(cluster, topic, 0, [f"old-{i}".encode() for i in range(5)])
    await wait_converged([leader, down], topic, 0, 5)
    assert down.stop() == 0

    async with Admin(cluster.live_bootstrap) as admin:
        await admin.delete_topic(topic)
    wait_until(_gone(leader.partition_dir(topic, 0)), 30, "deleted on the live replica")
    async with zk_view(cluster) as zk:
        await eventually(
            lambda: _topic_gone(zk, topic), 30, "the deletion to complete in ZooKeeper"
        )
        # CreateTopics refuses a replica on a broker that is down, so the topic znode is
        # written as Kafka's ZooKeeper-mode admin (AdminZkClient) wrote it, unchecked.
        await zk.zk.run(create_zk_topic(topic, {0: (leader.broker_id, down.broker_id)}, {}))
        await wait_led(cluster, zk, topic, 0, leader.broker_id)
    new = [b"new-0", b"new-1"]
    await produce(cluster, topic, 0, new)

    down.start()
    await wait_whole(cluster)
    async with zk_view(cluster) as zk:
        await wait_isr(cluster, zk, topic, 0, [leader.broker_id, down.broker_id])
        # The replica that was down now leads: a consumer sees only the new records.
        assert leader.stop() == 0
        await wait_led(cluster, zk, topic, 0, down.broker_id)
    assert await read_committed(cluster, topic, 0) == new
    assert "moved aside a log whose topic id is not the topic's" in down.log_text()
    metadata = "partition.metadata"
    stored = (down.partition_dir(topic, 0) / metadata).read_text()
    assert stored == (leader.partition_dir(topic, 0) / metadata).read_text(), "the new id"
    # The old log is not deleted: it is moved aside, with its id, for the operator.
    (stray,) = down.data_dir.glob(f"{topic}-0.*-stray")
    assert (stray / metadata).read_text() != stored
    assert any(path.stat().st_size for path in stray.glob("*.log")), "its records are kept"


async def _topic_gone(zk: ZkView, topic: str) -> bool:
    return await zk.partition_state(topic, 0) is None
