"""Admin's consumer-group operations against the fake cluster's fake coordinator."""

from __future__ import annotations

import pytest
import trio

from client.admin import Admin
from client.consumer import Consumer
from client.errors import CommitFailedError, HighwaterClientError
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.offset_commit import OffsetCommitRequest
from protocol.topic_partition import TopicPartition
from tests.unit.client.fake_broker import FakeCluster
from tests.unit.client.test_consumer import fill


def committed(cluster: FakeCluster, group: str, offsets: dict[tuple[str, int], int]) -> None:
    cluster.coordinator.commit_as_admin(
        group,
        {
            TopicPartition(topic, partition): offset
            for (topic, partition), offset in offsets.items()
        },
    )


async def joined(cluster: FakeCluster, consumer: Consumer, topics: list[str]) -> None:
    consumer.subscribe(topics)
    with trio.fail_after(10):
        while not consumer.assignment():
            await consumer.poll(timeout_ms=20)


async def test_list_groups_asks_every_broker(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 1)
    cluster3.coordinator.coordinator_id = 2
    committed(cluster3, "b-group", {("t", 0): 1})
    committed(cluster3, "a-group", {("t", 0): 1})
    cluster3.fail_next(ApiKey.LIST_GROUPS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS)
    async with Admin(cluster3.bootstrap) as admin:
        listed = await admin.list_groups()
    assert [(g.group_id, g.state, g.coordinator_id) for g in listed.groups] == [
        ("a-group", "Empty", 2),
        ("b-group", "Empty", 2),
    ]
    assert listed.errors == {}


async def test_describe_a_group_with_its_members_and_an_unknown_one(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 2)
    async with (
        Consumer(cluster.bootstrap, group_id="g", client_id="app") as member,
        Admin(cluster.bootstrap) as admin,
    ):
        await joined(cluster, member, ["t"])
        group, unknown = await admin.describe_groups(["g", "nope"])
    assert (group.group_id, group.state, group.assignor) == ("g", "Stable", "uniform")
    assert group.coordinator is not None and group.coordinator.node_id == 1
    (m,) = group.members
    assert (m.client_id, m.subscribed_topics) == ("app", ("t",))
    assert m.assignment == m.target_assignment == (TopicPartition("t", 0), TopicPartition("t", 1))
    assert not unknown.exists and unknown.state == "Dead" and unknown.members == ()


async def test_list_group_offsets_with_lag(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 2)
    fill(cluster, "t", 0, 1, 10)
    fill(cluster, "t", 1, 1, 4)
    committed(cluster, "g", {("t", 0): 7})
    async with Admin(cluster.bootstrap) as admin:
        every = await admin.list_group_offsets("g")
        some = await admin.list_group_offsets("g", [("t", 0), ("t", 1)])
    assert [(o.topic, o.partition, o.committed_offset, o.high_watermark, o.lag) for o in every] == [
        ("t", 0, 7, 10, 3)
    ]
    assert [(o.partition, o.committed_offset, o.high_watermark, o.lag) for o in some] == [
        (0, 7, 10, 3),
        (1, None, 4, None),
    ]


async def test_alter_offsets_only_while_the_group_is_empty(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 1)
    async with Admin(cluster.bootstrap) as admin:
        await admin.alter_group_offsets("g", {("t", 0): 5})
        assert cluster.coordinator.committed("g")[TopicPartition("t", 0)] == 5
        request = next(b for _, b in cluster.requests if isinstance(b, OffsetCommitRequest))
        assert (request.member_id, request.member_epoch) == ("", -1)
        with pytest.raises(HighwaterClientError) as unknown:
            await admin.alter_group_offsets("g", {("nope", 0): 1})
        assert unknown.value.code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        async with Consumer(cluster.bootstrap, group_id="g") as member:
            await joined(cluster, member, ["t"])
            with pytest.raises(CommitFailedError, match="active members"):
                await admin.alter_group_offsets("g", {("t", 0): 1})


async def test_delete_groups_and_offsets(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 2)
    cluster3.create_topic("u", 1)
    committed(cluster3, "empty", {("t", 0): 1})
    committed(cluster3, "busy", {("t", 0): 1, ("u", 0): 2})
    cluster3.coordinator.coordinator_id = 3
    async with (
        Consumer(cluster3.bootstrap, group_id="busy") as member,
        Admin(cluster3.bootstrap) as admin,
    ):
        await joined(cluster3, member, ["t"])
        results = await admin.delete_groups(["empty", "busy", "never"])
        assert results == {
            "empty": ErrorCode.NONE,
            "busy": ErrorCode.NON_EMPTY_GROUP,
            "never": ErrorCode.GROUP_ID_NOT_FOUND,
        }
        deleted = await admin.delete_group_offsets("busy", [("t", 0), ("u", 0)])
        assert deleted == {
            TopicPartition("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC,
            TopicPartition("u", 0): ErrorCode.NONE,
        }
        with pytest.raises(HighwaterClientError) as missing:
            await admin.delete_group_offsets("never", [("t", 0)])
        assert missing.value.code == ErrorCode.GROUP_ID_NOT_FOUND
    assert not cluster3.coordinator.exists("empty")
    assert TopicPartition("u", 0) not in cluster3.coordinator.committed("busy")


async def test_a_moved_coordinator_is_looked_up_again(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 1)
    committed(cluster3, "g", {("t", 0): 3})
    cluster3.fail_next(ApiKey.OFFSET_FETCH, ErrorCode.NOT_COORDINATOR)
    async with Admin(cluster3.bootstrap) as admin:
        (offset,) = await admin.list_group_offsets("g")
    assert offset.committed_offset == 3
    assert cluster3.count(FindCoordinatorRequest) == 2
