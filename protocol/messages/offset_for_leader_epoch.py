"""OffsetForLeaderEpoch (key 23): where did epoch E end on the leader (KIP-101; v1: KIP-279)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from protocol.schema import Int16, Int32, Int64, Since

__all__ = [
    "OffsetForLeaderEpochPartition",
    "OffsetForLeaderEpochPartitionResult",
    "OffsetForLeaderEpochRequest",
    "OffsetForLeaderEpochResponse",
    "OffsetForLeaderEpochTopic",
    "OffsetForLeaderEpochTopicResult",
]


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochPartition:
    partition: Int32
    leader_epoch: Int32  # the epoch whose end offset is asked for
    current_leader_epoch: Int32 = -1  # KIP-320 fencing; -1 skips the check


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochTopic:
    topic: str
    partitions: tuple[OffsetForLeaderEpochPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochRequest:
    topics: tuple[OffsetForLeaderEpochTopic, ...]
    replica_id: Int32 = -1  # a follower's broker id, -1 for a consumer


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochPartitionResult:
    error_code: Int16
    partition: Int32
    end_offset: Int64 = -1
    # v1 (KIP-279): the largest epoch <= the requested one that the leader has.
    leader_epoch: Annotated[Int32, Since(1)] = -1


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochTopicResult:
    topic: str
    partitions: tuple[OffsetForLeaderEpochPartitionResult, ...]


@dataclass(frozen=True, slots=True)
class OffsetForLeaderEpochResponse:
    topics: tuple[OffsetForLeaderEpochTopicResult, ...]
    throttle_time_ms: Int32 = 0
