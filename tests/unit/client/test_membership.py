"""The group member's pure core (client/consumer/membership.py) against docs/groups.md: what
each heartbeat says, what an answer changes, reconciliation, fencing, leaving, timeouts."""

from __future__ import annotations

import pytest

from client.consumer.membership import (
    DEFAULT_SESSION_TIMEOUT_MS,
    Membership,
    MemberState,
    by_topic,
    reconcile,
)
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
    TopicPartitions,
)
from protocol.topic_partition import TopicPartition

T0, T1, T2, T3 = (TopicPartition("t", p) for p in range(4))


def answer(
    member_epoch: int = 1,
    assignment: list[TopicPartition] | None = None,
    *,
    error: ErrorCode = ErrorCode.NONE,
    member_id: str = "m-1",
    interval_ms: int = 3_000,
) -> ConsumerGroupHeartbeatResponse:
    return ConsumerGroupHeartbeatResponse(
        int(error),
        None,
        member_id if error == ErrorCode.NONE else None,
        member_epoch,
        interval_ms,
        None if assignment is None else HeartbeatAssignment(by_topic(assignment)),
    )


def state(m: Membership) -> MemberState:
    """m.state, read afresh (mypy would narrow the attribute across method calls)."""
    return m.state


def joined(owned: list[TopicPartition], *, instance_id: str | None = None) -> Membership:
    """A member that joined (epoch 1) and took on `owned` at t=0, its ack answered."""
    m = Membership("g", instance_id=instance_id, client_id="c", rebalance_timeout_ms=60_000)
    m.subscribe(["t"], now_ms=0)
    m.build_heartbeat(0)
    m.on_response(answer(1, owned), 0)
    if owned:
        m.reconciled(frozenset(owned), 0)
        m.build_heartbeat(0)
        m.on_response(answer(1), 0)
    assert state(m) is MemberState.STABLE
    return m


def test_reconcile_is_a_function_of_owned_and_assignment() -> None:
    owned = frozenset({T0, T1})
    assert reconcile(owned, None) is None  # no assignment: keep what is owned
    assert reconcile(owned, frozenset({T1, T0})) is None
    change = reconcile(owned, frozenset({T1, T2}))
    assert change is not None
    assert (change.revoke, change.assign, change.target) == (
        frozenset({T0}),
        frozenset({T2}),
        frozenset({T1, T2}),
    )
    everything_goes = reconcile(owned, frozenset())
    assert everything_goes is not None and everything_goes.revoke == owned


def test_the_join_heartbeat_carries_every_field() -> None:
    m = Membership("g", instance_id="i-1", client_id="c", rebalance_timeout_ms=60_000)
    assert m.next_heartbeat_ms() == float("inf")  # nothing to say before subscribing
    m.subscribe(["b", "a", "b"], now_ms=100)
    assert state(m) is MemberState.JOINING and m.heartbeat_due(100)
    request = m.build_heartbeat(100)
    assert (request.group_id, request.member_id, request.member_epoch) == ("g", "", 0)
    assert request.subscribed_topic_names == ("a", "b")
    assert request.subscribed_topic_regex is None
    assert request.rebalance_timeout_ms == 60_000
    assert request.topic_partitions == ()
    assert (request.instance_id, request.client_id) == ("i-1", "c")
    assert not m.heartbeat_due(100)  # one heartbeat out at a time


def test_steady_heartbeats_send_only_what_changed() -> None:
    m = joined([T0])
    assert m.member_id == "m-1" and m.member_epoch == 1
    assert not m.heartbeat_due(2_999)
    assert m.heartbeat_due(3_000)  # the coordinator's interval
    quiet = m.build_heartbeat(3_000)
    assert (quiet.member_id, quiet.member_epoch) == ("m-1", 1)
    assert quiet.subscribed_topic_names is None and quiet.topic_partitions is None
    assert quiet.rebalance_timeout_ms == -1 and quiet.server_assignor is None
    m.on_response(answer(1), 3_000)
    m.subscribe(["t", "u"], now_ms=3_100)
    assert m.heartbeat_due(3_100)  # a change goes out at once
    changed = m.build_heartbeat(3_100)
    assert changed.subscribed_topic_names == ("t", "u") and changed.topic_partitions is None


