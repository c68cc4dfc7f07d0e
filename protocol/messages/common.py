"""Small structs shared by several APIs."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol.schema import Int32

__all__ = ["BrokerEndpoint", "ConfigResourceType", "TopicPartitionRef"]


class ConfigResourceType(enum.IntEnum):
    """Kafka's ConfigResource.Type: what DescribeConfigs and IncrementalAlterConfigs name."""

    UNKNOWN = 0
    TOPIC = 2
    BROKER = 4


@dataclass(frozen=True, slots=True)
class BrokerEndpoint:
    node_id: Int32
    host: str
    port: Int32
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class TopicPartitionRef:
    topic: str
    partition: Int32
