"""Partition reassignment (KIP-455 semantics in ZooKeeper mode): RS = target + original until
the target is in the ISR, then RS = target; the plan lives in /admin/reassign_partitions."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping

from controller.core.broker_requests import (
    delete_replicas,
    leader_and_isr_effects,
    leader_log,
    reassignment_log,
    update_metadata,
)
from controller.core.effects import (
    AlterReassignmentsReply,
    Effect,
    WritePartitionStates,
    WriteReassignmentPlan,
    WriteTopicAssignment,
)
from controller.core.events import (
    Elected,
    ReassignmentsRequested,
)
from controller.core.leader_choice import (
    NO_LEADER,
    reassign_leader,
)
from controller.core.model import (
    Assignments,
    ControllerContext,
    PartitionState,
    Reassignment,
    online_replicas,
    replicas_of,
)
from controller.zk_data import PartitionStateZnode
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

__all__ = ["complete_reassignments", "on_reassignments_requested", "resume_reassignments"]


def on_reassignments_requested(
    context: ControllerContext, event: ReassignmentsRequested
) -> tuple[ControllerContext, list[Effect]]:
    """Start (or replace, or cancel) reassignments: RS = target + original in the topic znode,
    the leader epoch bumped so every replica (the adding ones too) learns the new RS; the
    adding replicas then follow and join the ISR, and `complete_reassignments` finishes."""
    results: dict[TopicPartition, ErrorCode] = {}
    started: dict[TopicPartition, Reassignment] = {}
    cancelled: list[TopicPartition] = []
    for tp, target in sorted(event.targets.items()):
        if tp[1] not in context.assignments.get(tp[0], {}) or tp not in context.partition_states:
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        elif target is None:
            ongoing = tp in context.reassignments
            results[tp] = ErrorCode.NONE if ongoing else ErrorCode.NO_REASSIGNMENT_IN_PROGRESS
            if ongoing:
                cancelled.append(tp)
        elif not _valid_target(target, context.live_brokers.keys()):
            results[tp] = ErrorCode.INVALID_REPLICA_ASSIGNMENT
        else:
            results[tp] = ErrorCode.NONE
            previous = context.reassignments.get(tp)
            original = previous.original if previous else replicas_of(context, tp)
            if previous is None and target == original:
                continue  # already there: nothing to move
            started[tp] = Reassignment(tuple(target), original, event.throttle_bytes_per_sec)
    ctx, effects = _start_reassignments(context, started)
    if cancelled:
        ctx, more = _finish_reassignments(ctx, cancelled, cancel=True)
        effects += more
    ctx, more = complete_reassignments(ctx)
    effects += more
    effects.append(AlterReassignmentsReply(results))
    return ctx, effects


def _valid_target(target: tuple[int, ...], live: Iterable[int]) -> bool:
    """Kafka's rules: non-empty, no duplicates, every replica a registered broker."""
    known = set(live)
    return bool(target) and len(set(target)) == len(target) and all(r in known for r in target)


def resume_reassignments(
    ctx: ControllerContext, event: Elected
) -> tuple[ControllerContext, list[Effect]]:
    """A new controller (or a re-load) picks up the plan where the last one left it."""
    started: dict[TopicPartition, Reassignment] = {}
    done: dict[TopicPartition, tuple[int, ...]] = {}
    for tp, target in sorted(event.reassignment_targets.items()):
        if tp[1] not in ctx.assignments.get(tp[0], {}) or tp not in ctx.partition_states:
            continue  # the topic is gone: the plan entry is dropped below
        current = replicas_of(ctx, tp)
        original = event.reassignment_originals.get(tp, current)
        if current == target and not set(original) <= set(target):
            done[tp] = original  # finished (the originals left), but the plan was not cleaned up
        elif current != target or original != target:
            # Phase one, or a reordering or an addition (RS = target from the start): it is
            # complete only once the target is in the ISR (Kafka's isReassignmentComplete).
            throttle = event.reassignment_throttles.get(tp, -1)
            started[tp] = Reassignment(tuple(target), tuple(original), throttle)
    ctx = dataclasses.replace(ctx, reassignments={})
    ctx, effects = _start_reassignments(ctx, started)
    for tp, original in sorted(done.items()):
        removed = [r for r in original if r not in replicas_of(ctx, tp)]
        effects += delete_replicas(ctx, tp, removed)
    if set(event.reassignment_targets) != set(ctx.reassignments):
        effects.append(WriteReassignmentPlan(dict(ctx.reassignments)))
    ctx, more = complete_reassignments(ctx)
    return ctx, effects + more


