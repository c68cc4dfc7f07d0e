"""The controller core's one entry point: `handle(context, event, now_ms) -> (context,
effects)`. Pure and deterministic; docs/architecture.md ("The controller") lists its rules."""

from __future__ import annotations

from typing import assert_never

from controller.core.broker_requests import (
    leader_and_isr_effects,
    update_metadata,
)
from controller.core.brokers import (
    bounced_brokers,
    on_brokers_changed,
    on_controlled_shutdown,
    restarted_logs,
    restarted_members,
    shutdown_partitions,
)
from controller.core.effects import (
    AlterReassignmentsReply,
    ControlledShutdownReply,
    Effect,
)
from controller.core.events import (
    BrokersChanged,
    ControlledShutdownRequested,
    ControllerEvent,
    Elected,
    ElectLeadersRequested,
    IsrChanged,
    LeaderImbalanceCheck,
    ReassignmentsRequested,
    Resigned,
    TopicDeletionRequested,
    TopicsChanged,
)
from controller.core.isr_and_elections import (
    not_controller,
    on_elect_leaders,
    on_isr_changed,
    on_leader_imbalance_check,
)
from controller.core.model import (
    ControllerContext,
    replicas_of,
)
from controller.core.reassignment import (
    complete_reassignments,
    on_reassignments_requested,
    resume_reassignments,
)
from controller.core.reconcile import (
    reconcile,
)
from controller.core.topics import (
    on_deletion_requested,
    on_topics_changed,
)
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from protocol.topic_partition import TopicPartition

__all__ = ["handle", "on_elected", "states_to_read"]


def handle(
    context: ControllerContext, event: ControllerEvent, now_ms: int
) -> tuple[ControllerContext, list[Effect]]:
    """Apply one event; the effects are to be executed in order."""
    del now_ms  # no time-based decisions yet; kept so callers never need to change
    if isinstance(event, Resigned):
        idle = ControllerContext(
            context.broker_id,
            unclean_leader_election_enable=context.unclean_leader_election_enable,
        )
        return idle, []
    if isinstance(event, Elected):
        return on_elected(context, event)
    if not context.active:
        return context, _not_controller(event)
    match event:
        case BrokersChanged():
            return on_brokers_changed(context, event)
        case TopicsChanged():
            return on_topics_changed(context, event)
        case TopicDeletionRequested():
            return on_deletion_requested(context, event)
        case IsrChanged():
            ctx, effects = on_isr_changed(context, event)
            ctx, more = complete_reassignments(ctx)
            return ctx, effects + more
        case ReassignmentsRequested():
            return on_reassignments_requested(context, event)
        case ControlledShutdownRequested():
            return on_controlled_shutdown(context, event)
        case ElectLeadersRequested():
            return on_elect_leaders(context, event)
        case LeaderImbalanceCheck():
            return on_leader_imbalance_check(context, event)
        case _:
            assert_never(event)


def states_to_read(context: ControllerContext, event: ControllerEvent) -> list[TopicPartition]:
    """The partitions whose state znodes the shell reads, and hands over as `IsrChanged`,
    just before `event`. A leader writes its ISR changes to ZooKeeper itself and publishes
    them later (damped: Kafka's ReplicaManager.maybePropagateIsrChanges), so the context may
    hold an older ISR; a controlled shutdown deciding on it could keep the broker leading a
    partition whose ISR has grown back, an election refuse a preferred replica back in the
    ISR. Kafka's controller reads them first too (ZkPartitionStateMachine.
    doElectLeaderForPartitions, ZkReplicaStateMachine.doRemoveReplicasFromIsr), for the
    partitions it will act on (KafkaController.processReplicaLeaderElection's electable
    ones: a leader other than the preferred replica, or no live leader)."""
    if not context.active:
        return []
    if isinstance(event, ControlledShutdownRequested):
        if event.broker_id not in context.live_brokers:
            return []
        return shutdown_partitions(context, event.broker_id)
    if isinstance(event, ElectLeadersRequested):
        asked = context.partitions() if event.partitions is None else sorted(event.partitions)
        return [tp for tp in asked if _electable(context, tp, event.election_type)]
    return []


def _electable(context: ControllerContext, tp: TopicPartition, election: ElectionType) -> bool:
    state = context.partition_states.get(tp)
    if state is None:
        return False
    if election == ElectionType.PREFERRED:
        return state.leader not in replicas_of(context, tp)[:1]
    return state.leader not in context.live_brokers


def _not_controller(event: ControllerEvent) -> list[Effect]:
    """A request that reached a broker which is not (or no longer) the controller."""
    match event:
        case ControlledShutdownRequested():
            return [ControlledShutdownReply(event.broker_id, ErrorCode.NOT_CONTROLLER)]
        case ElectLeadersRequested():
            return [not_controller(event)]
        case ReassignmentsRequested():
            return [AlterReassignmentsReply(dict.fromkeys(event.targets, ErrorCode.NOT_CONTROLLER))]
        case _:
            return []


def on_elected(
    context: ControllerContext, event: Elected
) -> tuple[ControllerContext, list[Effect]]:
    states = {
        tp: s
        for tp, s in event.partition_states.items()
        if tp[1] in event.assignments.get(tp[0], {})
    }
    # A re-load within our own term keeps the brokers still shutting down (same registration).
    same_term = context.controller_epoch == event.controller_epoch
    bounced = bounced_brokers(context.live_brokers, event.brokers) if same_term else frozenset()
    shutting_down = frozenset(
        b
        for b in context.shutting_down
        if same_term and b in event.brokers and b in context.live_brokers and b not in bounced
    )
    ctx = ControllerContext(
        broker_id=context.broker_id,
        controller_epoch=event.controller_epoch,
        epoch_zk_version=event.epoch_zk_version,
        live_brokers=dict(event.brokers),
        assignments={t: dict(parts) for t, parts in event.assignments.items()},
        partition_states=states,
        shutting_down=shutting_down,
        unclean_leader_election_enable=context.unclean_leader_election_enable,
        unclean_overrides=dict(event.unclean_overrides),
        topic_ids=dict(event.topic_ids),
    )
    restarted = {tp: restarted_members(ctx.live_brokers, s, bounced) for tp, s in states.items()}
    ctx, effects, _changed, created = reconcile(
        ctx, ctx.partitions(), returning=frozenset(), restarted=restarted
    )
    effects += restarted_logs(restarted)
    everything = ctx.partitions()
    effects += leader_and_isr_effects(ctx, everything, created)
    effects.append(update_metadata(ctx, ()))
    to_delete = event.topics_to_delete
    if to_delete:
        ctx, more = on_deletion_requested(ctx, TopicDeletionRequested(to_delete))
        effects += more
    ctx, more = resume_reassignments(ctx, event)
    return ctx, effects + more
