"""The group coordinator's decisions (broker/core/group), driven through a minimal shell:
joining, incremental handover without double ownership, fencing, commits and their checks,
timeouts, deletion, and state that is exactly the replay of the records written."""

from __future__ import annotations

from broker.core.group.coordinator import java_string_hash, partition_for
from broker.core.group.model import GroupState, Member
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    LEAVE_EPOCH,
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitTopic,
)
from protocol.messages.offset_fetch import OffsetFetchRequest
from protocol.topic_partition import TopicPartition
from tests.unit.group.helpers import Shell, assigned

T = [TopicPartition("t", p) for p in range(6)]


def commit(
    shell: Shell, group: str, offsets: dict[TopicPartition, int], member: str = "", epoch: int = -1
) -> dict[TopicPartition, ErrorCode]:
    topics: dict[str, list[OffsetCommitPartition]] = {}
    for tp, offset in offsets.items():
        topics.setdefault(tp.topic, []).append(OffsetCommitPartition(tp.partition, offset))
    request = OffsetCommitRequest(
        group, tuple(OffsetCommitTopic(t, tuple(ps)) for t, ps in topics.items()), epoch, member
    )
    response = shell.run(shell.core.commit(request, shell.topics, 0))
    return {
        TopicPartition(t.name, p.partition_index): ErrorCode(p.error_code)
        for t in response.topics
        for p in t.partitions
    }


def test_java_hash_places_groups_as_kafka_does() -> None:
    assert java_string_hash("") == 0
    assert java_string_hash("group") == 98629247  # "group".hashCode() in Java
    assert java_string_hash("polygenelubricants") == -(2**31)  # Integer.MIN_VALUE
    assert partition_for("polygenelubricants", 50) == 0  # Utils.abs(MIN_VALUE) is 0


def test_a_lone_member_gets_every_partition() -> None:
    shell = Shell()
    shell.topics["t"] = 6
    joined = shell.heartbeat("g", "", 0)
    assert joined.error_code == ErrorCode.NONE
    assert joined.member_id == "m1" and joined.member_epoch == 1
    assert assigned(joined) == frozenset(T)
    steady = shell.heartbeat("g", "m1", 1, owned=T)
    assert steady.assignment is None and steady.member_epoch == 1
    assert shell.core.groups["g"].state == GroupState.STABLE


def test_a_second_member_gets_partitions_only_after_the_first_let_go() -> None:
    shell = Shell()
    shell.topics["t"] = 6
    shell.heartbeat("g", "", 0)
    shell.heartbeat("g", "m1", 1, owned=T)
    second = shell.heartbeat("g", "", 0)
    assert second.member_id == "m2" and assigned(second) == frozenset()  # m1 still owns all
    first = shell.heartbeat("g", "m1", 1, owned=T)
    kept = assigned(first)
    assert kept is not None and len(kept) == 3 and first.member_epoch == 1  # revoke first
    still_waiting = shell.heartbeat("g", "m2", second.member_epoch, owned=())
    assert not assigned(still_waiting)  # m1 has not confirmed the revocation yet
    confirmed = shell.heartbeat("g", "m1", 1, owned=kept)
    assert confirmed.member_epoch == 2
    got = shell.heartbeat("g", "m2", still_waiting.member_epoch, owned=())
    theirs = assigned(got)
    assert theirs is not None and theirs == frozenset(T) - kept
    assert shell.core.groups["g"].state == GroupState.RECONCILING or got.member_epoch == 2


def test_a_stale_member_is_fenced_and_its_commit_refused() -> None:
    shell = Shell()
    shell.topics["t"] = 6
    shell.heartbeat("g", "", 0)
    assert shell.heartbeat("g", "m1", 7, owned=T).error_code == ErrorCode.FENCED_MEMBER_EPOCH
    assert commit(shell, "g", {T[0]: 5}, "m1", 0)[T[0]] == ErrorCode.STALE_MEMBER_EPOCH
    assert commit(shell, "g", {T[0]: 5}, "nobody", 1)[T[0]] == ErrorCode.UNKNOWN_MEMBER_ID
    assert commit(shell, "g", {T[0]: 5})[T[0]] == ErrorCode.UNKNOWN_MEMBER_ID  # admin: not empty
    assert commit(shell, "g", {T[0]: 5}, "m1", 1)[T[0]] == ErrorCode.NONE