def _start_reassignments(
    ctx: ControllerContext, started: Mapping[TopicPartition, Reassignment]
) -> tuple[ControllerContext, list[Effect]]:
    """Phase one for `started`: plan, RS = target + original, a new leader epoch."""
    if not started:
        return ctx, []
    reassignments = {**ctx.reassignments, **started}
    assignments = {t: dict(parts) for t, parts in ctx.assignments.items()}
    states = dict(ctx.partition_states)
    updates: dict[TopicPartition, tuple[PartitionStateZnode, int]] = {}
    effects: list[Effect] = [WriteReassignmentPlan(reassignments)]
    dropped: dict[TopicPartition, list[int]] = {}
    for tp, reassignment in sorted(started.items()):
        electable = online_replicas(ctx, tp) - ctx.shutting_down
        rs = reassignment.replicas
        # A replaced target: replicas of the old one outside the new RS leave it.
        dropped[tp] = [r for r in assignments[tp[0]][tp[1]] if r not in rs]
        assignments[tp[0]][tp[1]] = rs
        current = states[tp]
        isr = tuple(r for r in current.isr if r in rs) or rs[:1]
        leader = current.leader
        if leader != NO_LEADER and leader not in isr:
            leader = reassign_leader(rs, isr, electable) or NO_LEADER
        new = PartitionState(
            leader,
            current.leader_epoch + 1,
            isr,
            ctx.controller_epoch,
            current.partition_epoch + 1,
        )
        states[tp] = new
        updates[tp] = (new.znode(), current.partition_epoch)
        effects.append(reassignment_log("partition reassignment started", tp, reassignment))
    effects += _topic_writes(ctx.assignments, assignments, {t for t, _ in started})
    effects.insert(1, WritePartitionStates(updates))
    ctx = dataclasses.replace(
        ctx, assignments=assignments, partition_states=states, reassignments=reassignments
    )
    effects += leader_and_isr_effects(ctx, sorted(started), ())
    for tp in sorted(started):
        effects += delete_replicas(ctx, tp, dropped[tp])
    effects.append(update_metadata(ctx, ()))
    return ctx, effects


def complete_reassignments(ctx: ControllerContext) -> tuple[ControllerContext, list[Effect]]:
    """Phase two for every reassignment whose target replicas are all in the ISR; plan
    entries of partitions that no longer exist are dropped."""
    gone = [
        tp
        for tp in ctx.reassignments
        if tp[1] not in ctx.assignments.get(tp[0], {}) or tp not in ctx.partition_states
    ]
    ready = sorted(
        tp
        for tp, r in ctx.reassignments.items()
        if tp not in gone and set(r.target) <= set(ctx.partition_states[tp].isr)
    )
    if gone and not ready:
        kept = {tp: r for tp, r in ctx.reassignments.items() if tp not in gone}
        ctx = dataclasses.replace(ctx, reassignments=kept)
        return ctx, [WriteReassignmentPlan(kept)]
    if gone:
        kept = {tp: r for tp, r in ctx.reassignments.items() if tp not in gone}
        ctx = dataclasses.replace(ctx, reassignments=kept)
    return _finish_reassignments(ctx, ready, cancel=False)


def _finish_reassignments(
    ctx: ControllerContext, partitions: list[TopicPartition], *, cancel: bool
) -> tuple[ControllerContext, list[Effect]]:
    """RS = target (or, cancelling, the original): a leader from it (Kafka's Reassign
    strategy), the ISR shrunk to it, a new leader epoch; the partition state first, then
    the topic znode, then the plan (so a failover in between redoes this step); then
    LeaderAndIsr to the remaining replicas and StopReplica (delete) to the removed ones."""
    if not partitions:
        return ctx, []
    assignments = {t: dict(parts) for t, parts in ctx.assignments.items()}
    states = dict(ctx.partition_states)
    reassignments = dict(ctx.reassignments)
    updates: dict[TopicPartition, tuple[PartitionStateZnode, int]] = {}
    removed: dict[TopicPartition, list[int]] = {}
    logs: list[Effect] = []
    for tp in partitions:
        reassignment = reassignments.pop(tp)
        electable = online_replicas(ctx, tp) - ctx.shutting_down
        final = reassignment.original if cancel else reassignment.target
        current = states[tp]
        isr = tuple(r for r in current.isr if r in final)
        leader = current.leader
        if leader not in final or leader not in isr or leader not in electable:
            leader = reassign_leader(final, isr, electable) or NO_LEADER
        if not isr:  # cancelling with no original replica in sync: never an empty ISR
            isr = final[:1]
        new = PartitionState(
            leader, current.leader_epoch + 1, isr, ctx.controller_epoch, current.partition_epoch + 1
        )
        states[tp] = new
        updates[tp] = (new.znode(), current.partition_epoch)
        removed[tp] = [r for r in assignments[tp[0]][tp[1]] if r not in final]
        assignments[tp[0]][tp[1]] = final
        event = "partition reassignment cancelled" if cancel else "partition reassignment completed"
        logs.append(reassignment_log(event, tp, reassignment))
        logs.append(leader_log(tp, new))
    effects: list[Effect] = [WritePartitionStates(updates)]
    effects += _topic_writes(ctx.assignments, assignments, {t for t, _ in partitions})
    effects.append(WriteReassignmentPlan(reassignments))
    effects += logs
    ctx = dataclasses.replace(
        ctx, assignments=assignments, partition_states=states, reassignments=reassignments
    )
    effects += leader_and_isr_effects(ctx, partitions, ())
    for tp in partitions:
        effects += delete_replicas(ctx, tp, removed[tp])
    effects.append(update_metadata(ctx, ()))
    return ctx, effects


def _topic_writes(old: Assignments, new: Assignments, topics: Iterable[str]) -> list[Effect]:
    return [
        WriteTopicAssignment(t, dict(old[t]), dict(new[t]))
        for t in sorted(set(topics))
        if dict(old[t]) != dict(new[t])
    ]
