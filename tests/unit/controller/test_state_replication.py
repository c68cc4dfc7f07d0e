"""The controller core's replication events: ISR change notifications, controlled shutdown
and unclean leader election. Pure: events in, context and effects out."""

from __future__ import annotations

import pytest

from controller.core import (
    UNCLEAN_LEADER_ELECTION,
    BrokersChanged,
    ControlledShutdownReply,
    ControlledShutdownRequested,
    ControllerContext,
    Effect,
    Elected,
    ElectLeadersRequested,
    IsrChanged,
    LogEvent,
    PartitionState,
    Resigned,
    SendLeaderAndIsr,
    SendStopReplica,
    TopicsChanged,
    WritePartitionStates,
    handle,
    states_to_read,
)
from controller.zk_data import PartitionStateZnode
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from tests.unit.controller.test_state import (
    CONTROLLER_EPOCH,
    CONTROLLER_ID,
    EPOCH_ZK_VERSION,
    Assignments,
    elect,
    leader_and_isr,
    live,
    logged,
    of_type,
    state,
    update_metadata,
)


def reply(effects: list[Effect]) -> ControlledShutdownReply:
    last = effects[-1]
    assert isinstance(last, ControlledShutdownReply), "the reply is always the last effect"
    assert len(of_type(effects, ControlledShutdownReply)) == 1
    return last


def shut_down(
    ctx: ControllerContext, broker_id: int, broker_epoch: int
) -> tuple[ControllerContext, list[Effect]]:
    return handle(ctx, ControlledShutdownRequested(broker_id, broker_epoch), 0)


# --- ISR change notifications -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("read", "taken"),
    [
        pytest.param(state(1, 3, (1, 2), version=7), True, id="isr-expanded-same-epoch"),
        pytest.param(state(1, 3, (1,), version=5), True, id="isr-shrunk"),
        pytest.param(state(1, 2, (1,), version=9), False, id="older-leader-epoch"),
        pytest.param(state(1, 3, (1,), version=3), False, id="older-partition-epoch"),
        pytest.param(state(1, 3, (1, 2, 3), version=4), False, id="unchanged"),
        pytest.param(state(2, 4, (2, 3), version=8), True, id="newer-leader-epoch"),
    ],
)
def test_isr_changed_takes_states_not_older_than_ours(read: PartitionState, taken: bool) -> None:
    ctx, _ = elect(live(1, 2, 3), {"t": {0: (1, 2, 3)}}, {("t", 0): state(1, 3, (1, 2, 3))})
    before = ctx.partition_states[("t", 0)]
    ctx, effects = handle(ctx, IsrChanged({("t", 0): read}), 0)
    assert of_type(effects, WritePartitionStates) == []  # the leader wrote it already
    assert of_type(effects, SendLeaderAndIsr) == []
    if not taken:
        assert effects == []
        assert ctx.partition_states[("t", 0)] == before
        return
    assert ctx.partition_states[("t", 0)] == read
    um = update_metadata(effects)
    assert um.broker_ids == (1, 2, 3)
    (s,) = um.request.partition_states
    assert (s.leader, s.leader_epoch, s.isr, s.partition_epoch) == (
        read.leader,
        read.leader_epoch,
        read.isr,
        read.partition_epoch,
    )
    assert logged(effects, "isr changed") == [
        {
            "topic": "t",
            "partition": 0,
            "leader": read.leader,
            "leader_epoch": read.leader_epoch,
            "isr": list(read.isr),
            "partition_epoch": read.partition_epoch,
        }
    ]


def test_isr_changed_ignores_unknown_partitions_and_inactive_controller() -> None:
    ctx, _ = elect(live(1, 2), {"t": {0: (1, 2)}}, {("t", 0): state(1, 0, (1, 2))})
    event = IsrChanged({("gone", 0): state(1, 5, (1,)), ("t", 9): state(1, 5, (1,))})
    assert handle(ctx, event, 0) == (ctx, [])
    idle = ControllerContext(CONTROLLER_ID)
    assert handle(idle, IsrChanged({("t", 0): state(1, 5, (1,))}), 0) == (idle, [])


# --- controlled shutdown ----------------------------------------------------------------------