def test_commit_checks_each_partition() -> None:
    shell = Shell()
    shell.topics["t"] = 6
    errors = commit(shell, "g", {T[0]: 5, TopicPartition("t", 9): 1, T[1]: -3})
    assert errors == {
        T[0]: ErrorCode.NONE,
        TopicPartition("t", 9): ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        T[1]: ErrorCode.INVALID_COMMIT_OFFSET_SIZE,
    }
    fetched = shell.core.fetch(OffsetFetchRequest("g"))
    assert [(t.name, p.partition_index, p.committed_offset) for t in fetched.topics
            for p in t.partitions] == [("t", 0, 5)]  # fmt: skip


def test_a_silent_member_is_removed_after_its_session_timeout() -> None:
    shell = Shell()
    shell.topics["t"] = 6
    shell.heartbeat("g", "", 0, now_ms=0)
    assert not [d for d in shell.core.expire(44_999, wall_ms=44_999) if d.records]
    for decision in shell.core.expire(45_000, wall_ms=45_000):
        shell.run(decision)
    group = shell.core.groups["g"]
    assert not group.members and group.state == GroupState.EMPTY
    assert group.empty_since_ms == 45_000


def test_a_leave_that_was_not_written_still_ends_in_the_session_timeout() -> None:
    """A leave whose record is not appended (the write is refused, e.g. NOT_ENOUGH_REPLICAS:
    the member is answered COORDINATOR_NOT_AVAILABLE) changes nothing: the member is still
    in the group, so its session timeout must still remove it. It was kept for ever, holding
    its partitions, when the leave's decision dropped the member's timers before the write."""
    shell = Shell()
    shell.topics["t"] = 6
    joined = shell.heartbeat("g", "", 0, now_ms=0)
    assert joined.member_id is not None
    leave = ConsumerGroupHeartbeatRequest("g", joined.member_id, LEAVE_EPOCH)
    decision = shell.core.heartbeat(leave, shell.topics, 1_000, wall_ms=1_000)
    assert decision.records  # not run: the write failed
    assert joined.member_id in shell.core.groups["g"].members
    assert shell.core.next_deadline_ms() == 45_000
    for expiry in shell.core.expire(45_000, wall_ms=45_000):
        shell.run(expiry)
    assert not shell.core.groups["g"].members
    # Once a leave is written, the member's old deadline finds nothing left to do.
    again = shell.heartbeat("g", "", 0, now_ms=50_000)
    assert again.member_id is not None
    leave = ConsumerGroupHeartbeatRequest("g", again.member_id, LEAVE_EPOCH)
    shell.run(shell.core.heartbeat(leave, shell.topics, 51_000, wall_ms=51_000))
    assert not shell.core.groups["g"].members
    assert not [d for d in shell.core.expire(95_000, wall_ms=95_000) if d.records]
    assert shell.core.next_deadline_ms() is None


def test_sessions_run_on_the_monotonic_clock_and_stored_times_on_the_wall_clock() -> None:
    """The wall clock a day ahead, then a day back: the member's session (45 s on the
    monotonic clock) neither ends early nor lasts longer; the group's stored emptiness
    time is the wall clock's."""
    shell = Shell()
    shell.topics["t"] = 6
    wall_ms, day_ms = 1_800_000_000_000, 86_400_000
    shell.heartbeat("g", "", 0, now_ms=1_000, wall_ms=wall_ms)
    assert not [d for d in shell.core.expire(2_000, wall_ms=wall_ms + day_ms) if d.records]
    assert not [d for d in shell.core.expire(45_999, wall_ms=wall_ms - day_ms) if d.records]
    for decision in shell.core.expire(46_000, wall_ms=wall_ms - day_ms):
        shell.run(decision)
    group = shell.core.groups["g"]
    assert not group.members
    assert group.empty_since_ms == wall_ms - day_ms


