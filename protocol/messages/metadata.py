"""Metadata (key 3): brokers, controller, and each topic's partitions with leader and ISR."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from protocol.messages.common import BrokerEndpoint
from protocol.schema import Int16, Int32, Since

__all__ = [
    "MetadataPartition",
    "MetadataRequest",
    "MetadataResponse",
    "MetadataTopic",
]


@dataclass(frozen=True, slots=True)
class MetadataRequest:
    topics: tuple[str, ...] | None  # nil: every topic
    allow_auto_topic_creation: bool = False
    # v2: topics asked for by id (KIP-516), answered after those in `topics`.
    topic_ids: Annotated[tuple[str, ...], Since(2)] = ()


@dataclass(frozen=True, slots=True)
class MetadataPartition:
    error_code: Int16
    partition_index: Int32
    leader_id: Int32
    leader_epoch: Int32
    replica_nodes: tuple[Int32, ...]
    isr_nodes: tuple[Int32, ...]
    offline_replicas: tuple[Int32, ...] = ()


@dataclass(frozen=True, slots=True)
class MetadataTopic:
    error_code: Int16
    name: str
    partitions: tuple[MetadataPartition, ...]
    is_internal: bool = False
    # v2: the topic's id (KIP-516, protocol.topic_id's string form); "" if it has none.
    topic_id: Annotated[str, Since(2)] = ""


@dataclass(frozen=True, slots=True)
class MetadataResponse:
    brokers: tuple[BrokerEndpoint, ...]
    cluster_id: str | None
    controller_id: Int32
    topics: tuple[MetadataTopic, ...]
    throttle_time_ms: Int32 = 0
    # v1: the controller epoch, so clients can tell a stale answer from a fresh one.
    controller_epoch: Annotated[Int32, Since(1)] = -1
