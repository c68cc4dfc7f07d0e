"""Leaders' ISR changes, and leader elections on demand: preferred, unclean, and the
automatic leader rebalance."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable

from controller.core.broker_requests import (
    leader_and_isr_effects,
    leader_log,
    unclean_log,
    update_metadata,
)
from controller.core.brokers import restarted_logs, restarted_members
from controller.core.effects import (
    PREFERRED_REPLICA_IMBALANCE,
    Effect,
    ElectLeadersReply,
    LogEvent,
    WritePartitionStates,
)
from controller.core.events import (
    ElectLeadersRequested,
    IsrChanged,
    LeaderImbalanceCheck,
)
from controller.core.leader_balance import leader_imbalance
from controller.core.leader_choice import (
    NO_LEADER,
    LeaderAndIsr,
    elect_offline,
    preferred_replica_leader,
)
from controller.core.model import (
    ControllerContext,
    PartitionState,
    online_replicas,
    replicas_of,
)
from controller.core.reconcile import reconcile
from controller.zk_data import PartitionStateZnode
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from protocol.topic_partition import TopicPartition

__all__ = [
    "elect_leaders",
    "not_controller",
    "on_elect_leaders",
    "on_isr_changed",
    "on_leader_imbalance_check",
]


def on_isr_changed(
    context: ControllerContext, event: IsrChanged
) -> tuple[ControllerContext, list[Effect]]:
    """Take the leaders' ISR changes (no ZooKeeper write: the leader already wrote them)."""
    states = dict(context.partition_states)
    logs: list[Effect] = []
    taken: list[TopicPartition] = []
    for tp, new in sorted(event.states.items()):
        current = states.get(tp)
        if current is None or new == current or _older(new, current):
            continue  # deleted meanwhile, nothing new, or a read racing a newer election
        states[tp] = new
        taken.append(tp)
        logs.append(
            LogEvent(
                "isr changed",
                {
                    "topic": tp[0],
                    "partition": tp[1],
                    "leader": new.leader,
                    "leader_epoch": new.leader_epoch,
                    "isr": list(new.isr),
                    "partition_epoch": new.partition_epoch,
                },
            )
        )
    if not taken:
        return context, []
    ctx = dataclasses.replace(context, partition_states=states)
    # The leader wrote its ISR before this controller handled what happened since: Kafka's
    # controller reads the ISR from ZooKeeper when a broker fails, this one holds it in memory.
    # A member that left, or restarted, after the write leaves the ISR now, as onBrokerFailure
    # would have taken it out: else it could be elected without the records its crash lost.
    restarted = {tp: restarted_members(ctx.live_brokers, states[tp], frozenset()) for tp in taken}
    ctx, writes, changed, created = reconcile(ctx, taken, frozenset(), restarted)
    effects: list[Effect] = [*logs, *writes, *restarted_logs(restarted)]
    effects += leader_and_isr_effects(ctx, changed, created)
    effects.append(update_metadata(ctx, ()))
    return ctx, effects


def _older(read: PartitionState, known: PartitionState) -> bool:
    if read.leader_epoch != known.leader_epoch:
        return read.leader_epoch < known.leader_epoch
    return read.partition_epoch < known.partition_epoch


def not_controller(event: ElectLeadersRequested) -> ElectLeadersReply:
    return ElectLeadersReply(dict.fromkeys(event.partitions or (), ErrorCode.NOT_CONTROLLER))


def on_elect_leaders(
    context: ControllerContext, event: ElectLeadersRequested
) -> tuple[ControllerContext, list[Effect]]:
    partitions = context.partitions() if event.partitions is None else event.partitions
    ctx, effects, results = elect_leaders(context, event.election_type, partitions)
    effects.append(ElectLeadersReply(results))
    return ctx, effects


