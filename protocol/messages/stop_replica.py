"""StopReplica (key 5): controller -> broker, stop fetching (and optionally delete) partitions."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.schema import Int16, Int32, Int64

__all__ = [
    "StopReplicaPartitionError",
    "StopReplicaPartitionState",
    "StopReplicaRequest",
    "StopReplicaResponse",
    "StopReplicaTopicState",
]


@dataclass(frozen=True, slots=True)
class StopReplicaPartitionState:
    partition_index: Int32
    leader_epoch: Int32  # -2: delete regardless of epoch (topic deletion), as in Kafka
    delete_partition: bool


@dataclass(frozen=True, slots=True)
class StopReplicaTopicState:
    topic_name: str
    partition_states: tuple[StopReplicaPartitionState, ...]


@dataclass(frozen=True, slots=True)
class StopReplicaRequest:
    controller_id: Int32
    controller_epoch: Int32
    broker_epoch: Int64
    topic_states: tuple[StopReplicaTopicState, ...]


@dataclass(frozen=True, slots=True)
class StopReplicaPartitionError:
    topic_name: str
    partition_index: Int32
    error_code: Int16


@dataclass(frozen=True, slots=True)
class StopReplicaResponse:
    error_code: Int16
    partition_errors: tuple[StopReplicaPartitionError, ...] = ()
