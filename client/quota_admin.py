"""Client quotas through any broker (Kafka's Admin.describeClientQuotas and
alterClientQuotas, KIP-546), over an `Admin`. An entity is a user and/or a client-id; a name
None is the default entity (`<default>` in ZooKeeper)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Final

from client.admin import Admin
from client.errors import error_for_code
from protocol.errors import ErrorCode
from protocol.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    EntryData,
    OpData,
)
from protocol.messages.describe_client_quotas import (
    ComponentData,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    EntityData,
    MatchType,
)

__all__ = [
    "CLIENT_ID",
    "QUOTA_KEYS",
    "USER",
    "QuotaEntity",
    "alter_client_quotas",
    "describe_client_quotas",
]

USER: Final = "user"
CLIENT_ID: Final = "client-id"
QUOTA_KEYS: Final = ("producer_byte_rate", "consumer_byte_rate", "request_percentage")
_UNSET: Final = ""  # a part the entity does not have


@dataclass(frozen=True, slots=True)
class QuotaEntity:
    """Each part: a name, None for the default, or "" (the entity has no such part)."""

    user: str | None = _UNSET
    client_id: str | None = _UNSET

    def parts(self) -> tuple[EntityData, ...]:
        parts = []
        if self.user != _UNSET:
            parts.append(EntityData(USER, self.user))
        if self.client_id != _UNSET:
            parts.append(EntityData(CLIENT_ID, self.client_id))
        return tuple(parts)

    def __str__(self) -> str:
        """As kafka-configs describes it: user-principal 'alice', the default client-id."""
        said = []
        if self.user != _UNSET:
            said.append(_said("user-principal", self.user))
        if self.client_id != _UNSET:
            said.append(_said("client-id", self.client_id))
        return ", ".join(said)

    @classmethod
    def of(cls, parts: Sequence[EntityData]) -> QuotaEntity:
        names = {p.entity_type: p.entity_name for p in parts}
        return cls(names.get(USER, _UNSET), names.get(CLIENT_ID, _UNSET))


def _said(kind: str, name: str | None) -> str:
    return f"the default {kind}" if name is None else f"{kind} '{name}'"


async def describe_client_quotas(
    admin: Admin, entity: QuotaEntity | None = None, *, entity_types: Sequence[str] = ()
) -> dict[QuotaEntity, dict[str, float]]:
    """The stored quotas of exactly `entity`, or (None) of every entity with each of
    `entity_types` (none: every entity)."""
    if entity is not None:
        components = tuple(
            ComponentData(p.entity_type, MatchType.DEFAULT)
            if p.entity_name is None
            else ComponentData(p.entity_type, MatchType.EXACT, p.entity_name)
            for p in entity.parts()
        )
        request = DescribeClientQuotasRequest(components, strict=True)
    else:
        components = tuple(ComponentData(t, MatchType.ANY) for t in entity_types)
        request = DescribeClientQuotasRequest(components, strict=False)
    response: DescribeClientQuotasResponse = await admin.send(request)
    if response.error_code != ErrorCode.NONE:
        raise error_for_code(response.error_code, "describe client quotas", response.error_message)
    return {
        QuotaEntity.of(e.entity): {v.key: v.value for v in e.values} for e in response.entries or ()
    }


async def alter_client_quotas(
    admin: Admin,
    entity: QuotaEntity,
    set_quotas: Mapping[str, float],
    delete_quotas: Sequence[str] = (),
    *,
    validate_only: bool = False,
) -> None:
    ops = [OpData(k, float(v)) for k, v in set_quotas.items()]
    ops += [OpData(k, 0.0, remove=True) for k in delete_quotas]
    request = AlterClientQuotasRequest((EntryData(entity.parts(), tuple(ops)),), validate_only)
    response: AlterClientQuotasResponse = await admin.send(request)
    for result in response.entries:
        if result.error_code != ErrorCode.NONE:
            raise error_for_code(
                result.error_code, f"alter quotas of {entity}", result.error_message
            )
