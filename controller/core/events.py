"""The events the controller core handles: what ZooKeeper, brokers and operators told it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from controller.core.model import (
    Assignments,
    LiveBroker,
    PartitionState,
)
from protocol.messages.elect_leaders import ElectionType
from protocol.topic_partition import TopicPartition

__all__ = [
    "BrokersChanged",
    "ControlledShutdownRequested",
    "ControllerEvent",
    "ElectLeadersRequested",
    "Elected",
    "IsrChanged",
    "LeaderImbalanceCheck",
    "ReassignmentsRequested",
    "Resigned",
    "TopicDeletionRequested",
    "TopicsChanged",
]


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
    topic_ids: Mapping[str, str] = field(default_factory=dict)  # topic -> its id (KIP-516)


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
    topic_ids: Mapping[str, str] = field(default_factory=dict)  # topic -> its id (KIP-516)


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
