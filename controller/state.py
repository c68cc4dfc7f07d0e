"""The controller's decisions: `handle(context, event, now_ms) -> (context, effects)`. Pure.

The shell (controller.py) reads ZooKeeper, turns what changed into events, and executes the
effects in order: ZooKeeper writes first (each guarded by the controller epoch's zkVersion),
then requests to brokers. Writes are compare-and-set on the partition state znode's version,
so the version after a successful write is known in advance (expected + 1; 0 for a created
node): the requests that follow carry it as `partition_epoch`. If a write fails, the shell
drops the remaining effects and re-loads everything from ZooKeeper (an `Elected` event again).

Kafka's rules mirrored here (KafkaController, PartitionStateMachine, ReplicaStateMachine):
- new partition: leader = first live replica in assignment order, ISR = live replicas,
  leader epoch 0;
- leader gone: offline election (first live ISR member in assignment order); none -> leader
  -1, leader epoch + 1, ISR shrunk but never emptied (it keeps its last member);
- follower gone: removed from the ISR with a leader epoch bump;
- broker (re)joined: LeaderAndIsr for all its replicas, offline partitions elect again, and a
  partition it still leads gets a new leader epoch (KIP-101 "returning leaders");
- every change: UpdateMetadata with the full live broker list and partition states to all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from controller.election import NO_LEADER, LeaderAndIsr, elect_offline, remove_replicas_from_isr
from controller.zk_data import PartitionStateZnode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from protocol.messages.update_metadata import UpdateMetadataPartitionState, UpdateMetadataRequest

__all__ = [
    "BrokersChanged",
    "ControllerContext",
    "ControllerEvent",
    "CreatePartitionStates",
    "DeleteTopicZnodes",
    "Effect",
    "Elected",
    "LiveBroker",
    "LogEvent",
    "PartitionState",
    "Resigned",
    "SendLeaderAndIsr",
    "SendStopReplica",
    "SendUpdateMetadata",
    "TopicDeletionRequested",
    "TopicPartition",
    "TopicsChanged",
    "WritePartitionStates",
    "handle",
]

TopicPartition = tuple[str, int]
Assignments = Mapping[str, Mapping[int, tuple[int, ...]]]
# Topic deletion: the replica deletes its log whatever its leader epoch (Kafka's sentinel).
DELETE_PARTITION_LEADER_EPOCH = -2


@dataclass(frozen=True, slots=True)
class LiveBroker:
    broker_id: int
    host: str
    port: int
    rack: str | None
    epoch: int  # czxid of its registration znode

    def endpoint(self) -> BrokerEndpoint:
        return BrokerEndpoint(self.broker_id, self.host, self.port, self.rack)


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int  # the state znode's version

    def leader_and_isr(self) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.leader_epoch, self.isr)

    def znode(self) -> PartitionStateZnode:
        return PartitionStateZnode(self.leader, self.leader_epoch, self.isr, self.controller_epoch)


@dataclass(frozen=True, slots=True)
class ControllerContext:
    """What the controller knows. Mappings are never mutated: each change makes new ones."""

    broker_id: int
    controller_epoch: int = -1
    epoch_zk_version: int = -1
    live_brokers: Mapping[int, LiveBroker] = field(default_factory=dict)
    assignments: Assignments = field(default_factory=dict)
    partition_states: Mapping[TopicPartition, PartitionState] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.controller_epoch >= 0

    def partitions(self) -> list[TopicPartition]:
        return sorted((t, p) for t, parts in self.assignments.items() for p in parts)


# --- events -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Elected:
    """Won the election (or re-loaded after a failed write): everything read from ZooKeeper."""

    controller_epoch: int
    epoch_zk_version: int
    brokers: Mapping[int, LiveBroker]
    assignments: Assignments
    partition_states: Mapping[TopicPartition, PartitionState]
    topics_to_delete: frozenset[str] = frozenset()


@dataclass(frozen=True, slots=True)
class BrokersChanged:
    """The registered brokers now (children of /brokers/ids with their data)."""

    brokers: Mapping[int, LiveBroker]


@dataclass(frozen=True, slots=True)
class TopicsChanged:
    """Every topic's assignment now (children of /brokers/topics with their data)."""

    assignments: Assignments


@dataclass(frozen=True, slots=True)
class TopicDeletionRequested:
    """Children of /admin/delete_topics now."""

    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class Resigned:
    pass


ControllerEvent = Elected | BrokersChanged | TopicsChanged | TopicDeletionRequested | Resigned


# --- effects ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CreatePartitionStates:
    """Create these state znodes (and their parents)."""

    states: Mapping[TopicPartition, PartitionStateZnode]


@dataclass(frozen=True, slots=True)
class WritePartitionStates:
    """Set these state znodes: (new state, expected current znode version)."""

    updates: Mapping[TopicPartition, tuple[PartitionStateZnode, int]]