def test_an_assignment_is_reconciled_then_acknowledged_at_once() -> None:
    m = joined([T0, T1])
    m.build_heartbeat(3_000)
    outcome = m.on_response(answer(2, [T1, T2]), 3_000)
    assert state(m) is MemberState.RECONCILING and m.member_epoch == 2
    assert outcome.wake_poll and outcome.stop_fetching == {T0}
    assert m.stop_fetching() == {T0}
    change = m.reconciliation()
    assert change is not None
    assert (change.revoke, change.assign) == (frozenset({T0}), frozenset({T2}))
    m.reconciled(change.target, 3_500)
    assert state(m) is MemberState.STABLE and m.stop_fetching() == frozenset()
    assert m.heartbeat_due(3_500)
    ack = m.build_heartbeat(3_500)
    assert ack.topic_partitions == (TopicPartitions("t", (1, 2)),)


def test_an_answer_without_assignment_keeps_what_is_owned() -> None:
    m = joined([T0])
    m.build_heartbeat(3_000)
    outcome = m.on_response(answer(1, None), 3_000)
    assert state(m) is MemberState.STABLE and m.owned == {T0} and not outcome.wake_poll


def test_a_newer_assignment_during_reconciliation_replaces_the_target() -> None:
    m = joined([T0, T1])
    m.build_heartbeat(3_000)
    m.on_response(answer(2, [T1]), 3_000)
    assert m.stop_fetching() == {T0}
    m.build_heartbeat(6_000)  # poll() has not run yet; the next answer gives T0 back
    m.on_response(answer(3, [T0, T1, T2]), 6_000)
    assert m.stop_fetching() == frozenset()  # T0 is fetched again
    change = m.reconciliation()
    assert change is not None
    assert (change.revoke, change.assign) == (frozenset(), frozenset({T2}))


def test_fenced_means_lost_then_a_rejoin_as_a_new_member() -> None:
    m = joined([T0, T1])
    m.build_heartbeat(3_000)
    outcome = m.on_response(answer(error=ErrorCode.FENCED_MEMBER_EPOCH), 3_000)
    assert state(m) is MemberState.FENCED and m.partitions_lost
    assert outcome.stop_fetching == {T0, T1} and outcome.wake_poll
    assert not m.heartbeat_due(10_000)  # nothing is sent before the lost listener ran
    m.lost_handled(10_000)
    assert state(m) is MemberState.JOINING and m.owned == frozenset()
    rejoin = m.build_heartbeat(10_000)
    assert (rejoin.member_id, rejoin.member_epoch, rejoin.topic_partitions) == ("", 0, ())
    assert rejoin.subscribed_topic_names == ("t",)


def test_unknown_member_is_handled_as_fenced() -> None:
    m = joined([T0])
    m.build_heartbeat(3_000)
    m.on_response(answer(error=ErrorCode.UNKNOWN_MEMBER_ID), 3_000)
    assert state(m) is MemberState.FENCED


@pytest.mark.parametrize(
    "error",
    [
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ],
)
def test_coordinator_errors_look_it_up_again_and_keep_the_partitions(error: ErrorCode) -> None:
    m = joined([T0])
    m.build_heartbeat(3_000)
    outcome = m.on_response(answer(error=error), 3_000)
    assert outcome.find_coordinator and not outcome.stop_fetching
    assert state(m) is MemberState.STABLE and m.owned == {T0}
    assert not m.heartbeat_due(3_099) and m.heartbeat_due(3_100)  # retry_backoff_ms
    retry = m.build_heartbeat(3_100)
    # After a failure the next heartbeat carries every field again.
    assert retry.subscribed_topic_names == ("t",)
    assert retry.topic_partitions == (TopicPartitions("t", (0,)),)
    assert retry.member_epoch == 1
    m.on_failure(3_100)
    assert not m.heartbeat_due(3_299) and m.heartbeat_due(3_300)  # the backoff doubles


@pytest.mark.parametrize(
    "error",
    [
        ErrorCode.UNRELEASED_INSTANCE_ID,
        ErrorCode.FENCED_INSTANCE_ID,
        ErrorCode.UNSUPPORTED_ASSIGNOR,
        ErrorCode.INVALID_REQUEST,
        ErrorCode.GROUP_MAX_SIZE_REACHED,
    ],
)
def test_fatal_errors_stop_the_member(error: ErrorCode) -> None:
    m = joined([T0])
    m.build_heartbeat(3_000)
    outcome = m.on_response(answer(error=error), 3_000)
    assert state(m) is MemberState.FATAL and m.fatal_error is not None
    assert m.fatal_error[0] == error
    assert outcome.stop_fetching == {T0} and outcome.wake_poll
    assert m.next_heartbeat_ms() == float("inf")


