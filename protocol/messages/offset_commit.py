"""OffsetCommit (key 8): store a group's positions. A member commits with its member id and
epoch; an admin (member_id "", epoch -1) only for a group with no members."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32, Int64

__all__ = [
    "OffsetCommitPartition",
    "OffsetCommitPartitionResponse",
    "OffsetCommitRequest",
    "OffsetCommitResponse",
    "OffsetCommitTopic",
    "OffsetCommitTopicResponse",
]


@dataclass(frozen=True, slots=True)
class OffsetCommitPartition:
    partition_index: Int32
    committed_offset: Int64
    committed_leader_epoch: Int32 = -1
    committed_metadata: str | None = None  # at most offset.metadata.max.bytes (4096)


@dataclass(frozen=True, slots=True)
class OffsetCommitTopic:
    name: str
    partitions: tuple[OffsetCommitPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    topics: tuple[OffsetCommitTopic, ...]
    member_epoch: Int32 = -1  # Kafka's generation_id_or_member_epoch
    member_id: str = ""
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class OffsetCommitPartitionResponse:
    partition_index: Int32
    error_code: Int16


@dataclass(frozen=True, slots=True)
class OffsetCommitTopicResponse:
    name: str
    partitions: tuple[OffsetCommitPartitionResponse, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    topics: tuple[OffsetCommitTopicResponse, ...]
    throttle_time_ms: Int32 = 0
