"""Brokers that restarted behind the controller's back: a bounce seen in one read of
/brokers/ids, and, at load, a leader or ISR member whose process registered after the
partition state was written. Both are a failure followed by a startup (Kafka's
processBrokerChange): it may have lost unflushed data, so it must not keep leading, nor stay
in the ISR unless it is the last member. A broker whose session expired while its process
lived on re-registers with a new broker epoch but the same incarnation (its first
registration's czxid): that is no restart, and it keeps its place. Pure: events in, context
and effects out."""

from __future__ import annotations

import dataclasses

import pytest

from controller.core import (
    UNKNOWN_ZXID,
    BrokersChanged,
    ControlledShutdownRequested,
    ControllerContext,
    Effect,
    Elected,
    IsrChanged,
    LiveBroker,
    PartitionState,
    SendLeaderAndIsr,
    WritePartitionStates,
    handle,
)
from controller.zk_data import PartitionStateZnode
from tests.unit.controller.test_state import (
    CONTROLLER_EPOCH,
    CONTROLLER_ID,
    EPOCH_ZK_VERSION,
    elect,
    leader_and_isr,
    live,
    logged,
    of_type,
    state,
)

TP = ("t", 0)
Expected = tuple[int, int, tuple[int, ...]] | None  # (leader, leader epoch, ISR), None: kept


def written(state_: PartitionState, mzxid: int) -> PartitionState:
    return dataclasses.replace(state_, modified_zxid=mzxid)


def the_write(effects: list[Effect], expected: Expected, version: int = 4) -> None:
    writes = of_type(effects, WritePartitionStates)
    if expected is None:
        assert writes == []
        return
    leader, leader_epoch, isr = expected
    (write,) = writes
    assert write.updates == {
        TP: (PartitionStateZnode(leader, leader_epoch, isr, CONTROLLER_EPOCH), version)
    }


# --- a bounce: a new broker epoch seen in one BrokersChanged ----------------------------------


@pytest.mark.parametrize(
    ("replicas", "before", "live_after", "expected"),
    [
        pytest.param(
            (1, 2, 3),
            state(1, 3, (1, 2, 3)),
            live(1, 2, 3, epochs={1: 500}),
            (2, 4, (2, 3)),
            id="leader-moves-to-another-isr-member",
        ),
        pytest.param(
            (1, 2, 3),
            state(1, 3, (3, 1)),
            live(1, 2, 3, epochs={1: 500}),
            (3, 4, (3,)),
            id="leader-moves-in-assignment-order-among-the-isr",
        ),
        pytest.param(
            (1, 2),
            state(1, 3, (1,)),
            live(1, 2, epochs={1: 500}),
            (1, 4, (1,)),
            id="last-isr-member-leads-again-in-a-new-epoch",
        ),
        pytest.param(
            (1, 2, 3),
            state(1, 3, (1, 2, 3)),
            live(1, 2, 3, epochs={2: 500}),
            (1, 4, (1, 3)),
            id="follower-leaves-the-isr",
        ),
        pytest.param(
            (1, 2),
            state(1, 3, (1,)),
            live(1, 2, epochs={2: 500}),
            None,
            id="follower-out-of-the-isr-changes-nothing",
        ),
        pytest.param(
            (1, 2, 3),
            state(1, 3, (1, 2)),
            live(1, 3, epochs={1: 500}),
            (-1, 4, (2,)),
            id="with-the-other-isr-member-gone-the-data-waits-for-it",
        ),
        pytest.param(
            (1, 2, 3),
            state(1, 3, (2, 1)),
            live(1, 3, epochs={1: 500}),
            (-1, 4, (2,)),
            id="isr-order-does-not-decide-who-stays",
        ),
        pytest.param(
            (1, 2, 3),
            state(1, 3, (1, 2)),
            live(1, 2, 3, epochs={1: 500, 2: 600}),
            (2, 4, (2,)),
            id="whole-isr-bounced-keeps-one-member",
        ),
        pytest.param(
            (1, 2, 3),
            state(2, 3, (2, 3)),
            live(1, 2, 3, epochs={1: 500}),
            None,
            id="unrelated-bounce",
        ),
    ],
)
def test_bounce_is_a_failure_then_a_startup(
    replicas: tuple[int, ...],
    before: PartitionState,
    live_after: dict[int, LiveBroker],
    expected: Expected,
) -> None:
    ctx, _ = elect(live(1, 2, 3), {"t": {0: replicas}}, {TP: before})
    assert ctx.partition_states[TP] == before
    ctx, effects = handle(ctx, BrokersChanged(live_after), 0)
    the_write(effects, expected)
    bounced = sorted(b for b in live_after if live_after[b].epoch >= 500)
    assert [f["broker_id"] for f in logged(effects, "broker bounced")] == bounced
    if expected is None:
        return
    leader, leader_epoch, isr = expected
    assert ctx.partition_states[TP] == PartitionState(
        leader, leader_epoch, isr, CONTROLLER_EPOCH, 5
    )
    for broker_id in bounced:  # it learns its new role, whatever it held before
        assert leader_and_isr(effects)[broker_id][TP] == (leader, leader_epoch, isr, 5, False)


