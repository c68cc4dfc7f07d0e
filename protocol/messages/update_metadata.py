"""UpdateMetadata (key 6): controller -> every broker, refreshing its metadata cache."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.messages.common import BrokerEndpoint
from protocol.schema import Int16, Int32, Int64

__all__ = [
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
]


@dataclass(frozen=True, slots=True)
class UpdateMetadataPartitionState:
    topic_name: str
    partition_index: Int32
    controller_epoch: Int32
    leader: Int32
    leader_epoch: Int32
    isr: tuple[Int32, ...]
    partition_epoch: Int32
    replicas: tuple[Int32, ...]
    offline_replicas: tuple[Int32, ...] = ()


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    controller_id: Int32
    controller_epoch: Int32
    broker_epoch: Int64
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[BrokerEndpoint, ...]
    deleted_topics: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class UpdateMetadataResponse:
    error_code: Int16
