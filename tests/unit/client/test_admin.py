"""Admin against the fake cluster: topics lifecycle, errors, describe with HW/LEO, cluster."""

from __future__ import annotations

import pytest
import trio

from client.admin import Admin
from client.admin_describe import DESCRIBE_STRAGGLER_MS
from client.errors import HighwaterClientError, UnknownTopicError
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.create_topics import CreateTopicsRequest
from protocol.messages.list_offsets import ListOffsetsRequest
from tests.unit.client.fake_broker import FakeCluster


async def test_create_list_describe_delete(cluster3: FakeCluster) -> None:
    async with Admin(cluster3.bootstrap) as admin:
        await admin.create_topic("orders", 3, 1, {"retention.ms": "1000"})
        await admin.create_topic("audit", 1)
        assert await admin.list_topics() == ["audit", "orders"]
        request = next(b for _, b in cluster3.requests if isinstance(b, CreateTopicsRequest))
        assert request.topics[0].configs[0].name == "retention.ms"

        part = cluster3.topics["orders"][1]
        part.log_end_offset = 10
        part.high_watermark = 7
        (orders,) = await admin.describe_topics(["orders"])
        assert orders.name == "orders"
        assert [p.partition for p in orders.partitions] == [0, 1, 2]
        p1 = orders.partitions[1]
        assert (p1.leader, p1.leader_epoch, p1.replicas, p1.isr) == (2, 0, (2,), (2,))
        assert (p1.high_watermark, p1.log_end_offset) == (7, 10)
        assert p1.replica_log_end_offsets == {2: 10}
        assert (orders.partitions[0].high_watermark, orders.partitions[0].log_end_offset) == (0, 0)
        assert [t.name for t in await admin.describe_topics()] == ["audit", "orders"]

        await admin.delete_topic("audit")
        assert await admin.list_topics() == ["orders"]


async def test_errors_carry_kafka_names(cluster: FakeCluster) -> None:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic("t", 1, 1)
        with pytest.raises(HighwaterClientError) as info:
            await admin.create_topic("t", 1, 1)
        assert info.value.code is ErrorCode.TOPIC_ALREADY_EXISTS
        assert str(info.value).startswith("TOPIC_ALREADY_EXISTS")
        with pytest.raises(HighwaterClientError) as info:
            await admin.create_topic("u", 1, 3)
        assert info.value.code is ErrorCode.INVALID_REPLICATION_FACTOR
        with pytest.raises(UnknownTopicError):
            await admin.delete_topic("nope")
        with pytest.raises(UnknownTopicError):
            await admin.describe_topics(["nope"])


async def test_validate_only_creates_nothing(cluster: FakeCluster) -> None:
    async with Admin(cluster.bootstrap) as admin:
        await admin.create_topic("t", 2, 1, validate_only=True)
        assert await admin.list_topics() == []


async def test_describe_cluster(cluster3: FakeCluster) -> None:
    cluster3.controller_epoch = 7
    async with Admin(cluster3.bootstrap) as admin:
        description = await admin.describe_cluster()
    assert description.controller_id == 1
    assert description.controller_epoch == 7
    assert description.cluster_id == "fake-cluster"
    assert [(b.node_id, b.port) for b in description.brokers] == [
        (b, cluster3.ports[b]) for b in (1, 2, 3)
    ]


async def test_offline_partition_has_no_offsets(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 1, leaders=[-1])
    async with Admin(cluster.bootstrap) as admin:
        (topic,) = await admin.describe_topics(["t"])
    (p,) = topic.partitions
    assert (p.leader, p.high_watermark, p.log_end_offset) == (-1, None, None)


async def test_describe_shows_each_replicas_log_end_offset(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 2, leaders=[1, 2], replication_factor=3)
    p0 = cluster3.topics["t"][0]
    p0.log_end_offset = 10
    p0.high_watermark = 6
    p0.isr = (1, 2)
    p0.replica_log_end_offsets = {2: 8, 3: 6}  # broker 3 lags behind, out of the ISR
    p0.leader_epoch = 4
    async with Admin(cluster3.bootstrap) as admin:
        (topic,) = await admin.describe_topics(["t"])
    first, second = topic.partitions
    assert (first.leader, first.leader_epoch) == (1, 4)
    assert (first.replicas, first.isr) == ((1, 2, 3), (1, 2))
    assert (first.high_watermark, first.log_end_offset) == (6, 10)
    assert first.replica_log_end_offsets == {1: 10, 2: 8, 3: 6}
    assert list(first.replica_log_end_offsets) == [1, 2, 3]  # replica order
    assert second.replicas == (2, 3, 1)
    assert second.replica_log_end_offsets == {2: 0, 3: 0, 1: 0}
    # The LEOs came from each replica's own broker with the debug id; the HW from the leader.
    asked = {
        (broker, body.replica_id)
        for broker, body in cluster3.requests
        if isinstance(body, ListOffsetsRequest)
    }
    assert asked == {(1, -1), (2, -1), (1, -2), (2, -2), (3, -2)}


async def test_describe_offline_or_silent_replicas_show_no_offset(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 1, leaders=[1], replication_factor=3)
    cluster3.topics["t"][0].log_end_offset = 4
    cluster3.topics["t"][0].offline_replicas = (3,)
    cluster3.down.add(3)  # gone from the metadata's brokers
    cluster3.stalled.add((2, ApiKey.LIST_OFFSETS))  # alive but never answers
    async with Admin(cluster3.bootstrap) as admin:
        start = trio.current_time()
        (topic,) = await admin.describe_topics(["t"], offsets_timeout_ms=300)
        elapsed = trio.current_time() - start
    (p,) = topic.partitions
    assert p.offline_replicas == (3,)
    assert p.replica_log_end_offsets == {1: 4, 2: None, 3: None}
    assert (p.high_watermark, p.log_end_offset) == (4, 4)
    assert elapsed < 5  # bounded by offsets_timeout_ms, not the request timeout
    assert not any(b == 3 for b, _ in cluster3.requests)


async def test_describe_waits_for_a_hung_replica_only_briefly_after_the_others(
    cluster3: FakeCluster,
) -> None:
    """A broker that reads requests and never answers (stopped, its ZooKeeper session not yet
    expired, so still in the metadata) costs DESCRIBE_STRAGGLER_MS after the others' answers,
    not the whole offsets_timeout_ms; it shows as unknown and is asked last afterwards."""
    cluster3.create_topic("t", 1, leaders=[1], replication_factor=3)
    cluster3.topics["t"][0].log_end_offset = 4
    cluster3.stalled.add((2, ApiKey.LIST_OFFSETS))
    async with Admin(cluster3.bootstrap) as admin:
        start = trio.current_time()
        (topic,) = await admin.describe_topics(["t"], offsets_timeout_ms=20_000)
        elapsed = trio.current_time() - start
        hung = admin.metadata.brokers[2]
        assert admin.metadata._refresh_candidates()[-1] == (hung.host, hung.port)
    (p,) = topic.partitions
    assert p.replica_log_end_offsets == {1: 4, 2: None, 3: 4}
    assert (p.high_watermark, p.log_end_offset) == (4, 4)
    assert DESCRIBE_STRAGGLER_MS / 1000 <= elapsed < DESCRIBE_STRAGGLER_MS / 1000 + 3, elapsed


async def test_unreachable_bootstrap_fails_fast() -> None:
    async with Admin("127.0.0.1:1", request_timeout_ms=1000) as admin:
        with pytest.raises(HighwaterClientError):
            await admin.list_topics()
