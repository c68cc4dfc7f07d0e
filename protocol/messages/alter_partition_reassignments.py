"""AlterPartitionReassignments (key 45): admin -> controller, "move these partitions' replicas".

Per partition the target replicas, or nil to cancel a reassignment in progress (KIP-455).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from protocol.schema import Int16, Int32, Int64, Since

__all__ = [
    "AlterPartitionReassignmentsRequest",
    "AlterPartitionReassignmentsResponse",
    "ReassignablePartition",
    "ReassignablePartitionResponse",
    "ReassignableTopic",
    "ReassignableTopicResponse",
]


@dataclass(frozen=True, slots=True)
class ReassignablePartition:
    partition_index: Int32
    replicas: tuple[Int32, ...] | None  # nil: cancel the reassignment in progress


@dataclass(frozen=True, slots=True)
class ReassignableTopic:
    name: str
    partitions: tuple[ReassignablePartition, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsRequest:
    timeout_ms: Int32
    topics: tuple[ReassignableTopic, ...]
    # v1: cap, in bytes/s per broker, on how fast the adding replicas copy (-1: no throttle).
    replication_throttle_bytes_per_sec: Annotated[Int64, Since(1)] = -1


@dataclass(frozen=True, slots=True)
class ReassignablePartitionResponse:
    partition_index: Int32
    error_code: Int16
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class ReassignableTopicResponse:
    name: str
    partitions: tuple[ReassignablePartitionResponse, ...]


@dataclass(frozen=True, slots=True)
class AlterPartitionReassignmentsResponse:
    error_code: Int16
    error_message: str | None = None
    responses: tuple[ReassignableTopicResponse, ...] = ()
    throttle_time_ms: Int32 = 0
