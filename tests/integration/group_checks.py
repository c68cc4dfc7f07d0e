"""Consumer groups at the wire, for integration tests against real brokers: find a group's
coordinator (or names a given broker coordinates), join a member and let it reach its
assignment, read what a group holds (its description and its committed offsets) to show that
a request changed nothing, and a whole round trip to show a coordinator still serves."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import trio

from broker.core.group.coordinator import partition_for
from client.network import BrokerConnection, connect
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.topic_partition import OFFSETS_TOPIC
from tests.integration.cluster_harness import BrokerProcess, Cluster
from tests.integration.fuzz_frames import error_codes

__all__ = [
    "GroupView",
    "Member",
    "codes_of",
    "commit",
    "find_coordinator",
    "group_round_trip",
    "group_view",
    "groups_led_by",
    "join",
    "offsets_leaders",
    "settle",
]

_RETRY_S = 0.2


async def find_coordinator(cluster: Cluster, group: str, timeout_s: float = 60) -> BrokerProcess:
    """The group's coordinator, asking a running broker until one names it (the first ask
    creates __consumer_offsets: COORDINATOR_NOT_AVAILABLE until it has leaders)."""
    broker = cluster.running_brokers()[0]
    conn = await connect(broker.host, broker.port)
    try:
        with trio.fail_after(timeout_s):
            while True:
                answer: FindCoordinatorResponse = await conn.request(
                    FindCoordinatorRequest((group,))
                )
                (found,) = answer.coordinators
                if found.error_code == ErrorCode.NONE:
                    return cluster.brokers[found.node_id]
                assert ErrorCode(found.error_code).retriable, found
                await trio.sleep(_RETRY_S)
    finally:
        await conn.aclose()


@dataclass(frozen=True)
class Member:
    group: str
    member_id: str
    epoch: int
    owned: tuple[TopicPartitions, ...]


async def join(
    conn: BrokerConnection,
    group: str,
    topics: Sequence[str],
    *,
    rebalance_timeout_ms: int = 60_000,
    timeout_s: float = 30,
) -> Member:
    """Join `group` at its coordinator (retrying while it loads the partition) and settle."""
    request = ConsumerGroupHeartbeatRequest(
        group,
        "",
        0,
        rebalance_timeout_ms=rebalance_timeout_ms,
        subscribed_topic_names=tuple(topics),
        topic_partitions=(),
    )
    with trio.fail_after(timeout_s):
        while True:
            answer: ConsumerGroupHeartbeatResponse = await conn.request(request)
            if answer.error_code == ErrorCode.NONE:
                break
            assert answer.error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS, answer
            await trio.sleep(_RETRY_S)
    assert answer.member_id and answer.assignment is not None, answer
    member = Member(group, answer.member_id, answer.member_epoch, ())
    return await settle(conn, replace(member, owned=()), answer.assignment.topic_partitions)


async def settle(
    conn: BrokerConnection,
    member: Member,
    assignment: tuple[TopicPartitions, ...] | None = None,
    *,
    server_assignor: str | None = None,
    timeout_s: float = 30,
) -> Member:
    """Heartbeat (with `server_assignor` the first time, if given) taking what the coordinator
    assigns, until it has nothing more to say: the member owns its target."""
    owned = member.owned if assignment is None else assignment
    assignor = server_assignor
    with trio.fail_after(timeout_s):
        while True:
            answer: ConsumerGroupHeartbeatResponse = await conn.request(
                ConsumerGroupHeartbeatRequest(
                    member.group,
                    member.member_id,
                    member.epoch,
                    server_assignor=assignor,
                    topic_partitions=owned,
                )
            )
            assert answer.error_code == ErrorCode.NONE, answer
            assignor = None
            changed = answer.member_epoch != member.epoch or answer.assignment is not None
            member = replace(member, epoch=answer.member_epoch, owned=owned)
            if answer.assignment is not None:
                owned = answer.assignment.topic_partitions
            elif not changed:
                return member


async def commit(
    conn: BrokerConnection, member: Member, offsets: dict[tuple[str, int], tuple[int, str | None]]
) -> OffsetCommitResponse:
    """Commit `(topic, partition) -> (offset, metadata)` as `member`; every one must succeed."""
    topics: dict[str, list[OffsetCommitPartition]] = {}
    for (topic, partition), (offset, metadata) in offsets.items():
        topics.setdefault(topic, []).append(
            OffsetCommitPartition(partition, offset, committed_metadata=metadata)
        )
    request = OffsetCommitRequest(
        member.group,
        tuple(OffsetCommitTopic(t, tuple(ps)) for t, ps in topics.items()),
        member.epoch,
        member.member_id,
    )
    answer: OffsetCommitResponse = await conn.request(request)
    assert codes_of(answer) == set(), answer
    return answer


@dataclass(frozen=True)
class GroupView:
    """What the coordinator holds of a group."""

    described: DescribedGroup
    offsets: OffsetFetchResponse


async def group_view(conn: BrokerConnection, group: str) -> GroupView:
    described: ConsumerGroupDescribeResponse = await conn.request(
        ConsumerGroupDescribeRequest((group,))
    )
    offsets: OffsetFetchResponse = await conn.request(OffsetFetchRequest(group))
    (one,) = described.groups
    return GroupView(one, offsets)


def codes_of(response: object) -> set[ErrorCode]:
    """Every non-zero error code in a response."""
    return {ErrorCode(code) for code in error_codes(response) if code}


async def offsets_leaders(conn: BrokerConnection) -> tuple[int, ...]:
    """The leader of each __consumer_offsets partition, in this broker's metadata."""
    meta: MetadataResponse = await conn.request(MetadataRequest((OFFSETS_TOPIC,)))
    (topic,) = meta.topics
    assert topic.error_code == ErrorCode.NONE, topic
    return tuple(p.leader_id for p in sorted(topic.partitions, key=lambda p: p.partition_index))


def groups_led_by(
    leaders: Sequence[int], broker_id: int, prefix: str, count: int
) -> tuple[str, ...]:
    """`count` group ids `prefix-N` whose coordinator is `broker_id` (`leaders` as above)."""
    found: list[str] = []
    n = 0
    while len(found) < count:
        assert n < 10_000 * count, f"broker {broker_id} leads no offsets partition: {leaders}"
        name = f"{prefix}-{n}"
        if leaders[partition_for(name, len(leaders))] == broker_id:
            found.append(name)
        n += 1
    return tuple(found)


async def group_round_trip(conn: BrokerConnection, group: str, topic: str) -> None:
    """At `group`'s coordinator: a member joins, gets `topic`'s partitions, commits, reads
    its offset back, leaves; then the group is deleted."""
    member = await join(conn, group, [topic])
    assert [t.topic for t in member.owned] == [topic], member
    await commit(conn, member, {(topic, 0): (1, "round trip")})
    fetched: OffsetFetchResponse = await conn.request(
        OffsetFetchRequest(group, None, member.member_id, member.epoch)
    )
    assert [(t.name, [(p.committed_offset, p.metadata) for p in t.partitions])
            for t in fetched.topics] == [(topic, [(1, "round trip")])], fetched  # fmt: skip
    left: ConsumerGroupHeartbeatResponse = await conn.request(
        ConsumerGroupHeartbeatRequest(group, member.member_id, -1)
    )
    assert left.error_code == ErrorCode.NONE, left
    deleted = await conn.request(DeleteGroupsRequest((group,)))
    assert codes_of(deleted) == set(), deleted
