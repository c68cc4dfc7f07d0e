"""What the controller core asks its shell to do: ZooKeeper writes (in order, each guarded
by the controller epoch), requests to brokers, log lines and replies to waiting requests."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from controller.core.model import (
    Reassignment,
)
from controller.zk_data import PartitionStateZnode
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.stop_replica import (
    StopReplicaRequest,
)
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.topic_partition import TopicPartition

__all__ = [
    "LEADER_ELECTED",
    "PREFERRED_REPLICA_IMBALANCE",
    "UNCLEAN_LEADER_ELECTION",
    "AlterReassignmentsReply",
    "ControlledShutdownReply",
    "CreatePartitionStates",
    "DeleteTopicZnodes",
    "Effect",
    "ElectLeadersReply",
    "LogEvent",
    "SendLeaderAndIsr",
    "SendStopReplica",
    "SendUpdateMetadata",
    "WritePartitionStates",
    "WriteReassignmentPlan",
    "WriteTopicAssignment",
]


# The log event of a partition given a leader; the shell counts it (leader elections).
LEADER_ELECTED = "partition leader elected"


# The log event of an unclean election; the shell also counts it (UncleanLeaderElections).
UNCLEAN_LEADER_ELECTION = "unclean leader election"


# The log event of a leader imbalance check; the shell keeps its count as a metric.
PREFERRED_REPLICA_IMBALANCE = "preferred replica imbalance"


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
