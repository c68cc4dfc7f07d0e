"""Client-quota entities as DescribeClientQuotas and AlterClientQuotas name them (a `user`
and/or a `client-id`, a name None for the default) and as ZooKeeper stores them
(`/config/users/<u>`, `/config/users/<u>/clients/<c>`, `/config/clients/<c>`, names
sanitized), and Kafka's filter matching (ZkAdminManager.describeClientQuotas)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final

from broker.client_quotas import quota_entity_of
from controller import zk_data
from controller.zk_configs import CLIENTS, CLIENTS_OF_USER, USERS, sanitize_entity_name
from protocol.messages.describe_client_quotas import ComponentData, EntityData, MatchType

__all__ = ["CLIENT_ID", "USER", "api_entity", "matches", "stored_entity"]

USER: Final = "user"  # Kafka's ClientQuotaEntity.USER
CLIENT_ID: Final = "client-id"  # ClientQuotaEntity.CLIENT_ID
_DEFAULT: Final = zk_data.DEFAULT_BROKER_ENTITY


def stored_entity(entity: Sequence[EntityData]) -> tuple[str, str] | str:
    """(USERS or CLIENTS, stored name) of an API entity, or why it is not one."""
    names: dict[str, str | None] = {}
    for part in entity:
        if part.entity_type not in (USER, CLIENT_ID):
            return f"unsupported quota entity type {part.entity_type!r}"
        if part.entity_type in names:
            return f"entity type {part.entity_type!r} given twice"
        if part.entity_name is not None and not part.entity_name:
            return f"an empty {part.entity_type} name (the default is a null name)"
        names[part.entity_type] = part.entity_name
    if not names:
        return "an entity names a user, a client-id, or both"
    user = _stored_name(names[USER]) if USER in names else None
    client = _stored_name(names[CLIENT_ID]) if CLIENT_ID in names else None
    if user is None:
        assert client is not None
        return CLIENTS, client
    return USERS, user if client is None else f"{user}{CLIENTS_OF_USER}{client}"


def api_entity(entity_type: str, stored_name: str) -> tuple[EntityData, ...]:
    """A stored entity as the API names it (user first, as Kafka lists it)."""
    entity = quota_entity_of(entity_type, stored_name)
    assert entity is not None
    parts = []
    if entity.user is not None:
        parts.append(EntityData(USER, _api_name(entity.user)))
    if entity.client_id is not None:
        parts.append(EntityData(CLIENT_ID, _api_name(entity.client_id)))
    return tuple(parts)


def matches(
    entity: Sequence[EntityData], components: Sequence[ComponentData], strict: bool
) -> bool:
    """Whether a stored entity passes DescribeClientQuotas' filter: every component matches
    its part (EXACT a name, DEFAULT the default, ANY any), and with `strict` it has no other."""
    names = {part.entity_type: part.entity_name for part in entity}
    for component in components:
        if component.entity_type not in names:
            return False
        name = names[component.entity_type]
        if component.match_type == MatchType.EXACT and name != component.match:
            return False
        if component.match_type == MatchType.DEFAULT and name is not None:
            return False
    return not strict or len(names) == len(components)


def _stored_name(name: str | None) -> str:
    return _DEFAULT if name is None else sanitize_entity_name(name)


def _api_name(name: str) -> str | None:
    return None if name == _DEFAULT else name