@dataclass(frozen=True, slots=True)
class DeleteTopicZnodes:
    """Delete /brokers/topics/<t> (recursively), /config/topics/<t>, /admin/delete_topics/<t>;
    missing nodes are fine."""

    topic: str


@dataclass(frozen=True, slots=True)
class SendLeaderAndIsr:
    broker_id: int
    request: LeaderAndIsrRequest


@dataclass(frozen=True, slots=True)
class SendUpdateMetadata:
    """The same request to each broker; the channel stamps each recipient's broker epoch."""

    broker_ids: tuple[int, ...]
    request: UpdateMetadataRequest


@dataclass(frozen=True, slots=True)
class SendStopReplica:
    broker_id: int
    request: StopReplicaRequest


@dataclass(frozen=True, slots=True)
class LogEvent:
    """A notable change for the structured log (the core decides, the shell logs)."""

    event: str
    fields: Mapping[str, Any] = field(default_factory=dict)


Effect = (
    CreatePartitionStates
    | WritePartitionStates
    | DeleteTopicZnodes
    | SendLeaderAndIsr
    | SendUpdateMetadata
    | SendStopReplica
    | LogEvent
)


# --- the core ---------------------------------------------------------------------------------


def handle(
    context: ControllerContext, event: ControllerEvent, now_ms: int
) -> tuple[ControllerContext, list[Effect]]:
    """Apply one event; the effects are to be executed in order."""
    del now_ms  # no time-based decisions yet; kept so callers never need to change
    if isinstance(event, Resigned):
        return ControllerContext(context.broker_id), []
    if isinstance(event, Elected):
        return _on_elected(context, event)
    if not context.active:
        return context, []
    if isinstance(event, BrokersChanged):
        return _on_brokers_changed(context, event)
    if isinstance(event, TopicsChanged):
        return _on_topics_changed(context, event)
    return _on_deletion_requested(context, event)


def _on_elected(
    context: ControllerContext, event: Elected
) -> tuple[ControllerContext, list[Effect]]:
    states = {
        tp: s
        for tp, s in event.partition_states.items()
        if tp[1] in event.assignments.get(tp[0], {})
    }
    ctx = ControllerContext(
        broker_id=context.broker_id,
        controller_epoch=event.controller_epoch,
        epoch_zk_version=event.epoch_zk_version,
        live_brokers=dict(event.brokers),
        assignments={t: dict(parts) for t, parts in event.assignments.items()},
        partition_states=states,
    )
    ctx, effects, _changed, created = _reconcile(ctx, ctx.partitions(), returning=frozenset())
    everything = ctx.partitions()
    effects += _leader_and_isr_effects(ctx, everything, created)
    effects.append(_update_metadata(ctx, ()))
    to_delete = event.topics_to_delete
    if to_delete:
        ctx, more = _on_deletion_requested(ctx, TopicDeletionRequested(to_delete))
        effects += more
    return ctx, effects


def _on_brokers_changed(
    context: ControllerContext, event: BrokersChanged
) -> tuple[ControllerContext, list[Effect]]:
    old, new = context.live_brokers, event.brokers
    bounced = {b for b in old.keys() & new.keys() if old[b].epoch != new[b].epoch}
    left = sorted(old.keys() - new.keys())
    joined = sorted((new.keys() - old.keys()) | bounced)
    if not left and not joined and dict(old) == dict(new):
        return context, []
    effects: list[Effect] = []
    for broker_id in left:
        effects.append(LogEvent("broker left", {"broker_id": broker_id}))
    for broker_id in joined:
        b = new[broker_id]
        effects.append(
            LogEvent(
                "broker joined",
                {"broker_id": broker_id, "broker_epoch": b.epoch, "host": b.host, "port": b.port},
            )
        )
    ctx = dataclasses.replace(context, live_brokers=dict(new))
    ctx, writes, changed, created = _reconcile(ctx, ctx.partitions(), frozenset(joined))
    effects += writes
    effects += _leader_and_isr_effects(ctx, changed + created, created)
    # A (re)joined broker learns every partition it hosts, changed or not.
    for broker_id in joined:
        mine = [tp for tp in ctx.partitions() if broker_id in _replicas(ctx, tp)]
        effects += _leader_and_isr_effects(
            ctx, [tp for tp in mine if tp not in changed and tp not in created], (), {broker_id}
        )
    effects.append(_update_metadata(ctx, ()))
    return ctx, effects


