"""OffsetFetch (key 9): a group's committed offsets (all of them when topics is None)."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32, Int64

__all__ = [
    "OffsetFetchPartition",
    "OffsetFetchRequest",
    "OffsetFetchResponse",
    "OffsetFetchTopic",
    "OffsetFetchTopicRequest",
]


@dataclass(frozen=True, slots=True)
class OffsetFetchTopicRequest:
    name: str
    partition_indexes: tuple[Int32, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    group_id: str
    topics: tuple[OffsetFetchTopicRequest, ...] | None = None  # None: every committed offset
    member_id: str | None = None  # with member_epoch: a member asking (KIP-848)
    member_epoch: Int32 = -1


@dataclass(frozen=True, slots=True)
class OffsetFetchPartition:
    partition_index: Int32
    committed_offset: Int64  # -1: none committed
    error_code: Int16 = 0
    committed_leader_epoch: Int32 = -1
    metadata: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetFetchTopic:
    name: str
    partitions: tuple[OffsetFetchPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    topics: tuple[OffsetFetchTopic, ...]
    error_code: Int16 = 0
    throttle_time_ms: Int32 = 0
