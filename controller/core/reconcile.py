"""Bring partitions in line with the live brokers: create new ones, elect leaders for offline
ones, drop departed followers from ISRs (Kafka's PartitionStateMachine and
ReplicaStateMachine, ZooKeeper mode)."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from controller.core.broker_requests import (
    leader_log,
    unclean_log,
)
from controller.core.effects import (
    CreatePartitionStates,
    Effect,
    WritePartitionStates,
)
from controller.core.leader_choice import (
    NO_LEADER,
    LeaderAndIsr,
    elect_offline,
    remove_replicas_from_isr,
)
from controller.core.model import (
    ControllerContext,
    PartitionState,
    online_replicas,
    replicas_of,
)
from controller.zk_data import PartitionStateZnode
from protocol.topic_partition import TopicPartition

__all__ = ["reconcile"]


def reconcile(
    ctx: ControllerContext,
    partitions: Iterable[TopicPartition],
    returning: frozenset[int],
    restarted: Mapping[TopicPartition, frozenset[int]] | None = None,
) -> tuple[ControllerContext, list[Effect], list[TopicPartition], list[TopicPartition]]:
    """Bring `partitions` in line with the live brokers. `restarted[tp]`: live brokers that
    restarted unnoticed; for that partition they fail first, then return. Returns the new
    context, the ZK write effects (plus log events), the updated partitions and the created
    ones."""
    states = dict(ctx.partition_states)
    creates: dict[TopicPartition, PartitionStateZnode] = {}
    updates: dict[TopicPartition, tuple[PartitionStateZnode, int]] = {}
    logs: list[Effect] = []
    for tp in partitions:
        live = online_replicas(ctx, tp)  # an offline replica (KIP-112) is not live for tp
        electable = live - ctx.shutting_down  # Kafka: a shutting-down broker is not "online"
        assignment = replicas_of(ctx, tp)
        current = states.get(tp)
        if current is None:
            live_replicas = tuple(r for r in assignment if r in electable)
            if not live_replicas:
                continue  # stays new until a replica is live (Kafka's NewPartition)
            new = PartitionState(live_replicas[0], 0, live_replicas, ctx.controller_epoch, 0)
            states[tp] = new
            creates[tp] = new.znode()
        else:
            before = current.leader_and_isr()
            failed = restarted.get(tp, frozenset()) if restarted is not None else frozenset()
            after = _after_restarts(before, failed)
            if after.leader in live:
                after = remove_replicas_from_isr(after, [r for r in after.isr if r not in live])
                if after == before and current.leader in returning:
                    after = dataclasses.replace(before, leader_epoch=before.leader_epoch + 1)
            else:
                unclean = ctx.unclean_enabled(tp[0])
                after = elect_offline(after, assignment, electable, unclean=unclean)
                if after.leader != NO_LEADER and after.leader not in before.isr:
                    logs.append(unclean_log(tp, before, after))
            if after == before:
                continue
            # One write for the whole change, so one new leader epoch is enough.
            after = dataclasses.replace(after, leader_epoch=before.leader_epoch + 1)
            new = PartitionState(
                after.leader,
                after.leader_epoch,
                after.isr,
                ctx.controller_epoch,
                current.partition_epoch + 1,
            )
            states[tp] = new
            updates[tp] = (new.znode(), current.partition_epoch)
        logs.append(leader_log(tp, new))
    effects: list[Effect] = []
    if creates:
        effects.append(CreatePartitionStates(creates))
    if updates:
        effects.append(WritePartitionStates(updates))
    effects += logs
    ctx = dataclasses.replace(ctx, partition_states=states)
    return ctx, effects, sorted(updates), sorted(creates)


def _after_restarts(before: LeaderAndIsr, restarted: frozenset[int]) -> LeaderAndIsr:
    """Kafka's onBrokerFailure for brokers that restarted (a bounce, or a restart no
    controller saw): they lose the leadership and leave the ISR, all but a last member.
    Their startup follows in `reconcile`: an offline election among the live ISR, so a
    leader that restarted leads again only as the last ISR member, in a new leader epoch."""
    failed = sorted(restarted & {before.leader, *before.isr})
    if not failed:
        return before
    return remove_replicas_from_isr(before, failed)
