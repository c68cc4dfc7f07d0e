"""DescribeConfigs (key 32): admin -> any broker, "each config of this topic or broker, with
its value and where the value comes from"."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol.schema import Int8, Int16, Int32

__all__ = [
    "ConfigSource",
    "ConfigType",
    "DescribeConfigsRequest",
    "DescribeConfigsResource",
    "DescribeConfigsResourceResult",
    "DescribeConfigsResponse",
    "DescribeConfigsResult",
    "DescribeConfigsSynonym",
]


class ConfigSource(enum.IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigSource: where a value comes from, highest first."""

    UNKNOWN = 0
    DYNAMIC_TOPIC_CONFIG = 1  # /config/topics/<t>
    DYNAMIC_BROKER_CONFIG = 2  # /config/brokers/<id> (Highwater has none)
    DYNAMIC_DEFAULT_BROKER_CONFIG = 3  # /config/brokers/<default>: the cluster-wide default
    STATIC_BROKER_CONFIG = 4  # server.properties or --override
    DEFAULT_CONFIG = 5  # the built-in default


class ConfigType(enum.IntEnum):
    """Kafka's DescribeConfigsResponse.ConfigType (the types Highwater's settings have)."""

    UNKNOWN = 0
    BOOLEAN = 1
    STRING = 2
    INT = 3
    LONG = 5
    DOUBLE = 6
    LIST = 7


@dataclass(frozen=True, slots=True)
class DescribeConfigsResource:
    resource_type: Int8  # ConfigResourceType: TOPIC (2) or BROKER (4)
    resource_name: str  # a topic; a broker id, or "" for the cluster-wide dynamic defaults
    configuration_keys: tuple[str, ...] | None = None  # nil: every config


@dataclass(frozen=True, slots=True)
class DescribeConfigsRequest:
    resources: tuple[DescribeConfigsResource, ...]
    include_synonyms: bool = False
    include_documentation: bool = False


@dataclass(frozen=True, slots=True)
class DescribeConfigsSynonym:
    name: str
    value: str | None
    source: Int8  # ConfigSource


@dataclass(frozen=True, slots=True)
class DescribeConfigsResourceResult:
    name: str
    value: str | None
    read_only: bool
    config_source: Int8  # ConfigSource
    is_sensitive: bool = False
    synonyms: tuple[DescribeConfigsSynonym, ...] = ()  # with include_synonyms, highest first
    config_type: Int8 = ConfigType.UNKNOWN
    documentation: str | None = None  # with include_documentation


@dataclass(frozen=True, slots=True)
class DescribeConfigsResult:
    error_code: Int16
    error_message: str | None
    resource_type: Int8
    resource_name: str
    configs: tuple[DescribeConfigsResourceResult, ...] = ()


@dataclass(frozen=True, slots=True)
class DescribeConfigsResponse:
    results: tuple[DescribeConfigsResult, ...]
    throttle_time_ms: Int32 = 0