def three_brokers() -> ControllerContext:
    """Broker 1 leads a (ISR 1,2,3), b (ISR 1 only) and single (RF=1); follows c."""
    assignments: Assignments = {
        "a": {0: (1, 2, 3)},
        "b": {0: (1, 2)},
        "c": {0: (2, 1, 3)},
        "single": {0: (1,)},
        "other": {0: (2, 3)},
    }
    states = {
        ("a", 0): state(1, 4, (1, 2, 3)),
        ("b", 0): state(1, 2, (1,)),
        ("c", 0): state(2, 6, (2, 1, 3)),
        ("single", 0): state(1, 0, (1,)),
        ("other", 0): state(2, 0, (2, 3)),
    }
    ctx, _ = elect(live(1, 2, 3), assignments, states)
    return ctx


def test_controlled_shutdown_moves_leaders_and_leaves_isrs() -> None:
    ctx, effects = shut_down(three_brokers(), 1, 101)

    assert ctx.shutting_down == frozenset({1})
    (write,) = of_type(effects, WritePartitionStates)
    assert write.updates == {
        # led: the first live ISR member not shutting down leads, ISR without broker 1
        ("a", 0): (PartitionStateZnode(2, 5, (2, 3), CONTROLLER_EPOCH), 4),
        # followed: broker 1 leaves the ISR, leader epoch + 1
        ("c", 0): (PartitionStateZnode(2, 7, (2, 3), CONTROLLER_EPOCH), 4),
    }  # b: no other ISR member, the last one keeps leading; single: RF=1, untouched
    sent = leader_and_isr(effects)
    assert sent[1] == {("a", 0): (2, 5, (2, 3), 5, False)}  # not told about c: it is leaving
    assert sent[2] == {("a", 0): (2, 5, (2, 3), 5, False), ("c", 0): (2, 7, (2, 3), 5, False)}
    assert sent[3] == sent[2]
    (stop,) = of_type(effects, SendStopReplica)
    assert stop.broker_id == 1 and stop.request.broker_epoch == 101
    assert [
        (t.topic_name, p.partition_index, p.leader_epoch, p.delete_partition)
        for t in stop.request.topic_states
        for p in t.partition_states
    ] == [("c", 0, 7, False)]
    um = update_metadata(effects)
    assert um.broker_ids == (1, 2, 3)  # a shutting-down broker still hears everything
    assert reply(effects) == ControlledShutdownReply(1, ErrorCode.NONE, (("b", 0), ("single", 0)))
    kinds = [type(e) for e in effects if not isinstance(e, LogEvent)]
    assert kinds.index(WritePartitionStates) < kinds.index(SendLeaderAndIsr)
    assert logged(effects, "controlled shutdown requested") == [
        {"shutting_down_broker_id": 1, "broker_epoch": 101}
    ]

    # Asking again (the broker retries) changes nothing and gives the same answer.
    again, effects = shut_down(ctx, 1, 101)
    assert again.partition_states == ctx.partition_states
    assert of_type(effects, WritePartitionStates) == []
    assert reply(effects).remaining_partitions == (("b", 0), ("single", 0))


def test_controlled_shutdown_first_reads_the_states_of_the_brokers_partitions() -> None:
    """A leader's ISR written but not yet published would be missed (see
    tests/unit/controller/test_leading.py): the shell reads the partitions the shutdown acts
    on, those the broker replicates with others; nothing for other requests."""
    ctx = three_brokers()
    assert states_to_read(ctx, ControlledShutdownRequested(1, 101)) == [
        ("a", 0),
        ("b", 0),
        ("c", 0),
    ]  # not single (RF=1) nor other (not a replica)
    assert states_to_read(ctx, ControlledShutdownRequested(7, 107)) == []  # not registered
    assert states_to_read(ControllerContext(CONTROLLER_ID), ControlledShutdownRequested(1, 1)) == []
    assert states_to_read(ctx, IsrChanged({})) == []


