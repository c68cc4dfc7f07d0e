"""Offline replicas (KIP-112): a broker whose log dir failed lists the partitions it lost in its
registration; the controller treats those replicas as gone, for those partitions only: a
leader there is replaced by another live ISR member (or none), the replica leaves the ISR
(never emptying it), and no election picks it while it is listed. Pure: events in, context
and effects out."""

from __future__ import annotations

import dataclasses

from controller.core import (
    BrokersChanged,
    ElectLeadersRequested,
    LiveBroker,
    SendUpdateMetadata,
    WritePartitionStates,
    handle,
)
from controller.zk_data import PartitionStateZnode
from protocol.messages.elect_leaders import ElectionType
from protocol.topic_partition import TopicPartition
from tests.unit.controller.test_state import (
    CONTROLLER_EPOCH,
    elect,
    leader_and_isr,
    live,
    logged,
    of_type,
    state,
)

T0 = TopicPartition("t", 0)
T1 = TopicPartition("t", 1)
ASSIGNMENTS = {"t": {0: (1, 2, 3), 1: (2, 1, 3)}}


def offline(brokers: dict[int, LiveBroker], broker_id: int, *tps: TopicPartition) -> None:
    brokers[broker_id] = dataclasses.replace(brokers[broker_id], offline_partitions=frozenset(tps))


def test_a_leader_whose_replica_goes_offline_is_replaced_for_that_partition_only() -> None:
    ctx, _ = elect(
        live(1, 2, 3), ASSIGNMENTS, {T0: state(1, 3, (1, 2, 3)), T1: state(2, 5, (2, 1, 3))}
    )
    now = live(1, 2, 3)
    offline(now, 1, T0)
    ctx, effects = handle(ctx, BrokersChanged(now), 0)

    (write,) = of_type(effects, WritePartitionStates)
    assert write.updates == {T0: (PartitionStateZnode(2, 4, (2, 3), CONTROLLER_EPOCH), 4)}
    assert ctx.partition_states[T1].isr == (2, 1, 3)  # broker 1's copy of t-1 is fine
    assert ctx.live_brokers[1].offline_partitions == {T0}
    assert logged(effects, "replicas offline (log dir failure)") == [
        {"broker_id": 1, "partitions": ["t-0"]}
    ]
    sent = leader_and_isr(effects)
    assert {b: sorted(tps) for b, tps in sent.items()} == {1: [T0], 2: [T0], 3: [T0]}
    (metadata,) = of_type(effects, SendUpdateMetadata)
    by_tp = {(s.topic_name, s.partition_index): s for s in metadata.request.partition_states}
    assert by_tp[T0].offline_replicas == (1,)
    assert by_tp[T1].offline_replicas == ()


def test_a_follower_whose_replica_goes_offline_leaves_the_isr() -> None:
    ctx, _ = elect(live(1, 2, 3), ASSIGNMENTS, {T0: state(1, 3, (1, 2, 3))})
    now = live(1, 2, 3)
    offline(now, 3, T0, T1)
    ctx, _ = handle(ctx, BrokersChanged(now), 0)
    assert ctx.partition_states[T0].leader == 1
    assert ctx.partition_states[T0].isr == (1, 2)
    assert ctx.partition_states[T0].leader_epoch == 4


def test_the_last_isr_member_offline_leaves_the_partition_leaderless() -> None:
    ctx, _ = elect(live(1, 2, 3), ASSIGNMENTS, {T0: state(1, 3, (1,))})
    now = live(1, 2, 3)
    offline(now, 1, T0)
    ctx, _ = handle(ctx, BrokersChanged(now), 0)
    assert ctx.partition_states[T0].leader == -1  # unclean election is off
    assert ctx.partition_states[T0].isr == (1,)  # never emptied: it remembers who had the data


def test_a_new_controller_reads_offline_replicas_from_the_registrations() -> None:
    brokers = live(1, 2, 3)
    offline(brokers, 1, T0)
    ctx, effects = elect(brokers, ASSIGNMENTS, {T0: state(1, 3, (1, 2, 3))})
    assert ctx.partition_states[T0].leader == 2
    assert ctx.partition_states[T0].isr == (2, 3)
    (write,) = of_type(effects, WritePartitionStates)
    assert T0 in write.updates


def test_a_preferred_election_does_not_pick_an_offline_replica() -> None:
    ctx, _ = elect(live(1, 2, 3), ASSIGNMENTS, {T0: state(2, 3, (2, 3))})
    now = live(1, 2, 3)
    offline(now, 1, T0)
    ctx, _ = handle(ctx, BrokersChanged(now), 0)
    # Even were broker 1 in the ISR, it could not lead t-0 while its replica is offline.
    ctx = dataclasses.replace(
        ctx, partition_states={**ctx.partition_states, T0: state(2, 3, (1, 2, 3))}
    )
    ctx, _ = handle(ctx, ElectLeadersRequested(ElectionType.PREFERRED, (T0,)), 0)
    assert ctx.partition_states[T0].leader == 2


def test_a_restarted_broker_brings_its_replicas_back() -> None:
    """A new incarnation registers without offline partitions: it is a bounce, and its
    replicas may rejoin (the followers catch up first, as after any restart)."""
    brokers = live(1, 2, 3)
    offline(brokers, 1, T0)
    ctx, _ = elect(brokers, ASSIGNMENTS, {T0: state(2, 4, (2, 3))})
    ctx, effects = handle(ctx, BrokersChanged(live(1, 2, 3, epochs={1: 500})), 0)
    assert ctx.live_brokers[1].offline_partitions == frozenset()
    assert T0 in leader_and_isr(effects)[1]
    assert ctx.partition_states[T0].leader == 2  # it must catch up before it leads again