def _on_topics_changed(
    context: ControllerContext, event: TopicsChanged
) -> tuple[ControllerContext, list[Effect]]:
    removed = sorted(context.assignments.keys() - event.assignments.keys())
    assignments = {t: dict(parts) for t, parts in event.assignments.items()}
    if not removed and assignments == {t: dict(p) for t, p in context.assignments.items()}:
        return context, []
    states = {tp: s for tp, s in context.partition_states.items() if tp[0] not in removed}
    ctx = dataclasses.replace(context, assignments=assignments, partition_states=states)
    pending = [tp for tp in ctx.partitions() if tp not in ctx.partition_states]
    ctx, effects, changed, created = _reconcile(ctx, pending, frozenset())
    effects += _leader_and_isr_effects(ctx, changed + created, created)
    effects.append(_update_metadata(ctx, removed))
    return ctx, effects


def _on_deletion_requested(
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
        partition_states={
            tp: s for tp, s in context.partition_states.items() if tp[0] not in deleted
        },
    )
    effects.append(_update_metadata(ctx, deleted))
    return ctx, effects


# --- helpers ----------------------------------------------------------------------------------


def _replicas(ctx: ControllerContext, tp: TopicPartition) -> tuple[int, ...]:
    return tuple(ctx.assignments[tp[0]][tp[1]])


def _reconcile(
    ctx: ControllerContext, partitions: Iterable[TopicPartition], returning: frozenset[int]
) -> tuple[ControllerContext, list[Effect], list[TopicPartition], list[TopicPartition]]:
    """Bring `partitions` in line with the live brokers. Returns the new context, the ZK write
    effects (plus log events), the updated partitions and the created ones."""
    live = ctx.live_brokers.keys()
    states = dict(ctx.partition_states)
    creates: dict[TopicPartition, PartitionStateZnode] = {}
    updates: dict[TopicPartition, tuple[PartitionStateZnode, int]] = {}
    logs: list[Effect] = []
    for tp in partitions:
        assignment = _replicas(ctx, tp)
        current = states.get(tp)
        if current is None:
            live_replicas = tuple(r for r in assignment if r in live)
            if not live_replicas:
                continue  # stays new until a replica is live (Kafka's NewPartition)
            new = PartitionState(live_replicas[0], 0, live_replicas, ctx.controller_epoch, 0)
            states[tp] = new
            creates[tp] = new.znode()
        else:
            before = current.leader_and_isr()
            if current.leader in live:
                after = remove_replicas_from_isr(before, [r for r in before.isr if r not in live])
                if after == before and current.leader in returning:
                    after = dataclasses.replace(before, leader_epoch=before.leader_epoch + 1)
            else:
                after = elect_offline(before, assignment, live)
            if after == before:
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
        logs.append(_leader_log(tp, new))
    effects: list[Effect] = []
    if creates:
        effects.append(CreatePartitionStates(creates))
    if updates:
        effects.append(WritePartitionStates(updates))
    effects += logs
    ctx = dataclasses.replace(ctx, partition_states=states)
    return ctx, effects, sorted(updates), sorted(creates)


def _leader_log(tp: TopicPartition, state: PartitionState) -> LogEvent:
    fields = {
        "topic": tp[0],
        "partition": tp[1],
        "leader": state.leader,
        "leader_epoch": state.leader_epoch,
        "isr": list(state.isr),
    }
    if state.leader == NO_LEADER:
        return LogEvent("partition offline", fields)
    return LogEvent("partition leader elected", fields)


def _leader_and_isr_effects(
    ctx: ControllerContext,
    partitions: Iterable[TopicPartition],
    new_partitions: Iterable[TopicPartition],
    only_brokers: set[int] | None = None,
) -> list[Effect]:
    """One LeaderAndIsr per live replica broker, covering its partitions among `partitions`."""
    fresh = set(new_partitions)
    per_broker: dict[int, list[LeaderAndIsrPartitionState]] = {}
    for tp in sorted(set(partitions)):
        state = ctx.partition_states.get(tp)
        if state is None:
            continue
        replicas = _replicas(ctx, tp)
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
        )
        for replica in replicas:
            if replica in ctx.live_brokers and (only_brokers is None or replica in only_brokers):
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


def _update_metadata(ctx: ControllerContext, deleted_topics: Iterable[str]) -> SendUpdateMetadata:
    """The full picture, to every live broker."""
    live = ctx.live_brokers
    states = []
    for tp in ctx.partitions():
        state = ctx.partition_states.get(tp)
        if state is None:
            continue
        replicas = _replicas(ctx, tp)
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
                offline_replicas=tuple(r for r in replicas if r not in live),
            )
        )
    request = UpdateMetadataRequest(
        controller_id=ctx.broker_id,
        controller_epoch=ctx.controller_epoch,
        broker_epoch=-1,  # stamped per recipient by the channel
        partition_states=tuple(states),
        live_brokers=tuple(live[b].endpoint() for b in sorted(live)),
        deleted_topics=tuple(sorted(deleted_topics)),
    )
    return SendUpdateMetadata(tuple(sorted(live)), request)
