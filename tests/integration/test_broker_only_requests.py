"""Requests meant for brokers only, from anyone else, without an authorizer: the controller's
(LeaderAndIsr, StopReplica, UpdateMetadata) are taken only from the controller ZooKeeper names,
at the epoch ZooKeeper has, and only on the control-plane listener (KIP-291, else the
inter-broker one); a follower's fetch only on the inter-broker listener. Each refusal is
checked for what it did not change, and the real controller and followers for going on."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from client.cli.zookeeper_server import ZooKeeperServer
from client.network import BrokerConnection, connect
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from protocol.messages.update_metadata import UpdateMetadataRequest
from tests.integration.cluster_harness import Cluster, eventually
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    high_watermark,
    log_end_offset,
    partition_metadata,
    prepare_cluster,
    produce,
    read_committed,
    wait_isr,
    wait_whole,
    zk_view,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

INT32_MAX = 2**31 - 1
DELETE = -2  # StopReplica's leader epoch: delete whatever the epoch


def _started(cluster: Cluster) -> Iterator[Cluster]:
    cluster.start()
    try:
        prepare_cluster(cluster, timeout_s=60)
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


@pytest.fixture
def one_broker(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    """The default configuration: one PLAINTEXT listener, no authorizer."""
    yield from _started(Cluster(zookeeper.port, tmp_path, 1, dict(FAST_REPLICATION)))


@pytest.fixture
def two_listeners(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    """INTERNAL (inter-broker) and CLIENT, both PLAINTEXT, no authorizer; a follower stays in
    the ISR through a short stall."""
    overrides = {**FAST_REPLICATION, "replica.lag.time.max.ms": "30000"}
    listeners = {"INTERNAL": "PLAINTEXT", "CLIENT": "PLAINTEXT"}
    yield from _started(Cluster(zookeeper.port, tmp_path, 2, overrides, listeners=listeners))


@pytest.fixture
def control_plane(zookeeper: ZooKeeperServer, tmp_path: Path) -> Iterator[Cluster]:
    """INTERNAL (inter-broker), CONTROL (control.plane.listener.name) and CLIENT."""
    overrides = {**FAST_REPLICATION, "control.plane.listener.name": "CONTROL"}
    listeners = {"INTERNAL": "PLAINTEXT", "CONTROL": "PLAINTEXT", "CLIENT": "PLAINTEXT"}
    yield from _started(Cluster(zookeeper.port, tmp_path, 2, overrides, listeners=listeners))


async def _controller(cluster: Cluster) -> tuple[int, int]:
    async with zk_view(cluster) as zk:
        found = await zk.controller()
    assert found is not None, "a controller is elected"
    return found


def _stop_and_delete(controller_id: int, epoch: int, topic: str) -> StopReplicaRequest:
    delete = StopReplicaTopicState(topic, (StopReplicaPartitionState(0, DELETE, True),))
    return StopReplicaRequest(controller_id, epoch, -1, (delete,))


async def _request(port: int, body: object) -> object:
    conn = await connect("127.0.0.1", port)
    try:
        return await conn.request(body)
    finally:
        await conn.aclose()


async def test_a_controller_epoch_above_zookeepers_is_refused_and_the_controller_goes_on(
    one_broker: Cluster,
) -> None:
    """The security review's probe: one anonymous StopReplica(delete) with controller epoch
    2^31-1 deleted the partition and left the broker refusing the real controller until
    restart. Now it, and one at ZooKeeper's epoch claiming another controller id, are refused
    with STALE_CONTROLLER_EPOCH; the partition keeps its records, and a topic created after is
    led (the controller's requests are still taken)."""
    cluster = one_broker
    broker = cluster.brokers[1]
    await create_topic(cluster, "kept", [[1]])
    await produce(cluster, "kept", 0, [b"a", b"b", b"c"])
    controller_id, epoch = await _controller(cluster)
    for forged in (
        _stop_and_delete(controller_id, INT32_MAX, "kept"),
        _stop_and_delete(controller_id + 7, epoch, "kept"),
        _stop_and_delete(controller_id + 7, epoch + 1, "kept"),
    ):
        answer = await _request(broker.port, forged)
        code = getattr(answer, "error_code", None)
        assert code == ErrorCode.STALE_CONTROLLER_EPOCH, (forged, answer)
    assert broker.partition_dir("kept", 0).is_dir()
    assert await read_committed(cluster, "kept", 0) == [b"a", b"b", b"c"]
    await create_topic(cluster, "after", [[1]], timeout_s=20)
    assert await produce(cluster, "after", 0, [b"x"]) == [0]
    assert "controller request refused" in broker.log_text()


async def test_controller_requests_only_on_the_control_plane_listener(
    control_plane: Cluster,
) -> None:
    """With control.plane.listener.name=CONTROL the controller reaches brokers there (topics
    get leaders, a broker restarts by controlled shutdown); a LeaderAndIsr, StopReplica or
    UpdateMetadata with the real controller's id and epoch on INTERNAL or CLIENT is refused
    (CLUSTER_AUTHORIZATION_FAILED) and changes nothing."""
    cluster = control_plane
    await create_topic(cluster, "planes", [[1, 2]], {"min.insync.replicas": "2"})
    async with zk_view(cluster) as zk:
        await wait_isr(cluster, zk, "planes", 0, [1, 2], leader=1)
    await produce(cluster, "planes", 0, [b"a", b"b"])
    controller_id, epoch = await _controller(cluster)
    leader = cluster.brokers[1]
    takeover = LeaderAndIsrPartitionState("planes", 0, epoch, 2, 99, (2,), 99, (1, 2))
    forged: list[object] = [
        LeaderAndIsrRequest(controller_id, epoch, -1, (takeover,), ()),
        _stop_and_delete(controller_id, epoch, "planes"),
        UpdateMetadataRequest(controller_id, epoch, -1, (), (), ("planes",)),
    ]
    for listener in ("INTERNAL", "CLIENT"):
        for body in forged:
            answer = await _request(leader.port_of(listener), body)
            code = getattr(answer, "error_code", None)
            assert code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED, (listener, body, answer)
    assert leader.partition_dir("planes", 0).is_dir()
    found = await partition_metadata(leader, "planes", 0)
    assert found is not None and found.leader_id == 1
    assert await read_committed(cluster, "planes", 0) == [b"a", b"b"]
    # The controlled shutdown goes to the controller's CONTROL listener, and the controller's
    # requests to the restarted broker to its own.
    other = cluster.brokers[2 if controller_id == 1 else 1]
    other.restart()
    await wait_whole(cluster)
    async with zk_view(cluster) as zk:
        await wait_isr(cluster, zk, "planes", 0, [1, 2], timeout_s=60)
    assert "controlled shutdown accepted" in other.log_text()
    assert "controlled shutdown failed" not in other.log_text()
    await create_topic(cluster, "planes-after", [[2, 1]])
    assert await produce(cluster, "planes-after", 0, [b"x"]) == [0]


async def test_a_follower_fetch_only_on_the_inter_broker_listener(
    two_listeners: Cluster,
) -> None:
    """The follower (in the ISR) stalls, so acks=1 records leave the HW behind; a fetch on
    CLIENT claiming to be that follower at the leader's LEO is refused (no HW move), and so
    is nothing learnt from a fetch on INTERNAL by a broker id that is not a replica. After
    the stall the real follower moves the HW."""
    cluster = two_listeners
    await create_topic(cluster, "spoofed", [[1, 2]])
    async with zk_view(cluster) as zk:
        await wait_isr(cluster, zk, "spoofed", 0, [1, 2], leader=1)
    leader, follower = cluster.brokers[1], cluster.brokers[2]
    follower.pause()
    try:
        await produce(cluster, "spoofed", 0, [b"a", b"b", b"c"], acks=1)
        end = await log_end_offset(leader, "spoofed", 0)
        assert end == 3
        assert await high_watermark(leader, "spoofed", 0) == 0

        async def follower_fetch(conn: BrokerConnection, replica_id: int) -> FetchResponse:
            wanted = (FetchTopic("spoofed", (FetchPartition(0, 3, 1 << 20),)),)
            response: FetchResponse = await conn.request(
                FetchRequest(replica_id, 0, 1, 1 << 20, wanted)
            )
            return response

        client = await connect("127.0.0.1", leader.port_of("CLIENT"))
        internal = await connect("127.0.0.1", leader.port_of("INTERNAL"))
        try:
            spoofed = await follower_fetch(client, 2)
            assert await high_watermark(leader, "spoofed", 0) == 0
            code = spoofed.responses[0].partitions[0].error_code
            assert code == ErrorCode.TOPIC_AUTHORIZATION_FAILED, spoofed
            stranger = await follower_fetch(internal, 99)
            assert stranger.responses[0].partitions[0].records == b""
            assert await high_watermark(leader, "spoofed", 0) == 0
        finally:
            await client.aclose()
            await internal.aclose()
        assert "follower fetch refused" in leader.log_text()
    finally:
        follower.resume()

    async def committed() -> bool:
        return await high_watermark(leader, "spoofed", 0) == 3

    await eventually(committed, 30, "the real follower to move the HW")
