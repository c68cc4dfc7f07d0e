"""The group coordinator on real brokers, at the wire: acknowledged commits survive the
coordinator being SIGKILLed, then its successor being SIGKILLed while it loads; a fenced
member's late commit is refused; the offsets topic stays bounded under a commit-heavy run
(it is compacted)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio

from broker.core.group.coordinator import partition_for
from client.cli.zookeeper_server import ZooKeeperServer
from client.network import connect
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
)
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse
from protocol.topic_partition import OFFSETS_TOPIC
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    logged_events,
    running_cluster,
    whole_cluster_around,
)

pytestmark = [pytest.mark.integration]

COMMITS = 6000  # about 360 KB of commit records: over five 64 KiB segments
COMMITTERS = 8  # concurrent, one partition each: commits wait for the ISR one at a time

OVERRIDES = {
    **FAST_REPLICATION,
    "offsets.topic.num.partitions": "3",
    "offsets.topic.segment.bytes": str(64 * 1024),
    "log.cleaner.backoff.ms": "100",
    "group.consumer.session.timeout.ms": "3000",
    "group.consumer.heartbeat.interval.ms": "500",
}


@pytest.fixture(scope="module")
def groups_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("groups"), OVERRIDES) as c:
        yield c


@pytest.fixture
def cluster(groups_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    for _ in whole_cluster_around(groups_cluster, request):
        yield groups_cluster


async def coordinator(cluster: Cluster, group: str) -> BrokerProcess:
    """The group's coordinator as a live broker names it (retrying while there is none)."""

    async def found() -> BrokerProcess | None:
        for broker in cluster.running_brokers():
            try:
                conn = await connect(broker.host, broker.port, timeout_ms=2000)
            except OSError:
                continue
            try:
                r: FindCoordinatorResponse = await conn.request(FindCoordinatorRequest((group,)))
            finally:
                await conn.aclose()
            c = r.coordinators[0]
            if c.error_code == ErrorCode.NONE and cluster.brokers[c.node_id].running:
                return cluster.brokers[c.node_id]
        return None

    return await eventually(found, 60, f"a coordinator for {group}")


async def ask(broker: BrokerProcess, request: object) -> object:
    conn = await connect(broker.host, broker.port, timeout_ms=5000)
    try:
        return await conn.request(request, timeout_ms=15_000)
    finally:
        await conn.aclose()


def commit_request(
    group: str, offset: int, member: str = "", epoch: int = -1
) -> OffsetCommitRequest:
    partitions = tuple(OffsetCommitPartition(p, offset + p) for p in range(3))
    return OffsetCommitRequest(group, (OffsetCommitTopic("events", partitions),), epoch, member)


def codes(response: OffsetCommitResponse) -> set[int]:
    return {p.error_code for t in response.topics for p in t.partitions}


async def committed(broker: BrokerProcess, group: str) -> dict[int, int] | None:
    r = await ask(broker, OffsetFetchRequest(group))
    assert isinstance(r, OffsetFetchResponse)
    if r.error_code != ErrorCode.NONE:
        return None
    return {p.partition_index: p.committed_offset for t in r.topics for p in t.partitions}


async def test_acknowledged_commits_survive_two_coordinator_kills(cluster: Cluster) -> None:
    await create_topic(cluster, "events", [[1, 2, 3]] * 3)
    group = "survivor"
    first = await coordinator(cluster, group)
    last_acked = -1
    conn = await connect(first.host, first.port)
    try:
        for offset in range(0, 6000, 3):  # enough records that loading them takes a moment
            response = await conn.request(commit_request(group, offset))
            assert isinstance(response, OffsetCommitResponse)
            assert codes(response) == {ErrorCode.NONE}
            last_acked = offset
    finally:
        await conn.aclose()
    marks = cluster.log_marks()
    first.kill()
    second = await coordinator(cluster, group)
    loaded_before_kill = bool(logged_events(second, "coordinating", since=marks[second.broker_id]))
    second.kill()  # while it loads, if the timing allows
    third = await coordinator(cluster, group)
    expected = {p: last_acked + p for p in range(3)}
    got = await eventually(lambda: committed(third, group), 60, "the third coordinator loaded")
    assert got == expected, f"(second had loaded before its kill: {loaded_before_kill})"
    first.start()
    second.start()