def test_elections_first_read_the_states_of_the_partitions_they_may_change() -> None:
    """Preferred: those led by another replica than the assignment's first; unclean: those
    without a live leader (Kafka's processReplicaLeaderElection picks the same)."""
    ctx = three_brokers()
    every, preferred, unclean = None, ElectionType.PREFERRED, ElectionType.UNCLEAN
    assert states_to_read(ctx, ElectLeadersRequested(preferred, every)) == []
    assert states_to_read(ctx, ElectLeadersRequested(unclean, every)) == []
    ctx, _ = handle(ctx, BrokersChanged(live(2, 3)), 0)  # b1 gone: b and single leaderless
    assert ctx.partition_states[("a", 0)].leader == 2
    assert states_to_read(ctx, ElectLeadersRequested(preferred, every)) == [
        ("a", 0),
        ("b", 0),
        ("single", 0),
    ]
    assert states_to_read(ctx, ElectLeadersRequested(preferred, (("c", 0), ("a", 0)))) == [("a", 0)]
    assert states_to_read(ctx, ElectLeadersRequested(unclean, every)) == [("b", 0), ("single", 0)]


@pytest.mark.parametrize(
    ("broker_id", "broker_epoch", "expected"),
    [
        pytest.param(7, 107, ErrorCode.BROKER_NOT_AVAILABLE, id="unknown-broker"),
        pytest.param(1, 100, ErrorCode.STALE_BROKER_EPOCH, id="stale-epoch"),
        pytest.param(1, -1, ErrorCode.NONE, id="unknown-epoch-not-checked"),
        pytest.param(1, 101, ErrorCode.NONE, id="current-epoch"),
        pytest.param(1, 150, ErrorCode.NONE, id="newer-epoch-than-seen"),
    ],
)
def test_controlled_shutdown_checks_the_broker(
    broker_id: int, broker_epoch: int, expected: ErrorCode
) -> None:
    before = three_brokers()
    ctx, effects = shut_down(before, broker_id, broker_epoch)
    assert reply(effects).error_code == expected
    if expected != ErrorCode.NONE:
        assert (ctx, effects) == (before, [ControlledShutdownReply(broker_id, expected)])


def test_controlled_shutdown_without_controller_says_not_controller() -> None:
    idle = ControllerContext(CONTROLLER_ID)
    assert shut_down(idle, 1, 101) == (
        idle,
        [ControlledShutdownReply(1, ErrorCode.NOT_CONTROLLER)],
    )


def test_shutting_down_broker_is_never_elected_and_is_forgotten_when_it_returns() -> None:
    assignments: Assignments = {"t": {0: (1, 2, 3)}}
    ctx, _ = elect(live(1, 2, 3), assignments, {("t", 0): state(2, 0, (2, 1))})
    ctx, _ = shut_down(ctx, 1, 101)
    assert ctx.partition_states[("t", 0)] == PartitionState(2, 1, (2,), CONTROLLER_EPOCH, 5)
    # Its leader took it back into the ISR (it kept fetching a moment longer).
    ctx, _ = handle(ctx, IsrChanged({("t", 0): state(2, 1, (2, 1), version=6)}), 0)

    # The leader dies: broker 1 is live and in the ISR, but shutting down: not elected.
    ctx, _ = handle(ctx, BrokersChanged(live(1, 3)), 0)
    assert ctx.partition_states[("t", 0)] == PartitionState(-1, 2, (1,), CONTROLLER_EPOCH, 7)
    # A new partition does not start on it either.
    ctx, _ = handle(ctx, TopicsChanged({**assignments, "new": {0: (1, 3)}}), 0)
    assert ctx.partition_states[("new", 0)] == PartitionState(3, 0, (3,), CONTROLLER_EPOCH, 0)

    # A re-load in the same term remembers it; a new controller term does not.
    reload = Elected(
        CONTROLLER_EPOCH,
        EPOCH_ZK_VERSION,
        live(1, 3),
        ctx.assignments,
        ctx.partition_states,
    )
    assert handle(ctx, reload, 0)[0].shutting_down == frozenset({1})
    failover = Elected(CONTROLLER_EPOCH + 1, EPOCH_ZK_VERSION + 1, live(1, 3), ctx.assignments, {})
    assert handle(ctx, failover, 0)[0].shutting_down == frozenset()

    # It restarts (new broker epoch): electable again.
    ctx, _ = handle(ctx, BrokersChanged(live(1, 3, epochs={1: 900})), 0)
    assert ctx.shutting_down == frozenset()
    # It leaves: forgotten as well.
    ctx, _ = shut_down(ctx, 3, 103)
    assert ctx.shutting_down == frozenset({3})
    ctx, _ = handle(ctx, BrokersChanged(live(1, epochs={1: 900})), 0)
    assert ctx.shutting_down == frozenset()


