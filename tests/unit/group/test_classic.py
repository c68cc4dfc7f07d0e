"""Classic members in a KIP-848 group (broker/core/group/classic.py): the heartbeat a
JoinGroup stands for, when a Heartbeat must say REBALANCE_IN_PROGRESS, the error names."""

from __future__ import annotations

from dataclasses import replace

from broker.core.group.classic import (
    ClassicJoin,
    classic_heartbeat_answer,
    classic_member,
    forget_synced,
    heartbeat_error,
    join_heartbeat,
    join_refusal,
    keep_alive_heartbeat,
    leave_heartbeat,
    needs_rejoin,
    server_assignor,
    sync_group,
)
from broker.core.group.model import Group, Member, MemberState
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import TopicPartitions
from protocol.topic_partition import TopicPartition

JOIN = ClassicJoin(
    group_id="g",
    member_id="",
    instance_id=None,
    rebalance_timeout_ms=300_000,
    protocol_names=("cooperative-sticky", "range"),
    topics=("b", "a", "a"),
    owned=(TopicPartition("a", 1), TopicPartition("a", 0), TopicPartition("b", 2)),
    client_id="rdkafka",
)


def test_a_new_member_joins_at_epoch_zero_owning_nothing() -> None:
    request = join_heartbeat(JOIN, None)
    assert (request.member_id, request.member_epoch, request.topic_partitions) == ("", 0, ())
    assert request.subscribed_topic_names == ("a", "b")
    assert request.server_assignor == "uniform"
    assert request.client_id == "rdkafka"


def test_a_known_member_rejoins_at_its_epoch_reporting_what_it_owns() -> None:
    known = Member("m1", member_epoch=7)
    request = join_heartbeat(replace(JOIN, member_id="m1"), known)
    assert (request.member_id, request.member_epoch) == ("m1", 7)
    assert request.topic_partitions == (
        TopicPartitions("a", (0, 1)),
        TopicPartitions("b", (2,)),
    )


def test_a_static_member_back_joins_again_under_its_id() -> None:
    gone = Member("m1", member_epoch=7, instance_id="i1", left_static=True)
    request = join_heartbeat(replace(JOIN, instance_id="i1"), gone)
    assert (request.member_id, request.member_epoch, request.topic_partitions) == ("m1", 0, ())


def test_range_asks_for_the_range_assignor_and_everything_else_for_uniform() -> None:
    assert server_assignor(("range", "roundrobin")) == "range"
    assert server_assignor(("roundrobin",)) == server_assignor(()) == "uniform"


def test_a_member_rejoins_when_its_assignment_is_not_the_one_it_was_given() -> None:
    assigned = frozenset({TopicPartition("a", 0)})
    stable = Member("m1", member_epoch=5, assigned=assigned)
    assert not needs_rejoin(stable, 5, assigned)
    assert needs_rejoin(stable, 4, assigned)  # its generation is behind
    assert needs_rejoin(stable, 5, None)  # never synced here (a new coordinator)
    assert needs_rejoin(stable, 5, frozenset())  # got more since
    assert needs_rejoin(replace(stable, state=MemberState.UNREVOKED_PARTITIONS), 5, assigned)
    assert needs_rejoin(replace(stable, state=MemberState.UNRELEASED_PARTITIONS), 5, assigned)


def test_leaving_is_epoch_minus_one_or_minus_two_for_a_static_member() -> None:
    assert leave_heartbeat("g", Member("m1", 3)).member_epoch == -1
    assert leave_heartbeat("g", Member("m1", 3, instance_id="i")).member_epoch == -2


def test_a_stale_epoch_is_an_illegal_generation_to_a_classic_member() -> None:
    assert heartbeat_error(ErrorCode.FENCED_MEMBER_EPOCH) == ErrorCode.ILLEGAL_GENERATION
    assert heartbeat_error(ErrorCode.STALE_MEMBER_EPOCH) == ErrorCode.ILLEGAL_GENERATION
    assert heartbeat_error(ErrorCode.UNKNOWN_MEMBER_ID) == ErrorCode.UNKNOWN_MEMBER_ID


def test_sync_group_gives_the_current_assignment_and_remembers_it() -> None:
    owned = frozenset({TopicPartition("a", 0)})
    member = Member("m1", member_epoch=4, assigned=owned)
    synced: dict[tuple[str, str], frozenset[TopicPartition]] = {}
    assert sync_group(synced, "g", member, 3) == (ErrorCode.ILLEGAL_GENERATION, frozenset())
    assert sync_group(synced, "g", None, 4) == (ErrorCode.UNKNOWN_MEMBER_ID, frozenset())
    assert synced == {}
    assert sync_group(synced, "g", member, 4) == (ErrorCode.NONE, owned)
    assert synced == {("g", "m1"): owned}
    assert classic_heartbeat_answer(synced, "g", member, 4) == ErrorCode.NONE
    moved = replace(member, assigned=frozenset())
    assert classic_heartbeat_answer(synced, "g", moved, 4) == ErrorCode.REBALANCE_IN_PROGRESS
    forget_synced(synced, "g", "m1")
    assert classic_heartbeat_answer(synced, "g", member, 4) == ErrorCode.REBALANCE_IN_PROGRESS
    assert classic_heartbeat_answer(synced, "g", None, 4) == ErrorCode.UNKNOWN_MEMBER_ID


def test_an_unknown_member_id_joins_again_without_it_unless_static() -> None:
    assert join_refusal(None, "m9", None) == ErrorCode.UNKNOWN_MEMBER_ID
    assert join_refusal(None, "m9", "i1") == ErrorCode.NONE
    assert join_refusal(None, "", None) == ErrorCode.NONE
    assert join_refusal(Member("m9", member_epoch=1), "m9", None) == ErrorCode.NONE


def test_a_static_member_gone_for_now_is_not_a_classic_member() -> None:
    here, gone = Member("m1", member_epoch=1), Member("m2", member_epoch=1, left_static=True)
    group = Group("g", members={"m1": here, "m2": gone})
    assert classic_member(group, "m1") is here
    assert classic_member(group, "m2") is None and classic_member(None, "m1") is None
    assert keep_alive_heartbeat("g", here).member_epoch == 1