async def test_a_fenced_members_late_commit_is_refused(cluster: Cluster) -> None:
    """A member silent past the session timeout is removed; what it commits afterwards is
    refused and the committed offset stays as it was."""
    await create_topic(cluster, "fenced", [[1, 2, 3]])
    group = "fencing"
    broker = await coordinator(cluster, group)
    join = await ask(
        broker,
        ConsumerGroupHeartbeatRequest(
            group, "", 0, rebalance_timeout_ms=10_000, subscribed_topic_names=("fenced",),
            topic_partitions=(),
        ),
    )  # fmt: skip
    assert isinstance(join, ConsumerGroupHeartbeatResponse) and join.error_code == ErrorCode.NONE
    member, epoch = join.member_id, join.member_epoch
    assert member is not None
    ok = await ask(broker, single_commit(group, 10, member, epoch))
    assert isinstance(ok, OffsetCommitResponse) and codes(ok) == {ErrorCode.NONE}

    async def removed() -> bool:
        described = await ask(broker, ConsumerGroupDescribeRequest((group,)))
        assert isinstance(described, ConsumerGroupDescribeResponse)
        return not described.groups[0].members

    await eventually(removed, 30, "the silent member removed after its session timeout")
    late = await ask(broker, single_commit(group, 99, member, epoch))
    assert isinstance(late, OffsetCommitResponse)
    assert codes(late) == {ErrorCode.UNKNOWN_MEMBER_ID}
    beat = await ask(
        broker, ConsumerGroupHeartbeatRequest(group, member, epoch, topic_partitions=())
    )
    assert isinstance(beat, ConsumerGroupHeartbeatResponse)
    assert beat.error_code == ErrorCode.UNKNOWN_MEMBER_ID
    r = await ask(broker, OffsetFetchRequest(group))
    assert isinstance(r, OffsetFetchResponse)
    assert [(p.partition_index, p.committed_offset) for t in r.topics for p in t.partitions] == [
        (0, 10)
    ]


async def test_the_offsets_topic_stays_bounded_under_many_commits(cluster: Cluster) -> None:
    """Every commit is a record of the compacted offsets topic: the cleaner keeps the
    partition near one record per key, whatever the number of commits."""
    await create_topic(cluster, "busy", [[1, 2, 3]] * COMMITTERS)
    group = "busy-committer"
    broker = await coordinator(cluster, group)
    partition = partition_for(group, 3)

    async def commit_all(p: int) -> None:  # one committer per partition of "busy"
        conn = await connect(broker.host, broker.port)
        try:
            for offset in range(COMMITS // COMMITTERS):
                request = OffsetCommitRequest(
                    group,
                    (OffsetCommitTopic("busy", (OffsetCommitPartition(p, offset),)),),
                )
                response = await conn.request(request)
                assert isinstance(response, OffsetCommitResponse)
                assert codes(response) == {ErrorCode.NONE}
        finally:
            await conn.aclose()

    async with trio.open_nursery() as nursery:
        for p in range(COMMITTERS):
            nursery.start_soon(commit_all, p)
    segment_bytes = 64 * 1024

    def size_on_disk() -> int:
        return sum(p.stat().st_size for p in broker.segments(OFFSETS_TOPIC, partition))

    async def bounded() -> bool:
        return size_on_disk() <= 3 * segment_bytes

    await eventually(bounded, 60, f"the offsets partition cleaned (now {size_on_disk()} bytes)")
    # The bound means something: the commits filled many more segments than are left, and
    # most of their records are gone (only the uncleaned active segment keeps duplicates).
    headers = broker.batch_headers(OFFSETS_TOPIC, partition)
    assert headers[-1].base_offset + headers[-1].last_offset_delta + 1 >= COMMITS
    assert sum(h.record_count for h in headers) < COMMITS / 3
    last = COMMITS // COMMITTERS - 1
    assert await committed(broker, group) == dict.fromkeys(range(COMMITTERS), last)


def single_commit(
    group: str, offset: int, member: str = "", epoch: int = -1, topic: str = "fenced"
) -> OffsetCommitRequest:
    return OffsetCommitRequest(
        group, (OffsetCommitTopic(topic, (OffsetCommitPartition(0, offset),)),), epoch, member
    )