# --- unclean leader election ------------------------------------------------------------------


def offline_after_isr_lost(
    *, default: bool, overrides: dict[str, bool]
) -> tuple[ControllerContext, list[Effect]]:
    """t-0 on (1, 2), ISR just (1,); broker 1 dies while 2 (out of sync) lives."""
    start = ControllerContext(CONTROLLER_ID, unclean_leader_election_enable=default)
    event = Elected(
        CONTROLLER_EPOCH,
        EPOCH_ZK_VERSION,
        live(1, 2),
        {"t": {0: (1, 2)}},
        {("t", 0): state(1, 3, (1,))},
        unclean_overrides=overrides,
    )
    ctx, _ = handle(start, event, 0)
    return handle(ctx, BrokersChanged(live(2)), 0)


@pytest.mark.parametrize(
    ("default", "overrides", "unclean"),
    [
        pytest.param(False, {}, False, id="default-off"),
        pytest.param(False, {"t": True}, True, id="topic-on"),
        pytest.param(True, {}, True, id="broker-default-on"),
        pytest.param(True, {"t": False}, False, id="topic-off-beats-default"),
        pytest.param(False, {"other": True}, False, id="other-topic-on"),
    ],
)
def test_unclean_election(default: bool, overrides: dict[str, bool], unclean: bool) -> None:
    _, effects = offline_after_isr_lost(default=default, overrides=overrides)
    (write,) = of_type(effects, WritePartitionStates)
    warnings = [e for e in of_type(effects, LogEvent) if e.event == UNCLEAN_LEADER_ELECTION]
    if unclean:
        expected = PartitionStateZnode(2, 4, (2,), CONTROLLER_EPOCH)
        assert [(w.level, w.fields["leader"], w.fields["last_isr"]) for w in warnings] == [
            ("warning", 2, [1])
        ]
        assert leader_and_isr(effects)[2][("t", 0)] == (2, 4, (2,), 5, False)
    else:
        expected = PartitionStateZnode(-1, 4, (1,), CONTROLLER_EPOCH)  # ISR keeps its last
        assert warnings == []
    assert write.updates == {("t", 0): (expected, 4)}
    if unclean:  # logged (and counted by the shell) only after the write that made it so
        assert effects.index(write) < effects.index(warnings[0])


def test_enabling_unclean_on_a_topic_elects_its_offline_partitions() -> None:
    ctx, _ = offline_after_isr_lost(default=False, overrides={})
    assert ctx.partition_states[("t", 0)].leader == -1
    assignments = {"t": {0: (1, 2)}}
    ctx, effects = handle(ctx, TopicsChanged(assignments, {"t": True}), 0)
    assert ctx.partition_states[("t", 0)] == PartitionState(2, 5, (2,), CONTROLLER_EPOCH, 6)
    assert next(e.event for e in of_type(effects, LogEvent)) == UNCLEAN_LEADER_ELECTION
    assert update_metadata(effects).request.partition_states[0].leader == 2
    # The same overrides again: nothing to do.
    assert handle(ctx, TopicsChanged(assignments, {"t": True}), 0) == (ctx, [])


def test_override_change_without_effect_only_updates_the_context() -> None:
    ctx, _ = elect(live(1), {"t": {0: (1,)}}, {("t", 0): state(1, 0, (1,))})
    after, effects = handle(ctx, TopicsChanged({"t": {0: (1,)}}, {"t": True}), 0)
    assert effects == []
    assert after.unclean_enabled("t") and not ctx.unclean_enabled("t")


def test_resigned_keeps_the_broker_default() -> None:
    start = ControllerContext(CONTROLLER_ID, unclean_leader_election_enable=True)
    ctx, _ = handle(start, Elected(1, 0, live(1), {}, {}, unclean_overrides={"t": False}), 0)
    assert handle(ctx, Resigned(), 0)[0] == start
