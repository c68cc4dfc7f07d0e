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
- broker bounced (same id, new incarnation, seen in one read; the incarnation is the czxid of
  the broker process's first registration): a failure, then a startup (Kafka's
  processBrokerChange): it leaves every leadership and ISR first (leaders move to the other
  live ISR members; the ISR keeps it only as its last member), then it joins. It may have
  lost unflushed data, so it must not keep leading or stay in sync on its word;
- broker re-registered (same incarnation, new broker epoch: its session expired but the
  process, and its log, lived on): nothing changes for its partitions; it gets LeaderAndIsr
  for all of them, so requests carry its new broker epoch. Unlike Kafka, which treats it as
  bounced: dropping an ISR member that holds every acked record only makes the leader the
  last one, whose unflushed data a crash then takes;
- at load (a new controller, or a re-load): a live leader or ISR member whose process
  registered first after the partition state was last written (incarnation > the state
  znode's mzxid) restarted since anyone decided that state: for that partition it is handled
  as bounced. A re-load within our own term also treats as bounced every broker whose
  incarnation differs from the one we knew;
- no live ISR member: with `unclean.leader.election.enable` (broker default, topic override)
  the first live replica leads alone (ISR = itself), a warning and a counted metric; without
  it the partition stays leaderless;
- ISR change notification (a leader rewrote its state znode): take the state read from
  ZooKeeper unless it is older than ours (Kafka's IsrChangeNotificationHandler);
- controlled shutdown (Kafka's doControlledShutdown): the broker joins `shutting_down` and is
  never elected while there; partitions it leads (RF > 1) move to the first live ISR member
  not shutting down, it leaves the ISR of partitions it follows (and gets StopReplica for
  them); the answer lists what it still leads (no other live ISR member: it keeps leading);
- preferred replica election (an operator's ElectLeaders, or the automatic leader rebalance,
  Kafka's PreferredReplicaPartitionLeaderElectionStrategy): the assignment's head leads if
  it is live, not shutting down and in the ISR; the ISR is kept, the leader epoch bumped;
- unclean election on demand (ElectLeaders with the unclean type): a leaderless partition
  elects as offline with unclean election allowed (logged and counted as unclean);
- partition reassignment (AlterPartitionReassignments, KIP-455 in ZooKeeper mode): the plan
  goes to /admin/reassign_partitions first, then RS = target + original (a new leader epoch,
  LeaderAndIsr with adding/removing replicas); when every target replica is in the ISR (an
  ISR change, or at load) the state gets a leader from the target (Kafka's Reassign
  strategy) and the ISR within it, then RS = target, then the plan entry goes; removed
  replicas get StopReplica with deletion. A cancel does the same towards the original
  replicas. A new controller resumes the plan at load;
- leader imbalance check (auto.leader.rebalance.enable): log the imbalance count, then a
  preferred election for the partitions `leader_balance.leader_imbalance` picks;
- every change: UpdateMetadata with the full live broker list and partition states to all.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.election import (
    NO_LEADER,
    LeaderAndIsr,
    elect_controlled_shutdown,
    elect_offline,
    preferred_replica_leader,
    reassign_leader,
    remove_replicas_from_isr,
)
from controller.leader_balance import leader_imbalance
from controller.zk_data import PartitionStateZnode
from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.elect_leaders import ElectionType
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from protocol.messages.update_metadata import UpdateMetadataPartitionState, UpdateMetadataRequest
from protocol.topic_partition import TopicPartition

__all__ = [
    "PREFERRED_REPLICA_IMBALANCE",
    "UNCLEAN_LEADER_ELECTION",
    "UNKNOWN_BROKER_EPOCH",
    "UNKNOWN_ZXID",
    "AlterReassignmentsReply",
    "BrokersChanged",
    "ControlledShutdownReply",
    "ControlledShutdownRequested",
    "ControllerContext",
    "ControllerEvent",
    "CreatePartitionStates",
    "DeleteTopicZnodes",
    "Effect",
    "ElectLeadersReply",
    "ElectLeadersRequested",
    "Elected",
    "IsrChanged",
    "LeaderImbalanceCheck",
    "LiveBroker",
    "LogEvent",
    "PartitionState",
    "Reassignment",
    "ReassignmentsRequested",
    "Resigned",
    "SendLeaderAndIsr",
    "SendStopReplica",
    "SendUpdateMetadata",
    "TopicDeletionRequested",
    "TopicPartition",
    "TopicsChanged",
    "WritePartitionStates",
    "WriteReassignmentPlan",
    "WriteTopicAssignment",
    "handle",
]

Assignments = Mapping[str, Mapping[int, tuple[int, ...]]]
# Topic deletion: the replica deletes its log whatever its leader epoch (Kafka's sentinel).
DELETE_PARTITION_LEADER_EPOCH = -2
# A ControlledShutdown from a broker that does not know its epoch: not checked (Kafka's).
UNKNOWN_BROKER_EPOCH = -1
# The log event of an unclean election; the shell also counts it (UncleanLeaderElections).
UNCLEAN_LEADER_ELECTION = "unclean leader election"
# The log event of a leader imbalance check; the shell keeps its count as a metric.
PREFERRED_REPLICA_IMBALANCE = "preferred replica imbalance"
# A partition state's mzxid when not read from ZooKeeper (after our own writes).
UNKNOWN_ZXID = -1


@dataclass(frozen=True, slots=True)
class LiveBroker:
    broker_id: int
    host: str
    port: int
    rack: str | None
    epoch: int  # czxid of its registration znode: new with every registration
    # czxid of the first registration of its process: new only when the process restarted.
    incarnation: int

    def endpoint(self) -> BrokerEndpoint:
        return BrokerEndpoint(self.broker_id, self.host, self.port, self.rack)


@dataclass(frozen=True, slots=True)
class PartitionState:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    controller_epoch: int
    partition_epoch: int  # the state znode's version
    # The state znode's mzxid as read (UNKNOWN_ZXID after our own writes). A broker
    # incarnation above it started after this state was written. Not part of equality: the same
    # state read twice is the same state.
    modified_zxid: int = field(default=UNKNOWN_ZXID, compare=False)

    def leader_and_isr(self) -> LeaderAndIsr:
        return LeaderAndIsr(self.leader, self.leader_epoch, self.isr)

    def znode(self) -> PartitionStateZnode:
        return PartitionStateZnode(self.leader, self.leader_epoch, self.isr, self.controller_epoch)


@dataclass(frozen=True, slots=True)
class Reassignment:
    """A partition reassignment in progress: RS = target + original (distinct, in that order,
    as Kafka) until the target replicas are all in the ISR, then RS = target."""

    target: tuple[int, ...]
    original: tuple[int, ...]
    # Bytes/s the adding replicas may copy at (per broker, follower side); -1: unthrottled.
    throttle_bytes_per_sec: int = -1

    @property
    def replicas(self) -> tuple[int, ...]:
        return tuple(dict.fromkeys(self.target + self.original))

    @property
    def adding(self) -> tuple[int, ...]:
        return tuple(r for r in self.target if r not in self.original)

    @property
    def removing(self) -> tuple[int, ...]:
        return tuple(r for r in self.original if r not in self.target)


@dataclass(frozen=True, slots=True)
class ControllerContext:
    """What the controller knows. Mappings are never mutated: each change makes new ones."""

    broker_id: int
    controller_epoch: int = -1
    epoch_zk_version: int = -1
    live_brokers: Mapping[int, LiveBroker] = field(default_factory=dict)
    assignments: Assignments = field(default_factory=dict)
    partition_states: Mapping[TopicPartition, PartitionState] = field(default_factory=dict)
    # Brokers in a controlled shutdown: never elected leader while in here; forgotten when
    # they leave or restart (a new incarnation; a re-registration of the same process keeps
    # shutting down).
    shutting_down: frozenset[int] = frozenset()
    # unclean.leader.election.enable: the broker default, and per-topic overrides.
    unclean_leader_election_enable: bool = False
    unclean_overrides: Mapping[str, bool] = field(default_factory=dict)
    # Partition reassignments in progress (mirrored in /admin/reassign_partitions).
    reassignments: Mapping[TopicPartition, Reassignment] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.controller_epoch >= 0

    def unclean_enabled(self, topic: str) -> bool:
        return self.unclean_overrides.get(topic, self.unclean_leader_election_enable)

    def partitions(self) -> list[TopicPartition]:
        return sorted(TopicPartition(t, p) for t, parts in self.assignments.items() for p in parts)


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
    unclean_overrides: Mapping[str, bool] = field(default_factory=dict)
    # /admin/reassign_partitions: target replicas, and the original ones where recorded.
    reassignment_targets: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    reassignment_originals: Mapping[TopicPartition, tuple[int, ...]] = field(default_factory=dict)
    reassignment_throttles: Mapping[TopicPartition, int] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class BrokersChanged:
    """The registered brokers now (children of /brokers/ids with their data)."""

    brokers: Mapping[int, LiveBroker]


@dataclass(frozen=True, slots=True)
class TopicsChanged:
    """Every topic's assignment now (children of /brokers/topics with their data), and the
    topics' `unclean.leader.election.enable` overrides (from /config/topics/<t>)."""

    assignments: Assignments
    unclean_overrides: Mapping[str, bool] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class TopicDeletionRequested:
    """Children of /admin/delete_topics now."""

    topics: frozenset[str]


@dataclass(frozen=True, slots=True)
class IsrChanged:
    """Leaders published ISR changes: these partitions' state znodes as read now, each with
    its znode version as `partition_epoch`."""

    states: Mapping[TopicPartition, PartitionState]


@dataclass(frozen=True, slots=True)
class ControlledShutdownRequested:
    """A broker asks to move its leaderships away before it stops."""

    broker_id: int
    broker_epoch: int  # UNKNOWN_BROKER_EPOCH: not checked


@dataclass(frozen=True, slots=True)
class ElectLeadersRequested:
    """An operator asks for leader elections (Kafka's ElectLeaders); None: every partition."""

    election_type: ElectionType
    partitions: tuple[TopicPartition, ...] | None


@dataclass(frozen=True, slots=True)
class LeaderImbalanceCheck:
    """Time for the automatic leader rebalance (every leader.imbalance.check.interval)."""

    percentage: int  # leader.imbalance.per.broker.percentage


@dataclass(frozen=True, slots=True)
class ReassignmentsRequested:
    """An operator's AlterPartitionReassignments: per partition the target replicas, or None
    to cancel the reassignment in progress."""

    targets: Mapping[TopicPartition, tuple[int, ...] | None]
    throttle_bytes_per_sec: int = -1


@dataclass(frozen=True, slots=True)
class Resigned:
    pass


ControllerEvent = (
    Elected
    | BrokersChanged
    | TopicsChanged
    | TopicDeletionRequested
    | IsrChanged
    | ControlledShutdownRequested
    | ElectLeadersRequested
    | LeaderImbalanceCheck
    | ReassignmentsRequested
    | Resigned
)


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
class WriteTopicAssignment:
    """Set /brokers/topics/<topic> to `assignment`, if it still holds `expected` (the shell
    compares and writes at the version it read: a concurrent CreatePartitions is not lost)."""

    topic: str
    expected: Mapping[int, tuple[int, ...]]
    assignment: Mapping[int, tuple[int, ...]]


@dataclass(frozen=True, slots=True)
class WriteReassignmentPlan:
    """Write /admin/reassign_partitions with these reassignments; empty: delete it."""

    reassignments: Mapping[TopicPartition, Reassignment]


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
    level: Literal["info", "warning"] = "info"


@dataclass(frozen=True, slots=True)
class ControlledShutdownReply:
    """The answer to ControlledShutdownRequested; always the last effect, so it is given
    only once every ZooKeeper write before it succeeded."""

    broker_id: int
    error_code: ErrorCode
    remaining_partitions: tuple[TopicPartition, ...] = ()


@dataclass(frozen=True, slots=True)
class ElectLeadersReply:
    """The answer to ElectLeadersRequested, per partition; always the last effect."""

    results: Mapping[TopicPartition, ErrorCode]


@dataclass(frozen=True, slots=True)
class AlterReassignmentsReply:
    """The answer to ReassignmentsRequested, per partition; always the last effect."""

    results: Mapping[TopicPartition, ErrorCode]


Effect = (
    CreatePartitionStates
    | WritePartitionStates
    | WriteTopicAssignment
    | WriteReassignmentPlan
    | DeleteTopicZnodes
    | SendLeaderAndIsr
    | SendUpdateMetadata
    | SendStopReplica
    | LogEvent
    | ControlledShutdownReply
    | ElectLeadersReply
    | AlterReassignmentsReply
)


# --- the core ---------------------------------------------------------------------------------


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
        return _on_elected(context, event)
    if not context.active:
        if isinstance(event, ControlledShutdownRequested):
            return context, [ControlledShutdownReply(event.broker_id, ErrorCode.NOT_CONTROLLER)]
        if isinstance(event, ElectLeadersRequested):
            return context, [_not_controller(event)]
        if isinstance(event, ReassignmentsRequested):
            codes = dict.fromkeys(event.targets, ErrorCode.NOT_CONTROLLER)
            return context, [AlterReassignmentsReply(codes)]
        return context, []
    if isinstance(event, BrokersChanged):
        return _on_brokers_changed(context, event)
    if isinstance(event, TopicsChanged):
        return _on_topics_changed(context, event)
    if isinstance(event, IsrChanged):
        ctx, effects = _on_isr_changed(context, event)
        ctx, more = _complete_reassignments(ctx)
        return ctx, effects + more
    if isinstance(event, ReassignmentsRequested):
        return _on_reassignments_requested(context, event)
    if isinstance(event, ControlledShutdownRequested):
        return _on_controlled_shutdown(context, event)
    if isinstance(event, ElectLeadersRequested):
        return _on_elect_leaders(context, event)
    if isinstance(event, LeaderImbalanceCheck):
        return _on_leader_imbalance_check(context, event)
    return _on_deletion_requested(context, event)


def _on_elected(
    context: ControllerContext, event: Elected
) -> tuple[ControllerContext, list[Effect]]:
    states = {
        tp: s
        for tp, s in event.partition_states.items()
        if tp[1] in event.assignments.get(tp[0], {})
    }
    # A re-load within our own term keeps the brokers still shutting down (same registration).
    same_term = context.controller_epoch == event.controller_epoch
    bounced = _bounced(context.live_brokers, event.brokers) if same_term else frozenset()
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
    )
    restarted = {tp: _restarted_members(ctx.live_brokers, s, bounced) for tp, s in states.items()}
    ctx, effects, _changed, created = _reconcile(
        ctx, ctx.partitions(), returning=frozenset(), restarted=restarted
    )
    effects += _restarted_logs(restarted)
    everything = ctx.partitions()
    effects += _leader_and_isr_effects(ctx, everything, created)
    effects.append(_update_metadata(ctx, ()))
    to_delete = event.topics_to_delete
    if to_delete:
        ctx, more = _on_deletion_requested(ctx, TopicDeletionRequested(to_delete))
        effects += more
    ctx, more = _resume_reassignments(ctx, event)
    return ctx, effects + more


def _bounced(old: Mapping[int, LiveBroker], new: Mapping[int, LiveBroker]) -> frozenset[int]:
    """Brokers registered in both with a different incarnation: they restarted in between."""
    return frozenset(b for b in old.keys() & new.keys() if old[b].incarnation != new[b].incarnation)


def _reregistered(old: Mapping[int, LiveBroker], new: Mapping[int, LiveBroker]) -> frozenset[int]:
    """Brokers registered in both, same incarnation, another registration: the same process
    re-registered (its session expired). Its log is intact: no failure."""
    return frozenset(
        b
        for b in old.keys() & new.keys()
        if old[b].incarnation == new[b].incarnation and old[b] != new[b]
    )


def _restarted_members(
    live: Mapping[int, LiveBroker], state: PartitionState, bounced: frozenset[int]
) -> frozenset[int]:
    """The live leader and ISR members that restarted unnoticed: their process registered
    first after `state` was written (no controller handled their restart for this
    partition, or it would have written it), or `bounced` (seen with another incarnation
    earlier in our own term). A process that only re-registered after a session expiry
    keeps its incarnation, and its place."""
    members = {state.leader, *state.isr} & live.keys()
    known = state.modified_zxid != UNKNOWN_ZXID
    return frozenset(
        b for b in members if b in bounced or (known and live[b].incarnation > state.modified_zxid)
    )


def _restarted_logs(restarted: Mapping[TopicPartition, frozenset[int]]) -> list[Effect]:
    partitions: dict[int, list[TopicPartition]] = {}
    for tp, broker_ids in sorted(restarted.items()):
        for broker_id in broker_ids:
            partitions.setdefault(broker_id, []).append(tp)
    return [
        LogEvent(
            "broker restarted unnoticed",
            {"broker_id": broker_id, "partitions": [f"{t}-{p}" for t, p in tps]},
            level="warning",
        )
        for broker_id, tps in sorted(partitions.items())
    ]


def _on_brokers_changed(
    context: ControllerContext, event: BrokersChanged
) -> tuple[ControllerContext, list[Effect]]:
    old, new = context.live_brokers, event.brokers
    bounced = _bounced(old, new)
    reregistered = _reregistered(old, new)
    left = sorted(old.keys() - new.keys())
    joined = sorted((new.keys() - old.keys()) | bounced)
    if not left and not joined and not reregistered:
        return context, []
    effects: list[Effect] = []
    for broker_id in left:
        effects.append(LogEvent("broker left", {"broker_id": broker_id}))
    for broker_id in sorted(bounced):
        effects.append(
            LogEvent(
                "broker bounced",
                {
                    "broker_id": broker_id,
                    "old_broker_epoch": old[broker_id].epoch,
                    "broker_epoch": new[broker_id].epoch,
                    "old_incarnation": old[broker_id].incarnation,
                    "incarnation": new[broker_id].incarnation,
                },
            )
        )
    for broker_id in sorted(reregistered):
        effects.append(
            LogEvent(
                "broker session renewed",
                {
                    "broker_id": broker_id,
                    "old_broker_epoch": old[broker_id].epoch,
                    "broker_epoch": new[broker_id].epoch,
                    "incarnation": new[broker_id].incarnation,
                },
            )
        )
    for broker_id in joined:
        b = new[broker_id]
        effects.append(
            LogEvent(
                "broker joined",
                {
                    "broker_id": broker_id,
                    "broker_epoch": b.epoch,
                    "incarnation": b.incarnation,
                    "host": b.host,
                    "port": b.port,
                },
            )
        )
    ctx = dataclasses.replace(
        context,
        live_brokers=dict(new),
        shutting_down=context.shutting_down - set(left) - bounced,
    )
    # Kafka's onBrokerFailure(bounced) before its onBrokerStartup(bounced).
    restarted = dict.fromkeys(ctx.partitions(), bounced)
    ctx, writes, changed, created = _reconcile(ctx, ctx.partitions(), frozenset(joined), restarted)
    effects += writes
    effects += _leader_and_isr_effects(ctx, changed + created, created)
    # A (re)joined broker learns every partition it hosts, changed or not; so does a
    # re-registered one, in requests that carry its new broker epoch.
    for broker_id in sorted({*joined, *reregistered}):
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
    overrides = dict(event.unclean_overrides)
    same_topics = not removed and assignments == {
        t: dict(p) for t, p in context.assignments.items()
    }
    if same_topics and overrides == dict(context.unclean_overrides):
        return context, []
    states = {tp: s for tp, s in context.partition_states.items() if tp[0] not in removed}
    ctx = dataclasses.replace(
        context, assignments=assignments, partition_states=states, unclean_overrides=overrides
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
    ctx, effects, changed, created = _reconcile(ctx, pending, frozenset())
    if same_topics and not changed and not created:
        return ctx, effects  # only an override changed, and nothing came of it
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


def _on_isr_changed(
    context: ControllerContext, event: IsrChanged
) -> tuple[ControllerContext, list[Effect]]:
    """Take the leaders' ISR changes (no ZooKeeper write: the leader already wrote them)."""
    states = dict(context.partition_states)
    logs: list[Effect] = []
    for tp, new in sorted(event.states.items()):
        current = states.get(tp)
        if current is None or new == current or _older(new, current):
            continue  # deleted meanwhile, nothing new, or a read racing a newer election
        states[tp] = new
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
    if not logs:
        return context, []
    ctx = dataclasses.replace(context, partition_states=states)
    return ctx, [*logs, _update_metadata(ctx, ())]


def _older(read: PartitionState, known: PartitionState) -> bool:
    if read.leader_epoch != known.leader_epoch:
        return read.leader_epoch < known.leader_epoch
    return read.partition_epoch < known.partition_epoch


def _on_controlled_shutdown(
    context: ControllerContext, event: ControlledShutdownRequested
) -> tuple[ControllerContext, list[Effect]]:
    broker_id = event.broker_id
    broker = context.live_brokers.get(broker_id)
    if broker is None:
        return context, [ControlledShutdownReply(broker_id, ErrorCode.BROKER_NOT_AVAILABLE)]
    if event.broker_epoch != UNKNOWN_BROKER_EPOCH and event.broker_epoch < broker.epoch:
        return context, [ControlledShutdownReply(broker_id, ErrorCode.STALE_BROKER_EPOCH)]
    ctx = dataclasses.replace(context, shutting_down=context.shutting_down | {broker_id})
    states = dict(ctx.partition_states)
    updates: dict[TopicPartition, tuple[PartitionStateZnode, int]] = {}
    effects: list[Effect] = [
        LogEvent(
            "controlled shutdown requested",
            {"shutting_down_broker_id": broker_id, "broker_epoch": broker.epoch},
        )
    ]
    moved: list[TopicPartition] = []
    left_isr: list[TopicPartition] = []
    followed: list[TopicPartition] = []
    for tp in ctx.partitions():
        current = states.get(tp)
        assignment = _replicas(ctx, tp)
        if current is None or broker_id not in assignment or len(assignment) < 2:
            continue  # RF=1 has nowhere to go: it stays, and is reported as remaining
        before = current.leader_and_isr()
        after: LeaderAndIsr | None
        if current.leader == broker_id:
            after = elect_controlled_shutdown(
                before, assignment, ctx.live_brokers.keys(), ctx.shutting_down
            )
            target = moved
        else:
            followed.append(tp)
            after = remove_replicas_from_isr(before, [broker_id])
            target = left_isr
        if after is None or after == before:
            continue  # the last one keeps leading (or it was not in the ISR)
        new = PartitionState(
            after.leader,
            after.leader_epoch,
            after.isr,
            ctx.controller_epoch,
            current.partition_epoch + 1,
        )
        states[tp] = new
        updates[tp] = (new.znode(), current.partition_epoch)
        target.append(tp)
        effects.append(_leader_log(tp, new))
    ctx = dataclasses.replace(ctx, partition_states=states)
    if updates:
        effects.insert(0, WritePartitionStates(updates))
    effects += _leader_and_isr_effects(
        ctx, moved + left_isr, (), excluded={tp: broker_id for tp in left_isr}
    )
    if followed:
        # As Kafka: it stops fetching, so its leaders cannot take it back into the ISR.
        effects.append(_stop_replicas(ctx, broker_id, followed))
    if updates:
        effects.append(_update_metadata(ctx, ()))
    remaining = tuple(
        tp for tp in ctx.partitions() if tp in states and states[tp].leader == broker_id
    )
    effects.append(ControlledShutdownReply(broker_id, ErrorCode.NONE, remaining))
    return ctx, effects


def _not_controller(event: ElectLeadersRequested) -> ElectLeadersReply:
    return ElectLeadersReply(dict.fromkeys(event.partitions or (), ErrorCode.NOT_CONTROLLER))


def _on_elect_leaders(
    context: ControllerContext, event: ElectLeadersRequested
) -> tuple[ControllerContext, list[Effect]]:
    partitions = context.partitions() if event.partitions is None else event.partitions
    ctx, effects, results = _elect_leaders(context, event.election_type, partitions)
    effects.append(ElectLeadersReply(results))
    return ctx, effects


def _on_leader_imbalance_check(
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
    ctx, more, _results = _elect_leaders(context, ElectionType.PREFERRED, to_elect)
    return ctx, effects + more


def _elect_leaders(
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
    electable = ctx.live_brokers.keys() - ctx.shutting_down
    for tp in sorted(set(partitions)):
        current = states.get(tp)
        if tp[1] not in ctx.assignments.get(tp[0], {}):
            results[tp] = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            continue
        if current is None:  # not created yet: no replica has been live
            results[tp] = ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE
            continue
        assignment = _replicas(ctx, tp)
        before = current.leader_and_isr()
        if election_type == ElectionType.PREFERRED:
            code, after = _preferred(before, assignment, electable)
        else:
            code, after = _unclean(before, assignment, ctx.live_brokers.keys(), electable)
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
            logs.append(_unclean_log(tp, before, after))
        logs.append(_leader_log(tp, new))
    if not updates:
        return ctx, logs, results
    ctx = dataclasses.replace(ctx, partition_states=states)
    effects: list[Effect] = [WritePartitionStates(updates), *logs]
    effects += _leader_and_isr_effects(ctx, sorted(updates), ())
    effects.append(_update_metadata(ctx, ()))
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


# --- helpers ----------------------------------------------------------------------------------


def _replicas(ctx: ControllerContext, tp: TopicPartition) -> tuple[int, ...]:
    return tuple(ctx.assignments[tp[0]][tp[1]])


def _reconcile(
    ctx: ControllerContext,
    partitions: Iterable[TopicPartition],
    returning: frozenset[int],
    restarted: Mapping[TopicPartition, frozenset[int]] | None = None,
) -> tuple[ControllerContext, list[Effect], list[TopicPartition], list[TopicPartition]]:
    """Bring `partitions` in line with the live brokers. `restarted[tp]`: live brokers that
    restarted unnoticed; for that partition they fail first, then return. Returns the new
    context, the ZK write effects (plus log events), the updated partitions and the created
    ones."""
    live = ctx.live_brokers.keys()
    electable = live - ctx.shutting_down  # Kafka: a shutting-down broker is not "online"
    states = dict(ctx.partition_states)
    creates: dict[TopicPartition, PartitionStateZnode] = {}
    updates: dict[TopicPartition, tuple[PartitionStateZnode, int]] = {}
    logs: list[Effect] = []
    for tp in partitions:
        assignment = _replicas(ctx, tp)
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
                    logs.append(_unclean_log(tp, before, after))
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
        logs.append(_leader_log(tp, new))
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
    Their startup follows in `_reconcile`: an offline election among the live ISR, so a
    leader that restarted leads again only as the last ISR member, in a new leader epoch."""
    failed = sorted(restarted & {before.leader, *before.isr})
    if not failed:
        return before
    return remove_replicas_from_isr(before, failed)


def _unclean_log(tp: TopicPartition, before: LeaderAndIsr, after: LeaderAndIsr) -> LogEvent:
    fields = {
        "topic": tp[0],
        "partition": tp[1],
        "leader": after.leader,
        "leader_epoch": after.leader_epoch,
        "last_isr": list(before.isr),
    }
    return LogEvent(UNCLEAN_LEADER_ELECTION, fields, level="warning")


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
        replicas = _replicas(ctx, tp)
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


def _stop_replicas(
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


# --- partition reassignment (KIP-455 semantics, Kafka's ZooKeeper-mode controller) -------------


def _on_reassignments_requested(
    context: ControllerContext, event: ReassignmentsRequested
) -> tuple[ControllerContext, list[Effect]]:
    """Start (or replace, or cancel) reassignments: RS = target + original in the topic znode,
    the leader epoch bumped so every replica (the adding ones too) learns the new RS; the
    adding replicas then follow and join the ISR, and `_complete_reassignments` finishes."""
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
            original = previous.original if previous else _replicas(context, tp)
            if previous is None and target == original:
                continue  # already there: nothing to move
            started[tp] = Reassignment(tuple(target), original, event.throttle_bytes_per_sec)
    ctx, effects = _start_reassignments(context, started)
    if cancelled:
        ctx, more = _finish_reassignments(ctx, cancelled, cancel=True)
        effects += more
    ctx, more = _complete_reassignments(ctx)
    effects += more
    effects.append(AlterReassignmentsReply(results))
    return ctx, effects


def _valid_target(target: tuple[int, ...], live: Iterable[int]) -> bool:
    """Kafka's rules: non-empty, no duplicates, every replica a registered broker."""
    known = set(live)
    return bool(target) and len(set(target)) == len(target) and all(r in known for r in target)


def _resume_reassignments(
    ctx: ControllerContext, event: Elected
) -> tuple[ControllerContext, list[Effect]]:
    """A new controller (or a re-load) picks up the plan where the last one left it."""
    started: dict[TopicPartition, Reassignment] = {}
    done: dict[TopicPartition, tuple[int, ...]] = {}
    for tp, target in sorted(event.reassignment_targets.items()):
        if tp[1] not in ctx.assignments.get(tp[0], {}) or tp not in ctx.partition_states:
            continue  # the topic is gone: the plan entry is dropped below
        current = _replicas(ctx, tp)
        original = event.reassignment_originals.get(tp, current)
        if current == target and original != target:
            done[tp] = original  # finished, but the plan was not cleaned up
        elif current != target:
            throttle = event.reassignment_throttles.get(tp, -1)
            started[tp] = Reassignment(tuple(target), tuple(original), throttle)
    ctx = dataclasses.replace(ctx, reassignments={})
    ctx, effects = _start_reassignments(ctx, started)
    for tp, original in sorted(done.items()):
        removed = [r for r in original if r not in _replicas(ctx, tp)]
        effects += _delete_replicas(ctx, tp, removed)
    if set(event.reassignment_targets) != set(ctx.reassignments):
        effects.append(WriteReassignmentPlan(dict(ctx.reassignments)))
    ctx, more = _complete_reassignments(ctx)
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
    electable = ctx.live_brokers.keys() - ctx.shutting_down
    for tp, reassignment in sorted(started.items()):
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
        effects.append(_reassignment_log("partition reassignment started", tp, reassignment))
    effects += _topic_writes(ctx.assignments, assignments, {t for t, _ in started})
    effects.insert(1, WritePartitionStates(updates))
    ctx = dataclasses.replace(
        ctx, assignments=assignments, partition_states=states, reassignments=reassignments
    )
    effects += _leader_and_isr_effects(ctx, sorted(started), ())
    for tp in sorted(started):
        effects += _delete_replicas(ctx, tp, dropped[tp])
    effects.append(_update_metadata(ctx, ()))
    return ctx, effects


def _complete_reassignments(ctx: ControllerContext) -> tuple[ControllerContext, list[Effect]]:
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
    electable = ctx.live_brokers.keys() - ctx.shutting_down
    assignments = {t: dict(parts) for t, parts in ctx.assignments.items()}
    states = dict(ctx.partition_states)
    reassignments = dict(ctx.reassignments)
    updates: dict[TopicPartition, tuple[PartitionStateZnode, int]] = {}
    removed: dict[TopicPartition, list[int]] = {}
    logs: list[Effect] = []
    for tp in partitions:
        reassignment = reassignments.pop(tp)
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
        logs.append(_reassignment_log(event, tp, reassignment))
        logs.append(_leader_log(tp, new))
    effects: list[Effect] = [WritePartitionStates(updates)]
    effects += _topic_writes(ctx.assignments, assignments, {t for t, _ in partitions})
    effects.append(WriteReassignmentPlan(reassignments))
    effects += logs
    ctx = dataclasses.replace(
        ctx, assignments=assignments, partition_states=states, reassignments=reassignments
    )
    effects += _leader_and_isr_effects(ctx, partitions, ())
    for tp in partitions:
        effects += _delete_replicas(ctx, tp, removed[tp])
    effects.append(_update_metadata(ctx, ()))
    return ctx, effects


def _topic_writes(old: Assignments, new: Assignments, topics: Iterable[str]) -> list[Effect]:
    return [
        WriteTopicAssignment(t, dict(old[t]), dict(new[t]))
        for t in sorted(set(topics))
        if dict(old[t]) != dict(new[t])
    ]


def _delete_replicas(
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


def _reassignment_log(event: str, tp: TopicPartition, reassignment: Reassignment) -> LogEvent:
    fields = {
        "topic": tp[0],
        "partition": tp[1],
        "target_replicas": list(reassignment.target),
        "original_replicas": list(reassignment.original),
        "adding_replicas": list(reassignment.adding),
        "removing_replicas": list(reassignment.removing),
    }
    return LogEvent(event, fields)
