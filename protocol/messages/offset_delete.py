"""OffsetDelete (key 47): forget a group's committed offsets for partitions no member of the
group subscribes to."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32

__all__ = [
    "OffsetDeletePartition",
    "OffsetDeletePartitionResponse",
    "OffsetDeleteRequest",
    "OffsetDeleteResponse",
    "OffsetDeleteTopic",
    "OffsetDeleteTopicResponse",
]


@dataclass(frozen=True, slots=True)
class OffsetDeletePartition:
    partition_index: Int32


@dataclass(frozen=True, slots=True)
class OffsetDeleteTopic:
    name: str
    partitions: tuple[OffsetDeletePartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteRequest:
    group_id: str
    topics: tuple[OffsetDeleteTopic, ...]


@dataclass(frozen=True, slots=True)
class OffsetDeletePartitionResponse:
    partition_index: Int32
    error_code: Int16


@dataclass(frozen=True, slots=True)
class OffsetDeleteTopicResponse:
    name: str
    partitions: tuple[OffsetDeletePartitionResponse, ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    error_code: Int16
    topics: tuple[OffsetDeleteTopicResponse, ...] = ()
    throttle_time_ms: Int32 = 0
