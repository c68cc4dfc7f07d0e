"""Bad input for the consumer group APIs, at the wire, against a real 3-broker cluster: each
wrong request gets the error docs/protocol.md §5.20-§5.27 gives, and changes nothing (the
group's description and committed offsets stay as they were). The broker never crashes, never
closes the connection the bad requests came on nor another client's, and no handler fails;
after all of it a new member joins, commits and reads its offsets back.

The group under test has one member, settled at epoch 3 (two assignor changes after its
join), which owns the three partitions of TOPIC and committed offsets for two of them and for
OTHER. Sessions last 30 minutes, so it stays a member without heartbeating.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer
from client.network import BrokerConnection, connect
from protocol.errors import ErrorCode
from protocol.messages.api_versions import ApiVersionsRequest
from protocol.messages.consumer_group_describe import ConsumerGroupDescribeRequest
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
)
from protocol.messages.create_topics import CreatableTopic, CreateTopicsRequest
from protocol.messages.delete_groups import DeleteGroupsRequest
from protocol.messages.delete_topics import DeleteTopicsRequest
from protocol.messages.find_coordinator import FindCoordinatorRequest
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitTopic,
)
from protocol.messages.offset_delete import (
    OffsetDeletePartition,
    OffsetDeleteRequest,
    OffsetDeleteTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.records import Record, build_batch
from protocol.topic_partition import OFFSETS_TOPIC
from tests.integration.cluster_harness import BrokerProcess, Cluster
from tests.integration.group_checks import (
    GroupView,
    Member,
    codes_of,
    commit,
    find_coordinator,
    group_view,
    join,
    settle,
)
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    log_end_offset,
    logged_events,
    running_cluster,
    whole_cluster_around,
)

pytestmark = [pytest.mark.integration]

E = ErrorCode
OFFSETS_PARTITIONS: Final = 5
OVERRIDES: Final = {
    **FAST_REPLICATION,
    "offsets.topic.num.partitions": str(OFFSETS_PARTITIONS),
    "group.consumer.session.timeout.ms": "1800000",
}
TOPIC: Final = "groups-in"  # 3 partitions, the group's subscription
OTHER: Final = "groups-other"  # 1 partition, committed to but not subscribed
GROUP: Final = "bad-input-group"
ABSENT_GROUP: Final = "bad-input-no-such-group"
LONG_TIMEOUT_MS: Final = 1_800_000
INT32_MAX: Final = (1 << 31) - 1
INT64_MIN: Final = -(1 << 63)
METADATA_MAX_BYTES: Final = 4096  # offset.metadata.max.bytes
COMMITTED: Final = {(TOPIC, 0): (5, "m0"), (TOPIC, 1): (7, None), (OTHER, 0): (11, "other")}
HANDLER_FAILURES: Final = ("request handler failed", "response could not be encoded")


@dataclass(frozen=True)
class Setup:
    cluster: Cluster
    coordinator: BrokerProcess  # GROUP's
    elsewhere: BrokerProcess  # a broker that is not GROUP's coordinator
    member: Member  # GROUP's one member
    early_create_code: ErrorCode  # CreateTopics of __consumer_offsets before it existed


async def _set_up(cluster: Cluster) -> Setup:
    first = cluster.brokers[1]
    conn = await connect(first.host, first.port)
    try:
        created = await conn.request(
            CreateTopicsRequest((CreatableTopic(OFFSETS_TOPIC, 1, 1),), 5000)
        )
    finally:
        await conn.aclose()
    await create_topic(cluster, TOPIC, [[1], [2], [3]])
    await create_topic(cluster, OTHER, [[2]])
    coordinator = await find_coordinator(cluster, GROUP)
    elsewhere = next(b for b in cluster.brokers.values() if b is not coordinator)
    conn = await connect(coordinator.host, coordinator.port)
    try:
        member = await join(conn, GROUP, [TOPIC], rebalance_timeout_ms=LONG_TIMEOUT_MS)
        for assignor in ("range", "uniform"):  # two new group epochs: the member's is 3
            member = await settle(conn, member, server_assignor=assignor)
        assert member.epoch == 3, member
        # The assignment names the topic by name and (ConsumerGroupHeartbeat v1) by id.
        assert [(t.topic, t.partitions) for t in member.owned] == [(TOPIC, (0, 1, 2))], member
        await commit(conn, member, COMMITTED)
    finally:
        await conn.aclose()
    (result,) = created.topics
    return Setup(cluster, coordinator, elsewhere, member, ErrorCode(result.error_code))


@pytest.fixture(scope="module")
def groups_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("groups"), OVERRIDES) as cluster:
        yield cluster


@pytest.fixture(scope="module")
def setup(groups_cluster: Cluster) -> Setup:
    return trio.run(_set_up, groups_cluster)


@dataclass
class Env:
    """One test's connections: to GROUP's coordinator, to another broker, and a canary per
    broker opened first (another client's connection, which must keep being answered)."""

    setup: Setup
    co: BrokerConnection
    away: BrokerConnection
    canaries: dict[int, BrokerConnection]
    log_marks: dict[int, int]
    before: GroupView
    sent: int = 0
    seen: set[ErrorCode] = field(default_factory=set)

    @property
    def member(self) -> Member:
        return self.setup.member

    async def expect(
        self, body: object, *codes: ErrorCode, to: BrokerConnection | None = None
    ) -> Any:
        """Send `body` (to the coordinator unless `to`); its error codes must be `codes`
        exactly, and GROUP must be as it was."""
        answer = await (to or self.co).request(body)
        assert codes_of(answer) == set(codes), f"{body!r:.300}\n-> {answer!r:.600}"
        self.sent += 1
        self.seen |= set(codes)
        assert await group_view(self.co, GROUP) == self.before, f"after {body!r:.300}"
        return answer

    async def assert_unharmed(self) -> None:
        """Every broker runs and logged no handler failure; every canary is still answered."""
        for broker in self.setup.cluster.brokers.values():
            assert broker.running, f"broker {broker.broker_id} exited"
            since = self.log_marks[broker.broker_id]
            for event in HANDLER_FAILURES:
                assert not logged_events(broker, event, since=since), (broker.broker_id, event)
        for conn in self.canaries.values():
            with trio.fail_after(10):
                await conn.request(ApiVersionsRequest())


@pytest.fixture
def whole(setup: Setup, request: pytest.FixtureRequest) -> Iterator[Setup]:
    """Every broker up before the test; on a failure, what they logged meanwhile."""
    for _ in whole_cluster_around(setup.cluster, request):
        yield setup


@pytest.fixture
async def env(whole: Setup) -> AsyncIterator[Env]:
    setup = whole
    cluster = setup.cluster
    marks = cluster.log_marks()
    canaries = {
        b.broker_id: await connect(b.host, b.port, client_id="canary")
        for b in cluster.brokers.values()
    }
    co = await connect(setup.coordinator.host, setup.coordinator.port)
    away = await connect(setup.elsewhere.host, setup.elsewhere.port)
    try:
        before = await group_view(co, GROUP)
        assert before.described.members[0].member_epoch == setup.member.epoch, before
        yield Env(setup, co, away, canaries, marks, before)
    finally:
        for conn in (co, away, *canaries.values()):
            await conn.aclose()


def _commit(
    partitions: Sequence[tuple[str, int, int, str | None]],
    member_id: str,
    epoch: int,
    group: str = GROUP,
) -> OffsetCommitRequest:
    topics: dict[str, list[OffsetCommitPartition]] = {}
    for topic, index, offset, metadata in partitions:
        topics.setdefault(topic, []).append(
            OffsetCommitPartition(index, offset, committed_metadata=metadata)
        )
    return OffsetCommitRequest(
        group, tuple(OffsetCommitTopic(t, tuple(p)) for t, p in topics.items()), epoch, member_id
    )


def _heartbeat(member_id: str, epoch: int, **fields: Any) -> ConsumerGroupHeartbeatRequest:
    return ConsumerGroupHeartbeatRequest(GROUP, member_id, epoch, **fields)


def _join(**fields: Any) -> ConsumerGroupHeartbeatRequest:
    fields = {
        "rebalance_timeout_ms": 60_000,
        "subscribed_topic_names": (TOPIC,),
        "topic_partitions": (),
        **fields,
    }
    return ConsumerGroupHeartbeatRequest(GROUP, "", 0, **fields)


async def test_offset_commits_that_are_wrong_commit_nothing(env: Env) -> None:
    m = env.member
    mine = (m.member_id, m.epoch)
    for topic, index in [("no-such-topic", 0), (TOPIC, 3), (TOPIC, 99), (TOPIC, -1)]:
        await env.expect(_commit([(topic, index, 1, None)], *mine), E.UNKNOWN_TOPIC_OR_PARTITION)
    for offset in (-1, -2, INT64_MIN):
        await env.expect(_commit([(TOPIC, 0, offset, None)], *mine), E.INVALID_COMMIT_OFFSET_SIZE)
    # The limit counts UTF-8 bytes: 2049 "é" are 4098 bytes.
    for metadata in ("x" * (METADATA_MAX_BYTES + 1), "é" * (METADATA_MAX_BYTES // 2 + 1)):
        body = _commit([(TOPIC, 0, 1, metadata)], *mine)
        await env.expect(body, E.OFFSET_METADATA_TOO_LARGE)
    every = [(TOPIC, 0, 1, None), (TOPIC, 1, 2, None)]
    await env.expect(_commit(every, "nobody", m.epoch), E.UNKNOWN_MEMBER_ID)
    for stale in (m.epoch - 1, m.epoch + 1, 0, -1, INT32_MAX):
        body = _commit(every, m.member_id, stale)
        await env.expect(body, E.STALE_MEMBER_EPOCH)
    # An admin commit (no member id, a negative epoch) while the group has a member.
    await env.expect(_commit(every, "", -1), E.UNKNOWN_MEMBER_ID)
    await env.expect(_commit(every, "", m.epoch), E.UNKNOWN_MEMBER_ID)
    await env.expect(_commit(every, *mine, group=""), E.INVALID_GROUP_ID)
    await env.expect(_commit(every, *mine), E.NOT_COORDINATOR, to=env.away)
    # One request, good and bad partitions: only the good one is committed.
    mixed = [(TOPIC, 0, -1, None), (TOPIC, 2, 42, None), ("no-such-topic", 0, 1, None)]
    answer = await env.co.request(_commit(mixed, *mine))
    codes = [p.error_code for t in answer.topics for p in t.partitions]
    assert codes == [E.INVALID_COMMIT_OFFSET_SIZE, E.NONE, E.UNKNOWN_TOPIC_OR_PARTITION], answer
    fetched = await env.co.request(OffsetFetchRequest(GROUP))
    offsets = {(t.name, p.partition_index): p.committed_offset for t in fetched.topics
               for p in t.partitions}  # fmt: skip
    assert offsets == {(TOPIC, 0): 5, (TOPIC, 1): 7, (TOPIC, 2): 42, (OTHER, 0): 11}
    await commit(env.co, m, {(TOPIC, 2): (42, None)})  # a member's normal commit still works
    print(f"\n{env.sent} wrong commits refused: {sorted(c.name for c in env.seen)}")
    await env.assert_unharmed()


async def test_heartbeats_that_are_wrong_change_no_member(env: Env) -> None:
    m = env.member
    owned = m.owned
    # Its epoch is 3: 1 is stale; 2 (the previous one) without what it owns is refused too.
    for epoch in (1, 2, 4, 1000, INT32_MAX):
        await env.expect(_heartbeat(m.member_id, epoch), E.FENCED_MEMBER_EPOCH)
    await env.expect(_heartbeat(m.member_id, 4, topic_partitions=owned), E.FENCED_MEMBER_EPOCH)
    for epoch in (m.epoch, -1):
        await env.expect(_heartbeat("nobody", epoch), E.UNKNOWN_MEMBER_ID)
    # As Kafka checks them: a static leave (-2) names its instance_id, an epoch above 0 a
    # member_id, and no epoch is below -2.
    await env.expect(_heartbeat("nobody", -2), E.INVALID_REQUEST)
    await env.expect(_heartbeat("", m.epoch), E.INVALID_REQUEST)
    await env.expect(_heartbeat(m.member_id, -3), E.INVALID_REQUEST)
    # Joins that must not make a member.
    await env.expect(_join(subscribed_topic_names=None), E.INVALID_REQUEST)
    await env.expect(_join(topic_partitions=owned), E.INVALID_REQUEST)
    for timeout_ms in (-1, 0):
        await env.expect(_join(rebalance_timeout_ms=timeout_ms), E.INVALID_REQUEST)
    for assignor in ("sticky", "", "Uniform"):
        await env.expect(_join(server_assignor=assignor), E.UNSUPPORTED_ASSIGNOR)
        body = _heartbeat(m.member_id, m.epoch, server_assignor=assignor)
        await env.expect(body, E.UNSUPPORTED_ASSIGNOR)
    # RE2's syntax (Kafka's RE2J): no backreferences or lookaround; at most 1000 characters.
    bad_regexes = ["(", "[a-", "a{2,1}", "x{1001}", r"(a)\1", "(?=x)", "(?<=x)y", "a" * 1001]
    for regex in bad_regexes:
        await env.expect(_join(subscribed_topic_regex=regex), E.INVALID_REQUEST)
        body = _heartbeat(m.member_id, m.epoch, subscribed_topic_regex=regex)
        await env.expect(body, E.INVALID_REQUEST)
    await env.expect(
        ConsumerGroupHeartbeatRequest(
            "", "", 0, rebalance_timeout_ms=60_000, subscribed_topic_names=(TOPIC,)
        ),
        E.INVALID_GROUP_ID,
    )
    await env.expect(_heartbeat(m.member_id, m.epoch), E.NOT_COORDINATOR, to=env.away)
    await env.expect(_join(), E.NOT_COORDINATOR, to=env.away)
    # The member is as it was: its next heartbeat, with its epoch, is answered as usual.
    answer = await env.co.request(_heartbeat(m.member_id, m.epoch, topic_partitions=owned))
    assert (answer.error_code, answer.member_epoch, answer.assignment) == (E.NONE, m.epoch, None)
    print(f"\n{env.sent} wrong heartbeats refused: {sorted(c.name for c in env.seen)}")
    await env.assert_unharmed()


async def test_group_admin_requests_that_are_wrong_delete_nothing(env: Env) -> None:
    await env.expect(DeleteGroupsRequest((GROUP,)), E.NON_EMPTY_GROUP)
    answer = await env.expect(DeleteGroupsRequest((GROUP, GROUP)), E.NON_EMPTY_GROUP)
    assert len(answer.results) == 1, answer
    absent_at = await find_coordinator(env.setup.cluster, ABSENT_GROUP)
    absent = await connect(absent_at.host, absent_at.port)
    try:
        await env.expect(DeleteGroupsRequest((ABSENT_GROUP,)), E.GROUP_ID_NOT_FOUND, to=absent)
        delete = OffsetDeleteRequest(ABSENT_GROUP, (OffsetDeleteTopic(OTHER, (_p(0),)),))
        await env.expect(delete, E.GROUP_ID_NOT_FOUND, to=absent)
        described = await env.expect(
            ConsumerGroupDescribeRequest((ABSENT_GROUP,)), E.GROUP_ID_NOT_FOUND, to=absent
        )
        assert described.groups[0].group_state == "Dead", described
    finally:
        await absent.aclose()
    await env.expect(DeleteGroupsRequest(("",)), E.INVALID_GROUP_ID)
    await env.expect(DeleteGroupsRequest((GROUP,)), E.NOT_COORDINATOR, to=env.away)
    subscribed = OffsetDeleteRequest(GROUP, (OffsetDeleteTopic(TOPIC, (_p(0), _p(1), _p(2))),))
    await env.expect(subscribed, E.GROUP_SUBSCRIBED_TO_TOPIC)
    await env.expect(OffsetDeleteRequest("", ()), E.INVALID_GROUP_ID)
    await env.expect(subscribed, E.NOT_COORDINATOR, to=env.away)
    m = env.member
    await env.expect(OffsetFetchRequest(GROUP, None, "nobody", m.epoch), E.UNKNOWN_MEMBER_ID)
    for stale in (m.epoch - 1, m.epoch + 1):
        body = OffsetFetchRequest(GROUP, None, m.member_id, stale)
        await env.expect(body, E.STALE_MEMBER_EPOCH)
    await env.expect(OffsetFetchRequest(""), E.INVALID_GROUP_ID)
    await env.expect(OffsetFetchRequest(GROUP), E.NOT_COORDINATOR, to=env.away)
    await env.expect(ConsumerGroupDescribeRequest(("",)), E.INVALID_GROUP_ID)
    await env.expect(ConsumerGroupDescribeRequest((GROUP,)), E.NOT_COORDINATOR, to=env.away)
    listed: ListGroupsResponse = await env.expect(ListGroupsRequest(("NoSuchState", "Dead")))
    assert listed.groups == (), listed
    for broker in env.setup.cluster.brokers.values():  # listed by its coordinator only
        conn = env.canaries[broker.broker_id]
        everything: ListGroupsResponse = await conn.request(ListGroupsRequest())
        stable: ListGroupsResponse = await conn.request(ListGroupsRequest(("stable",)))
        mine = broker is env.setup.coordinator
        assert (GROUP in {g.group_id for g in everything.groups}) == mine, everything
        assert (GROUP in {g.group_id for g in stable.groups}) == mine, stable
    # OffsetDelete of a topic no member subscribes to: that offset goes, nothing else.
    other = OffsetDeleteRequest(GROUP, (OffsetDeleteTopic(OTHER, (_p(0),)),))
    answer = await env.co.request(other)
    assert codes_of(answer) == set(), answer
    after = await group_view(env.co, GROUP)
    assert after.described == env.before.described
    assert {t.name for t in after.offsets.topics} == {TOPIC}, after.offsets
    await commit(env.co, m, {(OTHER, 0): COMMITTED[(OTHER, 0)]})  # as it was, for the others
    print(f"\n{env.sent} wrong admin requests refused: {sorted(c.name for c in env.seen)}")
    await env.assert_unharmed()


def _p(index: int) -> OffsetDeletePartition:
    return OffsetDeletePartition(index)


async def test_clients_cannot_write_create_or_delete_the_offsets_topic(env: Env) -> None:
    assert env.setup.early_create_code == E.INVALID_REQUEST
    batch = build_batch([Record(b"forged", key=b"k")], now_ms=1_700_000_000_000)
    ends = {p: await _offsets_log_end(env, p) for p in range(OFFSETS_PARTITIONS)}
    for acks in (1, -1, 0):
        for broker_id, conn in env.canaries.items():
            for p in range(OFFSETS_PARTITIONS):
                data = ProduceTopicData(OFFSETS_TOPIC, (ProducePartitionData(p, batch),))
                produce = ProduceRequest(acks, 1000, (data,))
                if acks == 0:
                    await conn.request(produce, expect_response=False)
                    continue
                answer = await conn.request(produce)
                assert codes_of(answer) == {E.INVALID_TOPIC_EXCEPTION}, (broker_id, answer)
    created = await env.expect(
        CreateTopicsRequest((CreatableTopic(OFFSETS_TOPIC, 1, 1),), 5000),
        E.TOPIC_ALREADY_EXISTS,
    )
    assert created.topics[0].num_partitions == -1, created
    await env.expect(DeleteTopicsRequest((OFFSETS_TOPIC,), 5000), E.INVALID_TOPIC_EXCEPTION)
    meta: MetadataResponse = await env.co.request(MetadataRequest((OFFSETS_TOPIC,)))
    (topic,) = meta.topics
    assert (topic.error_code, len(topic.partitions)) == (E.NONE, OFFSETS_PARTITIONS), topic
    assert {p: await _offsets_log_end(env, p) for p in ends} == ends
    await env.assert_unharmed()


async def _offsets_log_end(env: Env, partition: int) -> tuple[int | None, ...]:
    return tuple(
        [
            await log_end_offset(b, OFFSETS_TOPIC, partition)
            for b in env.setup.cluster.brokers.values()
        ]
    )


async def test_find_coordinator_with_bad_keys_or_key_type(env: Env) -> None:
    for key_type in (1, 2, -1, 127):
        answer = await env.expect(FindCoordinatorRequest((GROUP, ""), key_type), E.INVALID_REQUEST)
        assert len(answer.coordinators) == 2, answer
    answer = await env.expect(FindCoordinatorRequest(("", GROUP, "")), E.INVALID_GROUP_ID)
    found = [(c.key, c.error_code, c.node_id) for c in answer.coordinators]
    coordinator = env.setup.coordinator.broker_id
    assert found == [("", E.INVALID_GROUP_ID, -1), (GROUP, E.NONE, coordinator),
                     ("", E.INVALID_GROUP_ID, -1)], found  # fmt: skip
    answer = await env.expect(FindCoordinatorRequest(()))
    assert answer.coordinators == (), answer
    await env.assert_unharmed()


async def test_after_all_of_it_a_new_member_joins_commits_and_fetches(env: Env) -> None:
    group = "after-bad-input"
    at = await find_coordinator(env.setup.cluster, group)
    conn = await connect(at.host, at.port)
    try:
        member = await join(conn, group, [TOPIC, OTHER])
        assert {t.topic: t.partitions for t in member.owned} == {TOPIC: (0, 1, 2), OTHER: (0,)}
        await commit(conn, member, {(TOPIC, 1): (3, "after"), (OTHER, 0): (4, None)})
        fetched = await conn.request(
            OffsetFetchRequest(group, None, member.member_id, member.epoch)
        )
        offsets = {(t.name, p.partition_index): (p.committed_offset, p.metadata)
                   for t in fetched.topics for p in t.partitions}  # fmt: skip
        assert offsets == {(TOPIC, 1): (3, "after"), (OTHER, 0): (4, None)}, fetched
        left = await conn.request(ConsumerGroupHeartbeatRequest(group, member.member_id, -1))
        assert left.error_code == E.NONE, left
        deleted = await conn.request(DeleteGroupsRequest((group,)))
        assert codes_of(deleted) == set(), deleted
    finally:
        await conn.aclose()
    # The group under test kept its member and its offsets through every test.
    view = await group_view(env.co, GROUP)
    (kept,) = view.described.members
    assert (kept.member_id, kept.member_epoch) == (env.member.member_id, env.member.epoch)
    offsets = {(t.name, p.partition_index): (p.committed_offset, p.metadata)
               for t in view.offsets.topics for p in t.partitions}  # fmt: skip
    offsets.pop((TOPIC, 2), None)  # committed by the commit test, if it ran
    assert offsets == COMMITTED, offsets
    await env.assert_unharmed()
