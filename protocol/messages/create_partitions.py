"""CreatePartitions (key 37): admin -> any broker, "let topic T have N partitions" (add only)."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32

__all__ = [
    "CreatePartitionsAssignment",
    "CreatePartitionsRequest",
    "CreatePartitionsResponse",
    "CreatePartitionsTopic",
    "CreatePartitionsTopicResult",
]


@dataclass(frozen=True, slots=True)
class CreatePartitionsAssignment:
    broker_ids: tuple[Int32, ...]


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopic:
    name: str
    count: Int32  # the new total number of partitions
    # The replicas of each new partition, in order; nil: the broker assigns them.
    assignments: tuple[CreatePartitionsAssignment, ...] | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsRequest:
    topics: tuple[CreatePartitionsTopic, ...]
    timeout_ms: Int32
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class CreatePartitionsTopicResult:
    name: str
    error_code: Int16
    error_message: str | None = None


@dataclass(frozen=True, slots=True)
class CreatePartitionsResponse:
    results: tuple[CreatePartitionsTopicResult, ...]
    throttle_time_ms: Int32 = 0
