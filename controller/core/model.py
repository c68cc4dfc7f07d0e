"""What the controller knows: live brokers, assignments, partition states, reassignments."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.leader_choice import (
    LeaderAndIsr,
)
from controller.zk_data import PartitionStateZnode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.update_metadata import BrokerListeners, ListenerEndpoint
from protocol.topic_partition import TopicPartition

__all__ = [
    "DELETE_PARTITION_LEADER_EPOCH",
    "UNKNOWN_BROKER_EPOCH",
    "UNKNOWN_ZXID",
    "Assignments",
    "ControllerContext",
    "LiveBroker",
    "PartitionState",
    "Reassignment",
    "online_replicas",
    "replicas_of",
]


Assignments = Mapping[str, Mapping[int, tuple[int, ...]]]


# Topic deletion: the replica deletes its log whatever its leader epoch (Kafka's sentinel).
DELETE_PARTITION_LEADER_EPOCH = -2


# A ControlledShutdown from a broker that does not know its epoch: not checked (Kafka's).
UNKNOWN_BROKER_EPOCH = -1


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
    # Every named listener (host and port above: the inter-broker one); not part of equality,
    # which tells restarts and re-registrations apart.
    endpoints: tuple[ListenerEndpoint, ...] = field(default=(), compare=False)
    # Its replicas whose log (or log dir) failed (KIP-112): they cannot lead or be in sync
    # until the broker restarts. Not part of equality: the same registration, rewritten.
    offline_partitions: frozenset[TopicPartition] = field(default=frozenset(), compare=False)

    def endpoint(self) -> BrokerEndpoint:
        return BrokerEndpoint(self.broker_id, self.host, self.port, self.rack)

    def listeners(self) -> BrokerListeners:
        return BrokerListeners(self.broker_id, self.endpoints)


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
    # Each topic's id (KIP-516), as its znode holds it; a topic missing here has none yet.
    topic_ids: Mapping[str, str] = field(default_factory=dict)

    @property
    def active(self) -> bool:
        return self.controller_epoch >= 0

    def unclean_enabled(self, topic: str) -> bool:
        return self.unclean_overrides.get(topic, self.unclean_leader_election_enable)

    def partitions(self) -> list[TopicPartition]:
        return sorted(TopicPartition(t, p) for t, parts in self.assignments.items() for p in parts)


def replicas_of(ctx: ControllerContext, tp: TopicPartition) -> tuple[int, ...]:
    return tuple(ctx.assignments[tp[0]][tp[1]])


def online_replicas(ctx: ControllerContext, tp: TopicPartition) -> frozenset[int]:
    """The live brokers whose copy of `tp` is usable: a broker that reported it offline
    (a failed log dir, KIP-112) is treated as gone for that partition alone."""
    return frozenset(
        b for b, broker in ctx.live_brokers.items() if tp not in broker.offline_partitions
    )
