"""Topics added, partitions added, overrides changed, and topic deletion."""

from __future__ import annotations

import dataclasses

from controller.core.broker_requests import (
    leader_and_isr_effects,
    update_metadata,
)
from controller.core.effects import (
    DeleteTopicZnodes,
    Effect,
    LogEvent,
    SendStopReplica,
)
from controller.core.events import (
    TopicDeletionRequested,
    TopicsChanged,
)
from controller.core.leader_choice import (
    NO_LEADER,
)
from controller.core.model import (
    DELETE_PARTITION_LEADER_EPOCH,
    ControllerContext,
)
from controller.core.reconcile import (
    reconcile,
)
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)

__all__ = ["on_deletion_requested", "on_topics_changed"]


def on_topics_changed(
    context: ControllerContext, event: TopicsChanged
) -> tuple[ControllerContext, list[Effect]]:
    removed = sorted(context.assignments.keys() - event.assignments.keys())
    assignments = {t: dict(parts) for t, parts in event.assignments.items()}
    overrides = dict(event.unclean_overrides)
    topic_ids = dict(event.topic_ids)
    # A topic id written since (the backfill of an older topic's znode) is news for brokers.
    same_topics = (
        not removed
        and assignments == {t: dict(p) for t, p in context.assignments.items()}
        and topic_ids == dict(context.topic_ids)
    )
    if same_topics and overrides == dict(context.unclean_overrides):
        return context, []
    states = {tp: s for tp, s in context.partition_states.items() if tp[0] not in removed}
    ctx = dataclasses.replace(
        context,
        assignments=assignments,
        partition_states=states,
        unclean_overrides=overrides,
        topic_ids=topic_ids,
    )
    # Kafka's TopicUncleanLeaderElectionEnable: a topic that just allowed unclean election
    # gets another election for its leaderless partitions.
    now_unclean = {
        t for t in assignments if ctx.unclean_enabled(t) and not context.unclean_enabled(t)
    }
    pending = [
        tp
        for tp in ctx.partitions()
        if tp not in ctx.partition_states
        or (tp[0] in now_unclean and ctx.partition_states[tp].leader == NO_LEADER)
    ]
    ctx, effects, changed, created = reconcile(ctx, pending, frozenset())
    if same_topics and not changed and not created:
        return ctx, effects  # only an override changed, and nothing came of it
    effects += leader_and_isr_effects(ctx, changed + created, created)
    effects.append(update_metadata(ctx, removed))
    return ctx, effects


def on_deletion_requested(
    context: ControllerContext, event: TopicDeletionRequested
) -> tuple[ControllerContext, list[Effect]]:
    if not event.topics:
        return context, []
    effects: list[Effect] = []
    deleted = sorted(t for t in event.topics if t in context.assignments)
    for topic in sorted(event.topics):
        effects.append(DeleteTopicZnodes(topic))
    stops: dict[int, dict[str, list[StopReplicaPartitionState]]] = {}
    for topic in deleted:
        effects.append(LogEvent("topic deleted", {"topic": topic}))
        for partition, replicas in sorted(context.assignments[topic].items()):
            for replica in replicas:
                if replica in context.live_brokers:
                    stops.setdefault(replica, {}).setdefault(topic, []).append(
                        StopReplicaPartitionState(
                            partition, DELETE_PARTITION_LEADER_EPOCH, delete_partition=True
                        )
                    )
    for broker_id, topics in sorted(stops.items()):
        request = StopReplicaRequest(
            controller_id=context.broker_id,
            controller_epoch=context.controller_epoch,
            broker_epoch=context.live_brokers[broker_id].epoch,
            topic_states=tuple(
                StopReplicaTopicState(t, tuple(parts)) for t, parts in sorted(topics.items())
            ),
        )
        effects.append(SendStopReplica(broker_id, request))
    if not deleted:
        return context, effects
    ctx = dataclasses.replace(
        context,
        assignments={t: p for t, p in context.assignments.items() if t not in deleted},
        topic_ids={t: i for t, i in context.topic_ids.items() if t not in deleted},
        partition_states={
            tp: s for tp, s in context.partition_states.items() if tp[0] not in deleted
        },
    )
    effects.append(update_metadata(ctx, deleted))
    return ctx, effects