# --- at load: registered after the partition state was written --------------------------------


# Broker epochs: 1 -> 101, 2 -> 102, 3 -> 103 unless overridden; the state written at `mzxid`.
@pytest.mark.parametrize(
    ("before", "mzxid", "epochs", "expected"),
    [
        pytest.param(state(1, 3, (1, 2, 3)), 50, {}, (3, 4, (3,)), id="all-restarted-since"),
        pytest.param(state(1, 3, (1, 2, 3)), 200, {}, None, id="none-restarted-since"),
        pytest.param(
            state(1, 3, (1, 2, 3)), 200, {1: 300}, (2, 4, (2, 3)), id="leader-restarted-since"
        ),
        pytest.param(
            state(1, 3, (1, 2, 3)), 200, {3: 300}, (1, 4, (1, 2)), id="follower-restarted-since"
        ),
        pytest.param(
            state(1, 3, (1,)), 200, {1: 300}, (1, 4, (1,)), id="last-isr-member-new-epoch"
        ),
        pytest.param(state(1, 3, (1, 2)), 200, {3: 300}, None, id="non-isr-replica-ignored"),
        pytest.param(
            state(-1, 3, (1,)), 200, {1: 300}, (1, 4, (1,)), id="offline-last-member-returns"
        ),
        pytest.param(state(1, 3, (1, 2, 3)), UNKNOWN_ZXID, {}, None, id="mzxid-unknown"),
    ],
)
def test_elected_handles_members_registered_after_the_state_was_written(
    before: PartitionState, mzxid: int, epochs: dict[int, int], expected: Expected
) -> None:
    brokers = live(1, 2, 3, epochs=epochs)
    ctx, effects = elect(brokers, {"t": {0: (1, 2, 3)}}, {TP: written(before, mzxid)})
    the_write(effects, expected)
    if expected is None:
        assert logged(effects, "broker restarted unnoticed") == []
        return
    leader, leader_epoch, isr = expected
    assert ctx.partition_states[TP] == PartitionState(
        leader, leader_epoch, isr, CONTROLLER_EPOCH, 5
    )
    restarted = [f["broker_id"] for f in logged(effects, "broker restarted unnoticed")]
    assert restarted == sorted(
        b for b in {before.leader, *before.isr} if b in brokers and brokers[b].epoch > mzxid
    )


def test_restarted_since_written_is_decided_per_partition() -> None:
    """Broker 1 (epoch 300) leads both; only the state written before it registered moves."""
    assignments = {"t": {0: (1, 2), 1: (1, 2)}}
    states = {
        ("t", 0): written(state(1, 3, (1, 2)), 250),
        ("t", 1): written(state(1, 3, (1, 2)), 350),
    }
    ctx, effects = elect(live(1, 2, epochs={1: 300}), assignments, states)
    (write,) = of_type(effects, WritePartitionStates)
    assert write.updates == {("t", 0): (PartitionStateZnode(2, 4, (2,), CONTROLLER_EPOCH), 4)}
    assert ctx.partition_states[("t", 1)] == states[("t", 1)]
    assert logged(effects, "broker restarted unnoticed") == [
        {"broker_id": 1, "partitions": ["t-0"]}
    ]


def test_reload_in_the_same_term_also_compares_with_the_epochs_it_knew() -> None:
    """Broker 1 bounced, then the state was written again (by its leader's ISR change, say)
    before our write lost its race: the mzxid no longer tells, the epoch we knew does."""
    assignments = {"t": {0: (1, 2)}}
    ctx, _ = elect(live(1, 2), assignments, {TP: written(state(1, 3, (1, 2)), 150)})
    rewritten = {TP: written(state(1, 3, (1, 2), version=5), 600)}
    reload = Elected(
        CONTROLLER_EPOCH, EPOCH_ZK_VERSION, live(1, 2, epochs={1: 500}), assignments, rewritten
    )
    ctx, effects = handle(ctx, reload, 0)
    the_write(effects, (2, 4, (2,)), version=5)
    # A new controller term knows no earlier epochs: only the mzxid can tell.
    failover = Elected(
        CONTROLLER_EPOCH + 1,
        EPOCH_ZK_VERSION + 1,
        live(1, 2, epochs={1: 500}),
        assignments,
        rewritten,
    )
    _, effects = handle(ControllerContext(CONTROLLER_ID), failover, 0)
    assert of_type(effects, WritePartitionStates) == []


