"""The controller's pure core: events in, context and effects out. No ZooKeeper, no sockets."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import pytest

from controller.core import (
    BrokersChanged,
    ControllerContext,
    CreatePartitionStates,
    DeleteTopicZnodes,
    Effect,
    Elected,
    LiveBroker,
    LogEvent,
    PartitionState,
    Resigned,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    TopicDeletionRequested,
    TopicsChanged,
    WritePartitionStates,
    handle,
)
from controller.zk_data import PartitionStateZnode
from protocol.topic_partition import TopicPartition

CONTROLLER_ID = 9
Assignments = dict[str, dict[int, tuple[int, ...]]]
CONTROLLER_EPOCH = 5
EPOCH_ZK_VERSION = 4


def live(
    *ids: int,
    epochs: Mapping[int, int] | None = None,
    incarnations: Mapping[int, int] | None = None,
) -> dict[int, LiveBroker]:
    """Broker i has epoch 100 + i unless overridden; its incarnation is its epoch (a first
    registration: a new epoch is a restart) unless overridden (a re-registration)."""
    epochs = epochs or {}
    incarnations = incarnations or {}
    brokers = {}
    for i in ids:
        epoch = epochs.get(i, 100 + i)
        brokers[i] = LiveBroker(i, f"host{i}", 9000 + i, None, epoch, incarnations.get(i, epoch))
    return brokers


def state(leader: int, leader_epoch: int, isr: Sequence[int], version: int = 4) -> PartitionState:
    return PartitionState(leader, leader_epoch, tuple(isr), 1, version)


def elect(
    brokers: dict[int, LiveBroker],
    assignments: Mapping[str, Mapping[int, tuple[int, ...]]],
    states: Mapping[TopicPartition, PartitionState] | None = None,
    deleting: frozenset[str] = frozenset(),
) -> tuple[ControllerContext, list[Effect]]:
    event = Elected(
        CONTROLLER_EPOCH, EPOCH_ZK_VERSION, brokers, assignments, states or {}, deleting
    )
    return handle(ControllerContext(CONTROLLER_ID), event, 0)


def of_type(effects: list[Effect], kind: type[Any]) -> list[Any]:
    return [e for e in effects if isinstance(e, kind)]


def leader_and_isr(effects: list[Effect]) -> dict[int, dict[TopicPartition, tuple[Any, ...]]]:
    """broker -> tp -> (leader, leader_epoch, isr, partition_epoch, is_new)."""
    out: dict[int, dict[TopicPartition, tuple[Any, ...]]] = {}
    for effect in of_type(effects, SendLeaderAndIsr):
        assert effect.request.controller_id == CONTROLLER_ID
        assert effect.request.controller_epoch == CONTROLLER_EPOCH
        per = out.setdefault(effect.broker_id, {})
        for s in effect.request.partition_states:
            per[(s.topic_name, s.partition_index)] = (
                s.leader,
                s.leader_epoch,
                s.isr,
                s.partition_epoch,
                s.is_new,
            )
    return out


def update_metadata(effects: list[Effect]) -> SendUpdateMetadata:
    (effect,) = of_type(effects, SendUpdateMetadata)
    assert isinstance(effect, SendUpdateMetadata)
    return effect


def logged(effects: list[Effect], event: str) -> list[Mapping[str, Any]]:
    return [e.fields for e in of_type(effects, LogEvent) if e.event == event]


# --- election and new topics ------------------------------------------------------------------


def test_elected_on_empty_cluster_sends_full_update_metadata_only() -> None:
    ctx, effects = elect(live(1, 2), {})
    assert ctx.active and ctx.controller_epoch == CONTROLLER_EPOCH
    assert ctx.epoch_zk_version == EPOCH_ZK_VERSION
    um = update_metadata(effects)
    assert um.broker_ids == (1, 2)
    assert um.request.controller_id == CONTROLLER_ID
    assert um.request.controller_epoch == CONTROLLER_EPOCH
    assert [(b.node_id, b.host, b.port) for b in um.request.live_brokers] == [
        (1, "host1", 9001),
        (2, "host2", 9002),
    ]
    assert um.request.partition_states == ()
    assert of_type(effects, SendLeaderAndIsr) == []


def test_new_topic_gets_states_leader_and_isr_and_metadata() -> None:
    ctx, _ = elect(live(1, 2), {})
    assignments = {"t": {0: (3, 1, 2), 1: (2, 1), 2: (3,)}}
    ctx, effects = handle(ctx, TopicsChanged(assignments), 0)

    (create,) = of_type(effects, CreatePartitionStates)
    assert create.states == {
        ("t", 0): PartitionStateZnode(1, 0, (1, 2), CONTROLLER_EPOCH),  # first live replica
        ("t", 1): PartitionStateZnode(2, 0, (2, 1), CONTROLLER_EPOCH),
    }  # t-2 has no live replica: no state yet (Kafka's NewPartition)
    assert ("t", 2) not in ctx.partition_states
    assert leader_and_isr(effects) == {
        1: {("t", 0): (1, 0, (1, 2), 0, True), ("t", 1): (2, 0, (2, 1), 0, True)},
        2: {("t", 0): (1, 0, (1, 2), 0, True), ("t", 1): (2, 0, (2, 1), 0, True)},
    }
    lai_to_2 = next(e for e in of_type(effects, SendLeaderAndIsr) if e.broker_id == 2)
    assert lai_to_2.request.broker_epoch == 102
    assert [b.node_id for b in lai_to_2.request.live_leaders] == [1, 2]
    um = update_metadata(effects).request
    assert [(s.topic_name, s.partition_index, s.offline_replicas) for s in um.partition_states] == [
        ("t", 0, (3,)),
        ("t", 1, ()),
    ]
    assert logged(effects, "partition leader elected")[0] == {
        "topic": "t",
        "partition": 0,
        "leader": 1,
        "leader_epoch": 0,
        "isr": [1, 2],
    }
    # The ZK writes come before any request.
    kinds = [type(e) for e in effects if not isinstance(e, LogEvent)]
    assert kinds.index(CreatePartitionStates) < kinds.index(SendLeaderAndIsr)

    # Broker 3 arrives: t-2 is created now; t-0 keeps its leader (the ISR grows via the leader).
    ctx, effects = handle(ctx, BrokersChanged(live(1, 2, 3)), 0)
    (create,) = of_type(effects, CreatePartitionStates)
    assert create.states == {("t", 2): PartitionStateZnode(3, 0, (3,), CONTROLLER_EPOCH)}
    assert of_type(effects, WritePartitionStates) == []
    assert leader_and_isr(effects)[3] == {
        ("t", 0): (1, 0, (1, 2), 0, False),
        ("t", 2): (3, 0, (3,), 0, True),
    }
    assert update_metadata(effects).broker_ids == (1, 2, 3)


def test_unchanged_topics_produce_no_effects() -> None:
    ctx, _ = elect(live(1), {"t": {0: (1,)}})
    assert handle(ctx, TopicsChanged({"t": {0: (1,)}}), 0) == (ctx, [])
    assert handle(ctx, BrokersChanged(live(1)), 0) == (ctx, [])


# --- broker changes (table) -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("replicas", "before", "live_before", "live_after", "expected"),
    [
        pytest.param(
            (1, 2), state(1, 0, (1, 2)), live(1, 2), live(2), (2, 1, (2,)), id="leader-lost"
        ),
        pytest.param(
            (1, 2), state(1, 0, (1, 2)), live(1, 2), live(1), (1, 1, (1,)), id="follower-lost"
        ),
        pytest.param((1,), state(1, 0, (1,)), live(1, 2), live(2), (-1, 1, (1,)), id="rf1-offline"),
        pytest.param(
            (1, 2), state(1, 3, (1, 2)), live(1, 2), live(), (-1, 4, (2,)), id="all-isr-lost"
        ),
        pytest.param((1,), state(-1, 1, (1,)), live(2), live(1, 2), (1, 2, (1,)), id="rf1-returns"),
        pytest.param(
            (1, 2),
            state(1, 0, (1, 2)),
            live(1, 2),
            live(1, 2, epochs={1: 500}),
            (2, 1, (2,)),
            id="bounced-leader-fails-then-returns",  # more in test_state_restarts.py
        ),
        pytest.param((1,), state(1, 0, (1,)), live(1), live(1, 3), None, id="unrelated-join"),
        pytest.param(
            (1, 2), state(-1, 3, (1,)), live(), live(2), None, id="out-of-sync-no-unclean"
        ),
    ],
)
def test_broker_changes(
    replicas: tuple[int, ...],
    before: PartitionState,
    live_before: dict[int, LiveBroker],
    live_after: dict[int, LiveBroker],
    expected: tuple[int, int, tuple[int, ...]] | None,
) -> None:
    ctx, _ = elect(live_before, {"t": {0: replicas}}, {("t", 0): before})
    assert ctx.partition_states[("t", 0)] == before  # nothing to fix at election
    ctx, effects = handle(ctx, BrokersChanged(live_after), 0)
    writes = of_type(effects, WritePartitionStates)
    if expected is None:
        assert writes == []
        assert ctx.partition_states[("t", 0)] == before
        return
    leader, leader_epoch, isr = expected
    (write,) = writes
    assert write.updates == {
        ("t", 0): (PartitionStateZnode(leader, leader_epoch, isr, CONTROLLER_EPOCH), 4)
    }
    assert ctx.partition_states[("t", 0)] == PartitionState(
        leader, leader_epoch, isr, CONTROLLER_EPOCH, 5
    )
    for broker_id in replicas:
        if broker_id in live_after:
            assert leader_and_isr(effects)[broker_id][("t", 0)] == (
                leader,
                leader_epoch,
                isr,
                5,  # the znode version after the CAS write
                False,
            )
    um = update_metadata(effects)
    assert um.broker_ids == tuple(sorted(live_after))
    assert [s.leader for s in um.request.partition_states] == [leader]


def test_broker_joined_and_left_are_logged_and_joiner_learns_all_its_replicas() -> None:
    assignments: Assignments = {"a": {0: (1, 2), 1: (2, 1)}, "b": {0: (1,)}}
    states = {("a", 0): state(1, 0, (1,)), ("a", 1): state(1, 0, (1,)), ("b", 0): state(1, 0, (1,))}
    ctx, _ = elect(live(1, 3), assignments, states)
    ctx, effects = handle(ctx, BrokersChanged(live(1, 2)), 0)
    assert logged(effects, "broker left") == [{"broker_id": 3}]
    assert [f["broker_id"] for f in logged(effects, "broker joined")] == [2]
    assert of_type(effects, WritePartitionStates) == []
    assert set(leader_and_isr(effects)) == {2}
    assert set(leader_and_isr(effects)[2]) == {("a", 0), ("a", 1)}


# --- election after failover ------------------------------------------------------------------


def test_elected_repairs_state_left_by_the_previous_controller() -> None:
    assignments: Assignments = {"t": {0: (1, 2), 1: (2,), 2: (1,)}, "gone": {0: (1,)}}
    states = {
        ("t", 0): state(2, 7, (1, 2)),
        ("t", 1): state(2, 0, (2,)),
        ("gone", 0): state(1, 0, (1,)),
    }
    ctx, effects = elect(live(1), assignments, states, deleting=frozenset({"gone"}))
    (write,) = of_type(effects, WritePartitionStates)
    assert write.updates == {
        ("t", 0): (PartitionStateZnode(1, 8, (1,), CONTROLLER_EPOCH), 4),
        ("t", 1): (PartitionStateZnode(-1, 1, (2,), CONTROLLER_EPOCH), 4),
    }
    (create,) = of_type(effects, CreatePartitionStates)
    assert set(create.states) == {("t", 2)}  # a partition the last controller never initialised
    assert set(leader_and_isr(effects)[1]) == {("t", 0), ("t", 2), ("gone", 0)}
    assert of_type(effects, DeleteTopicZnodes) == [DeleteTopicZnodes("gone")]
    assert "gone" not in ctx.assignments
    assert ("gone", 0) not in ctx.partition_states


# --- deletion ---------------------------------------------------------------------------------


def test_topic_deletion() -> None:
    assignments: Assignments = {"t": {0: (1, 2), 1: (2, 3)}, "keep": {0: (1,)}}
    states = {
        ("t", 0): state(1, 0, (1, 2)),
        ("t", 1): state(2, 0, (2,)),
        ("keep", 0): state(1, 0, (1,)),
    }
    ctx, _ = elect(live(1, 2), assignments, states)
    ctx, effects = handle(ctx, TopicDeletionRequested(frozenset({"t", "never-existed"})), 0)
    assert of_type(effects, DeleteTopicZnodes) == [
        DeleteTopicZnodes("never-existed"),
        DeleteTopicZnodes("t"),
    ]
    stops = {e.broker_id: e.request for e in of_type(effects, SendStopReplica)}
    assert set(stops) == {1, 2}  # broker 3 is not live
    assert stops[2].broker_epoch == 102
    assert [
        (p.partition_index, p.leader_epoch, p.delete_partition)
        for p in stops[2].topic_states[0].partition_states
    ] == [(0, -2, True), (1, -2, True)]
    um = update_metadata(effects).request
    assert um.deleted_topics == ("t",)
    assert [s.topic_name for s in um.partition_states] == ["keep"]
    assert set(ctx.assignments) == {"keep"}
    kinds = [type(e) for e in effects if not isinstance(e, LogEvent)]
    assert kinds.index(DeleteTopicZnodes) < kinds.index(SendStopReplica)

    # The topic's znode disappearing afterwards changes nothing more.
    assert handle(ctx, TopicsChanged({"keep": {0: (1,)}}), 0) == (ctx, [])


def test_topic_removed_from_zookeeper_is_reported_deleted() -> None:
    ctx, _ = elect(live(1), {"t": {0: (1,)}}, {("t", 0): state(1, 0, (1,))})
    ctx, effects = handle(ctx, TopicsChanged({}), 0)
    assert update_metadata(effects).request.deleted_topics == ("t",)
    assert ctx.partition_states == {}


# --- lifecycle --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "event",
    [
        BrokersChanged(live(1)),
        TopicsChanged({"t": {0: (1,)}}),
        TopicDeletionRequested(frozenset({"t"})),
        Resigned(),
    ],
)
def test_not_controller_ignores_events(event: Any) -> None:
    idle = ControllerContext(CONTROLLER_ID)
    assert handle(idle, event, 0) == (idle, [])


def test_resigned_forgets_everything() -> None:
    ctx, _ = elect(live(1), {"t": {0: (1,)}}, {("t", 0): state(1, 0, (1,))})
    ctx, effects = handle(ctx, Resigned(), 0)
    assert ctx == ControllerContext(CONTROLLER_ID) and effects == []
    assert not ctx.active


def test_handle_is_deterministic() -> None:
    assignments = {"t": {p: (1 + p % 3, 1 + (p + 1) % 3) for p in range(6)}}
    a = elect(live(1, 2, 3), assignments)
    b = elect(live(3, 2, 1), dict(reversed(list(assignments.items()))))
    assert a == b
    assert handle(a[0], BrokersChanged(live(2, 3)), 0) == handle(
        b[0], BrokersChanged(live(3, 2)), 0
    )
