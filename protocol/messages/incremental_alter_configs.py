"""IncrementalAlterConfigs (key 44): admin -> any broker, "set or delete these configs of a
topic, or of the cluster-wide broker defaults"; each resource succeeds or fails whole."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol.schema import Int8, Int16, Int32

__all__ = [
    "AlterConfigOpType",
    "AlterConfigsResource",
    "AlterConfigsResourceResponse",
    "AlterableConfig",
    "IncrementalAlterConfigsRequest",
    "IncrementalAlterConfigsResponse",
]


class AlterConfigOpType(enum.IntEnum):
    """Kafka's AlterConfigOp.OpType. APPEND and SUBTRACT are for list configs (none here)."""

    SET = 0
    DELETE = 1
    APPEND = 2
    SUBTRACT = 3


@dataclass(frozen=True, slots=True)
class AlterableConfig:
    name: str
    config_operation: Int8  # AlterConfigOpType
    value: str | None  # SET's value; nil for DELETE


@dataclass(frozen=True, slots=True)
class AlterConfigsResource:
    resource_type: Int8  # ConfigResourceType: TOPIC (2) or BROKER (4)
    resource_name: str  # a topic; "" for the cluster-wide broker defaults
    configs: tuple[AlterableConfig, ...]


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsRequest:
    resources: tuple[AlterConfigsResource, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class AlterConfigsResourceResponse:
    error_code: Int16
    error_message: str | None
    resource_type: Int8
    resource_name: str


@dataclass(frozen=True, slots=True)
class IncrementalAlterConfigsResponse:
    responses: tuple[AlterConfigsResourceResponse, ...]
    throttle_time_ms: Int32 = 0