def test_a_dynamic_member_leaves_with_epoch_minus_1() -> None:
    m = joined([T0])
    m.unsubscribe(4_000)
    assert state(m) is MemberState.LEAVING and m.heartbeat_due(4_000)
    leave = m.build_heartbeat(4_000)
    assert (leave.member_id, leave.member_epoch) == ("m-1", -1)
    m.on_response(answer(-1), 4_000)
    assert state(m) is MemberState.UNSUBSCRIBED and m.owned == frozenset()
    assert m.next_heartbeat_ms() == float("inf")


def test_a_static_member_leaves_with_epoch_minus_2() -> None:
    m = joined([T0], instance_id="i-1")
    m.unsubscribe(4_000)
    leave = m.build_heartbeat(4_000)
    assert (leave.member_epoch, leave.instance_id) == (-2, "i-1")


def test_no_poll_for_max_poll_interval_leaves_with_minus_1_then_rejoins_at_poll() -> None:
    m = joined([T0], instance_id="i-1")
    m.leave(4_000, poll_expired=True)
    leave = m.build_heartbeat(4_000)
    assert leave.member_epoch == -1  # even a static member: it really is gone
    m.on_response(answer(-1), 4_000)
    assert state(m) is MemberState.STALE and m.partitions_lost
    assert m.stop_fetching() == {T0}
    m.lost_handled(9_000)  # the next poll(): lost listener, then rejoin
    assert state(m) is MemberState.JOINING
    assert m.build_heartbeat(9_000).member_epoch == 0


def test_leaving_while_the_join_is_out_waits_for_the_member_id() -> None:
    m = Membership("g")
    m.subscribe(["t"], now_ms=0)
    m.build_heartbeat(0)
    m.unsubscribe(10)
    assert state(m) is MemberState.LEAVING and not m.heartbeat_due(10)
    m.on_response(answer(1, [T0]), 20)  # the join's answer: its assignment is not taken on
    assert m.heartbeat_due(20)
    leave = m.build_heartbeat(20)
    assert (leave.member_id, leave.member_epoch) == ("m-1", -1)


def test_leaving_before_any_answer_is_immediate() -> None:
    m = Membership("g")
    m.subscribe(["t"], now_ms=0)
    m.unsubscribe(5)
    assert state(m) is MemberState.UNSUBSCRIBED


def test_a_fenced_answer_to_a_leave_means_it_is_gone_anyway() -> None:
    m = joined([T0])
    m.unsubscribe(4_000)
    m.build_heartbeat(4_000)
    m.on_response(answer(error=ErrorCode.UNKNOWN_MEMBER_ID), 4_000)
    assert state(m) is MemberState.UNSUBSCRIBED


def test_no_answer_for_the_session_timeout_loses_the_partitions() -> None:
    m = joined([T0])
    now = 3_000.0
    while now < DEFAULT_SESSION_TIMEOUT_MS:
        assert not m.session_lost(now)
        m.build_heartbeat(now)
        m.on_failure(now)
        now += 1_000
    assert m.session_lost(now)
    assert state(m) is MemberState.FENCED and m.stop_fetching() == {T0}


def test_a_late_answer_after_being_fenced_changes_nothing() -> None:
    m = joined([T0])
    m.build_heartbeat(3_000)
    m.on_response(answer(error=ErrorCode.FENCED_MEMBER_EPOCH), 3_000)
    m.on_response(answer(5, [T0, T1]), 3_001)
    assert state(m) is MemberState.FENCED and m.member_epoch == 1


def test_a_regex_subscription_is_sent_as_a_regex() -> None:
    m = Membership("g")
    m.subscribe(regex="t.*", now_ms=0)
    request = m.build_heartbeat(0)
    assert (request.subscribed_topic_names, request.subscribed_topic_regex) == (None, "t.*")
    m.on_response(answer(1, []), 0)
    m.subscribe(["t"], now_ms=10)
    switched = m.build_heartbeat(10)
    assert (switched.subscribed_topic_names, switched.subscribed_topic_regex) == (("t",), "")
