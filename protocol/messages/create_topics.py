"""CreateTopics (key 19): new topics with a partition count and replication factor or assignment."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32

__all__ = [
    "CreatableReplicaAssignment",
    "CreatableTopic",
    "CreatableTopicConfig",
    "CreateTopicsRequest",
    "CreateTopicsResponse",
    "CreateTopicsResult",
]


@dataclass(frozen=True, slots=True)
class CreatableReplicaAssignment:
    partition_index: Int32
    broker_ids: tuple[Int32, ...]


@dataclass(frozen=True, slots=True)
class CreatableTopicConfig:
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class CreatableTopic:
    name: str
    num_partitions: Int32  # -1: the broker's num.partitions (or from assignments)
    replication_factor: Int16  # -1: the broker's default.replication.factor
    assignments: tuple[CreatableReplicaAssignment, ...] = ()
    configs: tuple[CreatableTopicConfig, ...] = ()


@dataclass(frozen=True, slots=True)
class CreateTopicsRequest:
    topics: tuple[CreatableTopic, ...]
    timeout_ms: Int32
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class CreateTopicsResult:
    name: str
    error_code: Int16
    error_message: str | None = None
    num_partitions: Int32 = -1
    replication_factor: Int16 = -1


@dataclass(frozen=True, slots=True)
class CreateTopicsResponse:
    topics: tuple[CreateTopicsResult, ...]
    throttle_time_ms: Int32 = 0