def on_leader_imbalance_check(
    context: ControllerContext, event: LeaderImbalanceCheck
) -> tuple[ControllerContext, list[Effect]]:
    states = context.partition_states
    found = leader_imbalance(
        context.assignments,
        {tp: s.leader for tp, s in states.items()},
        {tp: s.isr for tp, s in states.items()},
        context.live_brokers.keys(),
        context.shutting_down,
        event.percentage,
    )
    effects: list[Effect] = [
        LogEvent(
            PREFERRED_REPLICA_IMBALANCE,
            {
                "preferred_replica_imbalance_count": found.imbalance_count,
                "imbalanced_brokers": {
                    str(b): round(r, 3) for b, r in sorted(found.ratios.items()) if r > 0
                },
                "partitions_to_elect": len(found.to_elect),
            },
        )
    ]
    # As Kafka: partitions being reassigned are left alone until the move is done.
    to_elect = [tp for tp in found.to_elect if tp not in context.reassignments]
    if not to_elect:
        return context, effects
    ctx, more, _results = elect_leaders(context, ElectionType.PREFERRED, to_elect)
    return ctx, effects + more


def elect_leaders(
    ctx: ControllerContext,
    election_type: ElectionType,
    partitions: Iterable[TopicPartition],
) -> tuple[ControllerContext, list[Effect], dict[TopicPartition, ErrorCode]]:
    """Preferred or unclean elections for `partitions`: the new context, the effects (one
    write, logs, LeaderAndIsr, UpdateMetadata) and each partition's outcome."""
    states = dict(ctx.partition_states)
    updates: dict[TopicPartition, tuple[PartitionStateZnode, int]] = {}
    logs: list[Effect] = []
    results: dict[TopicPartition, ErrorCode] = {}
    for tp in sorted(set(partitions)):
        live = online_replicas(ctx, tp)
        electable = live - ctx.shutting_down
        current = states.get(tp)
        if tp[1] not in ctx.assignments.get(tp[0], {}):
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if current is None:  # not created yet: no replica has been live
            results[tp] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            continue
        assignment = replicas_of(ctx, tp)
        before = current.leader_and_isr()
        if election_type == ElectionType.PREFERRED:
            code, after = _preferred(before, assignment, electable)
        else:
            code, after = _unclean(before, assignment, live, electable)
        results[tp] = code
        if after is None:
            continue
        new = PartitionState(
            after.leader,
            after.leader_epoch,
            after.isr,
            ctx.controller_epoch,
            current.partition_epoch + 1,
        )
        states[tp] = new
        updates[tp] = (new.znode(), current.partition_epoch)
        if after.leader not in before.isr:
            logs.append(unclean_log(tp, before, after))
        logs.append(leader_log(tp, new))
    if not updates:
        return ctx, logs, results
    ctx = dataclasses.replace(ctx, partition_states=states)
    effects: list[Effect] = [WritePartitionStates(updates), *logs]
    effects += leader_and_isr_effects(ctx, sorted(updates), ())
    effects.append(update_metadata(ctx, ()))
    return ctx, effects, results


def _preferred(
    before: LeaderAndIsr, assignment: tuple[int, ...], electable: Iterable[int]
) -> tuple[ErrorCode, LeaderAndIsr | None]:
    if assignment and before.leader == assignment[0]:
        return ErrorCode.ELECTION_NOT_NEEDED, None
    leader = preferred_replica_leader(assignment, before.isr, set(electable))
    if leader is None:
        return ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE, None
    return ErrorCode.NONE, LeaderAndIsr(leader, before.leader_epoch + 1, before.isr)


def _unclean(
    before: LeaderAndIsr,
    assignment: tuple[int, ...],
    live: Iterable[int],
    electable: Iterable[int],
) -> tuple[ErrorCode, LeaderAndIsr | None]:
    """Kafka: an unclean election is only for a partition without a live leader."""
    if before.leader in set(live):
        return ErrorCode.ELECTION_NOT_NEEDED, None
    after = elect_offline(before, assignment, set(electable), unclean=True)
    if after.leader == NO_LEADER:
        return ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, None
    return ErrorCode.NONE, after
