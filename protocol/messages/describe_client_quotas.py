"""DescribeClientQuotas (key 48, KIP-546): the stored client quotas whose entity matches a
filter. A component names an entity type (`user`, `client-id`) and how to match it: EXACT a
name, DEFAULT the `<default>` entity, ANY any stored one; `strict`: only entities with no
other component. An entity's name None is the default (Kafka's nullable entity_name)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from protocol.schema import Int8, Int16, Int32

__all__ = [
    "ComponentData",
    "DescribeClientQuotasRequest",
    "DescribeClientQuotasResponse",
    "EntityData",
    "EntryData",
    "MatchType",
    "ValueData",
]


class MatchType(enum.IntEnum):
    """Kafka's ClientQuotaFilterComponent match types."""

    EXACT = 0
    DEFAULT = 1
    ANY = 2


@dataclass(frozen=True, slots=True)
class ComponentData:
    entity_type: str  # "user" or "client-id"
    match_type: Int8
    match: str | None = None  # EXACT's name


@dataclass(frozen=True, slots=True)
class DescribeClientQuotasRequest:
    components: tuple[ComponentData, ...] = ()
    strict: bool = False


@dataclass(frozen=True, slots=True)
class EntityData:
    entity_type: str
    entity_name: str | None  # None: the default entity


@dataclass(frozen=True, slots=True)
class ValueData:
    key: str  # producer_byte_rate, consumer_byte_rate, request_percentage
    value: float


@dataclass(frozen=True, slots=True)
class EntryData:
    entity: tuple[EntityData, ...]
    values: tuple[ValueData, ...]


@dataclass(frozen=True, slots=True)
class DescribeClientQuotasResponse:
    error_code: Int16
    error_message: str | None = None
    entries: tuple[EntryData, ...] | None = ()
    throttle_time_ms: Int32 = 0