def test_modified_zxid_is_not_part_of_the_state() -> None:
    assert written(state(1, 3, (1,)), 7) == written(state(1, 3, (1,)), 9) == state(1, 3, (1,))


# --- a re-registration: a new broker epoch, the same incarnation (its session expired) -------


@pytest.mark.parametrize(
    ("replicas", "before", "live_after", "expected"),
    [
        pytest.param(
            (1, 2, 3),
            state(1, 3, (1, 2, 3)),
            live(1, 2, 3, epochs={2: 500}, incarnations={2: 102}),
            None,
            id="follower-stays-in-the-isr",
        ),
        pytest.param(
            (1, 2),
            state(1, 3, (1, 2)),
            live(1, 2, epochs={1: 500}, incarnations={1: 101}),
            None,
            id="leader-keeps-leading-in-its-epoch",
        ),
        pytest.param(
            (1, 2),
            state(1, 3, (1,)),
            live(1, 2, epochs={1: 500, 2: 600}, incarnations={1: 101, 2: 102}),
            None,
            id="both-re-registered",
        ),
        pytest.param(
            (1, 2, 3),
            state(1, 3, (1, 2, 3)),
            live(1, 2, 3, epochs={1: 500, 3: 600}, incarnations={3: 103}),
            (2, 4, (2, 3)),
            id="restarted-leader-moves-re-registered-follower-stays",
        ),
        pytest.param(
            (1, 2, 3),
            state(1, 3, (1, 2, 3)),
            live(1, 2, 3, epochs={1: 500, 2: 600}, incarnations={1: 101}),
            (1, 4, (1, 3)),
            id="restarted-follower-leaves-re-registered-leader-stays",
        ),
    ],
)
def test_re_registration_of_the_same_process_is_no_failure(
    replicas: tuple[int, ...],
    before: PartitionState,
    live_after: dict[int, LiveBroker],
    expected: Expected,
) -> None:
    ctx, _ = elect(live(1, 2, 3), {"t": {0: replicas}}, {TP: before})
    ctx, effects = handle(ctx, BrokersChanged(live_after), 0)
    the_write(effects, expected)
    new_epoch = [b for b in sorted(live_after) if live_after[b].epoch >= 500]
    restarted = [b for b in new_epoch if live_after[b].incarnation >= 500]
    reregistered = [b for b in new_epoch if b not in restarted]
    assert [f["broker_id"] for f in logged(effects, "broker bounced")] == restarted
    assert [f["broker_id"] for f in logged(effects, "broker session renewed")] == reregistered
    after = before if expected is None else PartitionState(*expected, CONTROLLER_EPOCH, 5)
    assert ctx.partition_states[TP] == after
    # Every one with a new epoch learns its partitions in requests carrying that epoch.
    requests = {e.broker_id: e.request for e in of_type(effects, SendLeaderAndIsr)}
    for broker_id in new_epoch:
        assert requests[broker_id].broker_epoch == live_after[broker_id].epoch
        assert leader_and_isr(effects)[broker_id][TP] == (
            after.leader,
            after.leader_epoch,
            after.isr,
            after.partition_epoch,
            False,
        )


def test_re_registration_keeps_a_controlled_shutdown_a_restart_ends_it() -> None:
    ctx, _ = elect(live(1, 2, 3), {"t": {0: (1, 2, 3)}}, {TP: state(1, 3, (1, 2, 3))})
    ctx, _ = handle(ctx, ControlledShutdownRequested(2, 102), 0)
    assert ctx.shutting_down == frozenset({2})
    reregistered = live(1, 2, 3, epochs={2: 500}, incarnations={2: 102})
    ctx, effects = handle(ctx, BrokersChanged(reregistered), 0)
    assert ctx.shutting_down == frozenset({2})  # the same process, still shutting down
    assert of_type(effects, WritePartitionStates) == []
    ctx, _ = handle(ctx, BrokersChanged(live(1, 2, 3, epochs={2: 600})), 0)
    assert ctx.shutting_down == frozenset()


def test_nothing_changed_is_no_event() -> None:
    brokers = live(1, 2, epochs={2: 500}, incarnations={2: 102})
    ctx, _ = elect(brokers, {"t": {0: (1, 2)}}, {TP: state(1, 3, (1, 2))})
    assert handle(ctx, BrokersChanged(dict(brokers)), 0) == (ctx, [])


