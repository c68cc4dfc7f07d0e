"""The requests the controller sends to brokers (LeaderAndIsr, UpdateMetadata, StopReplica),
built from the context, and the log events that go with elections."""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from controller.core.effects import (
    LEADER_ELECTED,
    UNCLEAN_LEADER_ELECTION,
    Effect,
    LogEvent,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
)
from controller.core.leader_choice import (
    NO_LEADER,
    LeaderAndIsr,
)
from controller.core.model import (
    ControllerContext,
    PartitionState,
    Reassignment,
    online_replicas,
    replicas_of,
)
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from protocol.messages.update_metadata import (
    UpdateMetadataPartitionState,
    UpdateMetadataRequest,
    UpdateMetadataTopicId,
)
from protocol.topic_id import NO_TOPIC_ID
from protocol.topic_partition import TopicPartition

__all__ = [
    "delete_replicas",
    "leader_and_isr_effects",
    "leader_log",
    "reassignment_log",
    "stop_replicas",
    "unclean_log",
    "update_metadata",
]


def leader_and_isr_effects(
    ctx: ControllerContext,
    partitions: Iterable[TopicPartition],
    new_partitions: Iterable[TopicPartition],
    only_brokers: set[int] | None = None,
    excluded: Mapping[TopicPartition, int] | None = None,
) -> list[Effect]:
    """One LeaderAndIsr per live replica broker, covering its partitions among `partitions`
    (but not to `excluded[tp]`)."""
    fresh = set(new_partitions)
    per_broker: dict[int, list[LeaderAndIsrPartitionState]] = {}
    for tp in sorted(set(partitions)):
        state = ctx.partition_states.get(tp)
        if state is None:
            continue
        replicas = replicas_of(ctx, tp)
        reassignment = ctx.reassignments.get(tp)
        item = LeaderAndIsrPartitionState(
            topic_name=tp[0],
            partition_index=tp[1],
            controller_epoch=state.controller_epoch,
            leader=state.leader,
            leader_epoch=state.leader_epoch,
            isr=state.isr,
            partition_epoch=state.partition_epoch,
            replicas=replicas,
            is_new=tp in fresh,
            adding_replicas=reassignment.adding if reassignment else (),
            removing_replicas=reassignment.removing if reassignment else (),
            replication_throttle_bytes_per_sec=(
                reassignment.throttle_bytes_per_sec if reassignment else -1
            ),
            topic_id=ctx.topic_ids.get(tp[0], NO_TOPIC_ID),
        )
        skip = None if excluded is None else excluded.get(tp)
        for replica in replicas:
            if replica == skip or replica not in ctx.live_brokers:
                continue
            if only_brokers is None or replica in only_brokers:
                per_broker.setdefault(replica, []).append(item)
    effects: list[Effect] = []
    for broker_id, items in sorted(per_broker.items()):
        leaders = sorted({i.leader for i in items if i.leader in ctx.live_brokers})
        request = LeaderAndIsrRequest(
            controller_id=ctx.broker_id,
            controller_epoch=ctx.controller_epoch,
            broker_epoch=ctx.live_brokers[broker_id].epoch,
            partition_states=tuple(items),
            live_leaders=tuple(ctx.live_brokers[b].endpoint() for b in leaders),
        )
        effects.append(SendLeaderAndIsr(broker_id, request))
    return effects


def stop_replicas(
    ctx: ControllerContext, broker_id: int, partitions: Iterable[TopicPartition]
) -> SendStopReplica:
    """StopReplica without deletion: stop fetching these partitions, keep their logs."""
    topics: dict[str, list[StopReplicaPartitionState]] = {}
    for topic, partition in sorted(partitions):
        epoch = ctx.partition_states[TopicPartition(topic, partition)].leader_epoch
        topics.setdefault(topic, []).append(
            StopReplicaPartitionState(partition, epoch, delete_partition=False)
        )
    request = StopReplicaRequest(
        controller_id=ctx.broker_id,
        controller_epoch=ctx.controller_epoch,
        broker_epoch=ctx.live_brokers[broker_id].epoch,
        topic_states=tuple(
            StopReplicaTopicState(t, tuple(parts)) for t, parts in sorted(topics.items())
        ),
    )
    return SendStopReplica(broker_id, request)