def test_offsets_of_an_empty_group_expire_after_the_retention() -> None:
    shell = Shell()
    shell.topics["t"] = 6
    shell.heartbeat("g", "", 0)
    commit(shell, "g", {T[0]: 5}, "m1", 1)
    shell.heartbeat("g", "m1", -1)
    retention = shell.core.settings.offsets_retention_ms
    assert not [d for d in shell.core.expire(retention - 1, wall_ms=retention - 1) if d.records]
    for decision in shell.core.expire(retention, wall_ms=retention):
        shell.run(decision)
    assert "g" not in shell.core.groups and "g" not in shell.core.offsets


def test_only_empty_groups_are_deleted() -> None:
    shell = Shell()
    shell.topics["t"] = 6
    shell.heartbeat("g", "", 0)
    assert shell.run(shell.core.delete_group("g")) == ErrorCode.NON_EMPTY_GROUP
    assert shell.run(shell.core.delete_group("nope")) == ErrorCode.GROUP_ID_NOT_FOUND
    shell.heartbeat("g", "m1", -1)
    assert shell.run(shell.core.delete_group("g")) == ErrorCode.NONE
    assert "g" not in shell.core.groups


def test_the_state_is_the_replay_of_the_records() -> None:
    shell = Shell()
    shell.topics["t"] = 6
    shell.heartbeat("g", "", 0)
    shell.heartbeat("g", "", 0)
    shell.heartbeat("g", "m1", 1, owned=T)
    commit(shell, "g", {T[2]: 9}, "m2", 2)
    commit(shell, "h", {T[3]: 4})
    rebuilt = shell.rebuilt()
    assert rebuilt.groups == shell.core.groups
    assert rebuilt.offsets == shell.core.offsets


def test_not_the_coordinator_until_loaded() -> None:
    shell = Shell()
    p = shell.core.partition_of("g")
    shell.core.unload(p)
    assert shell.heartbeat("g", "", 0).error_code == ErrorCode.NOT_COORDINATOR
    shell.core.begin_load(p)
    assert shell.heartbeat("g", "", 0).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS


def test_regex_subscriptions_are_re2_and_cannot_stall_the_coordinator() -> None:
    """RE2, as Kafka's RE2J: a pattern that backtracks exponentially in Python's `re`
    matches in linear time; a pattern RE2 does not accept is INVALID_REQUEST."""
    shell = Shell()
    shell.topics = {"a" * 200 + "b": 2, "events-1": 1, "__consumer_offsets": 3}
    joined = shell.heartbeat(
        "g", "", 0, subscribed_topic_names=None, subscribed_topic_regex="(a|a)+"
    )
    assert joined.error_code == ErrorCode.NONE
    assert assigned(joined) == frozenset()  # no topic matches the whole name
    regex = shell.heartbeat("h", "", 0, subscribed_topic_names=None, subscribed_topic_regex=".*")
    assert {tp.topic for tp in assigned(regex) or ()} == {"a" * 200 + "b", "events-1"}
    bad = shell.heartbeat("k", "", 0, subscribed_topic_names=None, subscribed_topic_regex="(?<=a)b")
    assert bad.error_code == ErrorCode.INVALID_REQUEST
    assert "RE2" in (bad.error_message or "")


def test_a_regex_resolves_only_over_topics_the_members_principal_may_describe() -> None:
    """Each member's regex resolves with its own principal's DESCRIBE, also when another
    member's heartbeat resolves it again; the principal is kept in the group's record."""
    shell = Shell()
    shell.topics = {"payroll": 2, "public": 1}
    allowed = {"User:admin": {"payroll", "public"}, "User:gina": {"public"}}

    def may_describe(member: Member, topic: str) -> bool:
        return topic in allowed.get(member.principal, set())

    def join(principal: str) -> ConsumerGroupHeartbeatResponse:
        request = ConsumerGroupHeartbeatRequest(
            "g", "", 0, rebalance_timeout_ms=60_000, subscribed_topic_regex=".*",
            topic_partitions=(),
        )  # fmt: skip
        decision = shell.core.heartbeat(
            request, shell.topics, 0, wall_ms=0, principal=principal, may_describe=may_describe
        )
        return shell.run(decision)

    gina = join("User:gina")
    assert {tp.topic for tp in assigned(gina) or ()} == {"public"}
    join("User:admin")
    group = shell.core.groups["g"]
    assert dict(group.subscription_metadata) == {"payroll": 2, "public": 1}
    targets = {m.principal: {tp.topic for tp in group.target[m.member_id]}
               for m in group.members.values()}  # fmt: skip
    assert targets["User:gina"] <= {"public"} and targets["User:admin"] <= {"payroll", "public"}
    assert {tp.topic for a in group.target.values() for tp in a} == {"payroll", "public"}
    rebuilt = shell.rebuilt().groups["g"]
    assert {m.principal for m in rebuilt.members.values()} == {"User:gina", "User:admin"}