# Broker epochs: 1 -> 101, 2 -> 102, 3 -> 103 unless overridden; the state written at `mzxid`.
@pytest.mark.parametrize(
    ("before", "mzxid", "epochs", "incarnations", "expected"),
    [
        pytest.param(
            state(1, 3, (1, 2, 3)),
            200,
            {3: 300},
            {3: 103},
            None,
            id="follower-re-registered-since",
        ),
        pytest.param(
            state(1, 3, (1, 2, 3)),
            200,
            {1: 300},
            {1: 101},
            None,
            id="leader-re-registered-since",
        ),
        pytest.param(
            state(1, 3, (1, 2, 3)),
            200,
            {1: 300, 2: 400},
            {1: 101, 2: 250},
            (1, 4, (1, 3)),
            id="re-registered-leader-stays-follower-restarted-since",
        ),
        pytest.param(
            state(1, 3, (1, 2, 3)),
            200,
            {1: 300, 2: 400},
            {1: 250, 2: 102},
            (2, 4, (2, 3)),
            id="restarted-leader-re-registered-since-moves",
        ),
    ],
)
def test_elected_compares_the_incarnation_with_the_state(
    before: PartitionState,
    mzxid: int,
    epochs: dict[int, int],
    incarnations: dict[int, int],
    expected: Expected,
) -> None:
    brokers = live(1, 2, 3, epochs=epochs, incarnations=incarnations)
    ctx, effects = elect(brokers, {"t": {0: (1, 2, 3)}}, {TP: written(before, mzxid)})
    the_write(effects, expected)
    restarted = [f["broker_id"] for f in logged(effects, "broker restarted unnoticed")]
    assert restarted == sorted(b for b in brokers if brokers[b].incarnation > mzxid)
    after = before if expected is None else PartitionState(*expected, CONTROLLER_EPOCH, 5)
    assert ctx.partition_states[TP] == after
    # Everyone live hears the state, in requests carrying its current broker epoch.
    for effect in of_type(effects, SendLeaderAndIsr):
        assert effect.request.broker_epoch == brokers[effect.broker_id].epoch


def test_reload_in_the_same_term_takes_a_re_registration_as_no_bounce() -> None:
    assignments = {"t": {0: (1, 2)}}
    ctx, _ = elect(live(1, 2), assignments, {TP: written(state(1, 3, (1, 2)), 150)})
    rewritten = {TP: written(state(1, 3, (1, 2), version=5), 600)}
    brokers = live(1, 2, epochs={1: 500}, incarnations={1: 101})
    reload = Elected(CONTROLLER_EPOCH, EPOCH_ZK_VERSION, brokers, assignments, rewritten)
    ctx, effects = handle(ctx, reload, 0)
    assert of_type(effects, WritePartitionStates) == []
    assert logged(effects, "broker restarted unnoticed") == []
    assert leader_and_isr(effects)[1][TP] == (1, 3, (1, 2), 5, False)


# --- a leader's ISR write taken after the controller handled a failure ------------------------


@pytest.mark.parametrize(
    ("live_after", "written_at", "expected"),
    [
        pytest.param(live(1, 3), 150, (1, 4, (1, 3)), id="member-left-before-the-write-was-read"),
        pytest.param(
            live(1, 2, 3, epochs={2: 500}),
            150,
            (1, 4, (1, 3)),
            id="member-restarted-after-the-write",
        ),
        pytest.param(
            live(1, 2, 3, epochs={2: 500}), 600, None, id="member-restarted-before-the-write"
        ),
        pytest.param(
            live(1, 2, 3, epochs={2: 500}, incarnations={2: 102}),
            150,
            None,
            id="member-only-re-registered",
        ),
    ],
)
def test_an_isr_change_read_late_drops_members_that_failed_since_the_write(
    live_after: dict[int, LiveBroker], written_at: int, expected: Expected
) -> None:
    """The leader wrote ISR [1, 2, 3] (version 4) and broker 2 then crashed, losing records
    it had acknowledged; the controller handled its departure before the leader's ISR change
    notification, so the ISR it knew, [1, 3], had nothing to drop. Taking [1, 2, 3] as read
    would let broker 2 be elected later without those records."""
    ctx, _ = elect(live(1, 2, 3), {"t": {0: (1, 2, 3)}}, {TP: state(1, 3, (1, 3), version=3)})
    ctx, _ = handle(ctx, BrokersChanged(live_after), 0)
    ctx, effects = handle(ctx, IsrChanged({TP: written(state(1, 3, (1, 2, 3)), written_at)}), 0)
    the_write(effects, expected)
    if expected is not None:
        assert ctx.partition_states[TP].isr == expected[2]
        assert of_type(effects, SendLeaderAndIsr)
