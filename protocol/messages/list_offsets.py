"""ListOffsets (key 2): earliest, latest or by-timestamp offsets of partitions."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int8, Int16, Int32, Int64

__all__ = [
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "ListOffsetsPartition",
    "ListOffsetsPartitionResponse",
    "ListOffsetsRequest",
    "ListOffsetsResponse",
    "ListOffsetsTopic",
    "ListOffsetsTopicResponse",
]

# Special timestamps, as in Kafka.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3


@dataclass(frozen=True, slots=True)
class ListOffsetsPartition:
    partition_index: Int32
    timestamp: Int64  # -1 latest, -2 earliest, -3 max timestamp, else first offset at/after it
    current_leader_epoch: Int32 = -1


@dataclass(frozen=True, slots=True)
class ListOffsetsTopic:
    name: str
    partitions: tuple[ListOffsetsPartition, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsRequest:
    replica_id: Int32
    topics: tuple[ListOffsetsTopic, ...]
    isolation_level: Int8 = 0


@dataclass(frozen=True, slots=True)
class ListOffsetsPartitionResponse:
    partition_index: Int32
    error_code: Int16
    timestamp: Int64 = -1
    offset: Int64 = -1
    leader_epoch: Int32 = -1


@dataclass(frozen=True, slots=True)
class ListOffsetsTopicResponse:
    name: str
    partitions: tuple[ListOffsetsPartitionResponse, ...]


@dataclass(frozen=True, slots=True)
class ListOffsetsResponse:
    topics: tuple[ListOffsetsTopicResponse, ...]
    throttle_time_ms: Int32 = 0