def test_offset_fetch_sees_a_commit_once_it_is_committed_and_never_an_older_one() -> None:
    """OffsetFetch answers from the commits below the offsets topic's HW (Kafka's pending vs
    committed offset commits): a commit still waiting for its followers is not shown (its
    coordinator may fail before it is), and of two writes that finish in either order the
    later record wins."""
    shell = Shell()
    shell.topics["t"] = 6

    def appended(offset: int) -> list[tuple[bytes, bytes | None]]:
        request = OffsetCommitRequest(
            "g", (OffsetCommitTopic("t", (OffsetCommitPartition(0, offset),)),)
        )
        decision = shell.core.commit(request, shell.topics, 0)
        for key, value in decision.records:
            shell.core.replay(key, value, committed=False)
        return list(decision.records)

    def fetched() -> list[int]:
        response = shell.core.fetch(OffsetFetchRequest("g"))
        return [p.committed_offset for t in response.topics for p in t.partitions]

    first, second = appended(1805), appended(1806)  # at log offsets 10 and 11
    assert fetched() == []
    shell.core.records_committed(second, 11)
    assert fetched() == [1806]
    shell.core.records_committed(first, 10)  # its task resumed last
    assert fetched() == [1806]
    assert shell.core.offsets["g"][T[0]].offset == 1806


def test_a_load_that_failed_answers_not_coordinator_unless_leadership_moved_on() -> None:
    shell = Shell()
    p = shell.core.partition_of("g")
    shell.core.leader_epochs[p] = 4
    older = shell.core.begin_load(p)
    newer = shell.core.begin_load(p)
    shell.core.load_failed(p, older)  # an older load's failure: the newer one goes on
    assert shell.heartbeat("g", "", 0).error_code == ErrorCode.COORDINATOR_LOAD_IN_PROGRESS
    shell.core.load_failed(p, newer)
    assert p not in shell.core.leader_epochs
    assert shell.heartbeat("g", "", 0).error_code == ErrorCode.NOT_COORDINATOR


def _join(shell: Shell, group: str, *, classic: bool) -> str:
    request = ConsumerGroupHeartbeatRequest(
        group,
        "",
        0,
        rebalance_timeout_ms=60_000,
        subscribed_topic_names=("t",),
        topic_partitions=(),
    )
    return (
        shell.run(
            shell.core.heartbeat(request, shell.topics, 0, wall_ms=0, classic=classic)
        ).member_id
        or ""
    )


def _leave(shell: Shell, group: str, member_id: str) -> None:
    shell.run(
        shell.core.heartbeat(ConsumerGroupHeartbeatRequest(group, member_id, -1), {}, 0, wall_ms=0)
    )


def test_a_group_is_classic_while_every_member_joined_by_join_group_and_stays_so_once_empty() -> (
    None
):
    """Kafka 4.0's group types: a group of JoinGroup members is a classic group, even once
    empty (described with no epochs, so the Kafka listener calls it no consumer group); a
    consumer-protocol member makes it a consumer group, which it stays once empty."""
    shell = Shell()
    classic = _join(shell, "c", classic=True)
    assert shell.core.groups["c"].classic
    _leave(shell, "c", classic)
    assert shell.core.describe("c").group_epoch == -1  # emptied classic: no epochs
    assert shell.rebuilt().groups["c"].classic  # in the group record too
    consumer = _join(shell, "k", classic=False)
    joined = _join(shell, "k", classic=True)
    assert not shell.core.groups["k"].classic
    _leave(shell, "k", consumer)
    assert shell.core.groups["k"].classic  # the last consumer-protocol member left
    _leave(shell, "k", joined)
    only_consumer = _join(shell, "u", classic=False)
    _leave(shell, "u", only_consumer)
    described = shell.core.describe("u")
    assert (described.group_state, described.group_epoch > 0) == ("Empty", True)
