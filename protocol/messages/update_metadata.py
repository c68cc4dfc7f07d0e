"""UpdateMetadata (key 6): controller -> every broker, refreshing its metadata cache."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from protocol.messages.common import BrokerEndpoint
from protocol.schema import Int16, Int32, Int64, Since

__all__ = [
    "BrokerListeners",
    "ListenerEndpoint",
    "UpdateMetadataPartitionState",
    "UpdateMetadataRequest",
    "UpdateMetadataResponse",
    "UpdateMetadataTopicId",
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
class ListenerEndpoint:
    """One named listener of a broker (Kafka's UpdateMetadataEndpoint)."""

    listener: str
    security_protocol: str  # PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL
    host: str
    port: Int32


@dataclass(frozen=True, slots=True)
class BrokerListeners:
    node_id: Int32
    endpoints: tuple[ListenerEndpoint, ...]


@dataclass(frozen=True, slots=True)
class UpdateMetadataTopicId:
    """A topic's id (KIP-516; Kafka's UpdateMetadataTopicState.topic_id, v7+)."""

    topic_name: str
    topic_id: str  # Kafka's Uuid.toString form (protocol.topic_id)


@dataclass(frozen=True, slots=True)
class UpdateMetadataRequest:
    controller_id: Int32
    controller_epoch: Int32
    broker_epoch: Int64
    partition_states: tuple[UpdateMetadataPartitionState, ...]
    live_brokers: tuple[BrokerEndpoint, ...]  # each at its inter-broker listener
    deleted_topics: tuple[str, ...] = ()
    # v1+: every listener of each live broker, so a Metadata request is answered with the
    # addresses of the listener it came in on. A broker missing here has only live_brokers'.
    live_broker_listeners: Annotated[tuple[BrokerListeners, ...], Since(1)] = ()
    # v2+: each topic's id, for topics that have one (every topic once a controller has
    # backfilled them). A topic missing here keeps the id the broker knew, if any.
    topic_ids: Annotated[tuple[UpdateMetadataTopicId, ...], Since(2)] = ()


@dataclass(frozen=True, slots=True)
class UpdateMetadataResponse:
    error_code: Int16