def delete_replicas(
    ctx: ControllerContext, tp: TopicPartition, replicas: Iterable[int]
) -> list[Effect]:
    """StopReplica with deletion to the live removed replicas (Kafka: OfflineReplica, then
    ReplicaDeletionStarted); a removed replica that is down keeps its log for now."""
    effects: list[Effect] = []
    epoch = ctx.partition_states[tp].leader_epoch
    for broker_id in replicas:
        if broker_id not in ctx.live_brokers:
            continue
        request = StopReplicaRequest(
            controller_id=ctx.broker_id,
            controller_epoch=ctx.controller_epoch,
            broker_epoch=ctx.live_brokers[broker_id].epoch,
            topic_states=(
                StopReplicaTopicState(
                    tp[0], (StopReplicaPartitionState(tp[1], epoch, delete_partition=True),)
                ),
            ),
        )
        effects.append(SendStopReplica(broker_id, request))
    return effects


def update_metadata(ctx: ControllerContext, deleted_topics: Iterable[str]) -> SendUpdateMetadata:
    """The full picture, to every live broker."""
    live = ctx.live_brokers
    states = []
    for tp in ctx.partitions():
        state = ctx.partition_states.get(tp)
        if state is None:
            continue
        replicas = replicas_of(ctx, tp)
        online = online_replicas(ctx, tp)
        states.append(
            UpdateMetadataPartitionState(
                topic_name=tp[0],
                partition_index=tp[1],
                controller_epoch=state.controller_epoch,
                leader=state.leader,
                leader_epoch=state.leader_epoch,
                isr=state.isr,
                partition_epoch=state.partition_epoch,
                replicas=replicas,
                offline_replicas=tuple(r for r in replicas if r not in online),
            )
        )
    request = UpdateMetadataRequest(
        controller_id=ctx.broker_id,
        controller_epoch=ctx.controller_epoch,
        broker_epoch=-1,  # stamped per recipient by the channel
        partition_states=tuple(states),
        live_brokers=tuple(live[b].endpoint() for b in sorted(live)),
        deleted_topics=tuple(sorted(deleted_topics)),
        live_broker_listeners=tuple(live[b].listeners() for b in sorted(live) if live[b].endpoints),
        topic_ids=tuple(
            UpdateMetadataTopicId(t, ctx.topic_ids[t])
            for t in sorted(ctx.assignments)
            if t in ctx.topic_ids
        ),
    )
    return SendUpdateMetadata(tuple(sorted(live)), request)


def leader_log(tp: TopicPartition, state: PartitionState) -> LogEvent:
    fields = {
        "topic": tp[0],
        "partition": tp[1],
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.leader == NO_LEADER:
        return LogEvent("partition offline", fields)
    return LogEvent(LEADER_ELECTED, fields)


def unclean_log(tp: TopicPartition, before: LeaderAndIsr, after: LeaderAndIsr) -> LogEvent:
    fields = {
        "topic": tp[0],
        "partition": tp[1],
        "leader": after.leader,
        "leader_epoch": after.leader_epoch,
        "last_isr": list(before.isr),
    }
    return LogEvent(UNCLEAN_LEADER_ELECTION, fields, level="warning")


def reassignment_log(event: str, tp: TopicPartition, reassignment: Reassignment) -> LogEvent:
    fields = {
        "topic": tp[0],
        "partition": tp[1],
        "target_replicas": list(reassignment.target),
        "original_replicas": list(reassignment.original),
        "adding_replicas": list(reassignment.adding),
        "removing_replicas": list(reassignment.removing),
    }
    return LogEvent(event, fields)
