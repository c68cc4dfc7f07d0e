"""ListPartitionReassignments (key 46): admin -> controller, "which reassignments are running"."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32

__all__ = [
    "ListPartitionReassignmentsRequest",
    "ListPartitionReassignmentsResponse",
    "ListPartitionReassignmentsTopics",
    "OngoingPartitionReassignment",
    "OngoingTopicReassignment",
]


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsTopics:
    name: str
    partition_indexes: tuple[Int32, ...]


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsRequest:
    timeout_ms: Int32
    topics: tuple[ListPartitionReassignmentsTopics, ...] | None = None  # nil: all


@dataclass(frozen=True, slots=True)
class OngoingPartitionReassignment:
    partition_index: Int32
    replicas: tuple[Int32, ...]  # RS: the current replica set (original + target)
    adding_replicas: tuple[Int32, ...]
    removing_replicas: tuple[Int32, ...]


@dataclass(frozen=True, slots=True)
class OngoingTopicReassignment:
    name: str
    partitions: tuple[OngoingPartitionReassignment, ...]


@dataclass(frozen=True, slots=True)
class ListPartitionReassignmentsResponse:
    error_code: Int16
    error_message: str | None = None
    topics: tuple[OngoingTopicReassignment, ...] = ()
    throttle_time_ms: Int32 = 0
