"""AlterClientQuotas (key 49, KIP-546): set or remove quota values of client-quota entities
(a user, a client-id, or both; a name None is the default entity); `validate_only` checks
and changes nothing. One result per entity, in Kafka's shape."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.messages.describe_client_quotas import EntityData
from protocol.schema import Int16, Int32

__all__ = [
    "AlterClientQuotasRequest",
    "AlterClientQuotasResponse",
    "EntityData",
    "EntryData",
    "EntryResult",
    "OpData",
]


@dataclass(frozen=True, slots=True)
class OpData:
    key: str
    value: float
    remove: bool = False  # True: delete the key (value ignored)


@dataclass(frozen=True, slots=True)
class EntryData:
    entity: tuple[EntityData, ...]
    ops: tuple[OpData, ...]


@dataclass(frozen=True, slots=True)
class AlterClientQuotasRequest:
    entries: tuple[EntryData, ...]
    validate_only: bool = False


@dataclass(frozen=True, slots=True)
class EntryResult:
    error_code: Int16
    error_message: str | None
    entity: tuple[EntityData, ...]


@dataclass(frozen=True, slots=True)
class AlterClientQuotasResponse:
    entries: tuple[EntryResult, ...]
    throttle_time_ms: Int32 = 0
