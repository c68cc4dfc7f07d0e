"""Kafka's AclAuthorizer, as a pure function of the ACLs and the request's facts.

An ACL binds a resource pattern (TOPIC, GROUP or CLUSTER; a LITERAL name, `*` for all, or a
PREFIXED name) to an entry: principal (`User:alice`, `User:*`), host (`*` or an address),
operation and ALLOW or DENY. `authorize` answers as Kafka does: super users may do anything;
a matching DENY wins over any ALLOW; READ, WRITE, DELETE and ALTER imply DESCRIBE, ALTER_CONFIGS
implies DESCRIBE_CONFIGS, ALL matches every operation; a resource that no ACL names at all is
allowed only with `allow.everyone.if.no.acl.found`. The ACL model itself is protocol.acl.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from broker.core.principal import Principal
from protocol.acl import (
    WILDCARD,
    AclOperation,
    Acls,
    PatternType,
    Permission,
    ResourceType,
)

__all__ = ["AuthorizerSettings", "authorize", "authorize_any"]

_IMPLIED_BY: Final[Mapping[AclOperation, frozenset[AclOperation]]] = {
    AclOperation.DESCRIBE: frozenset(
        {
            AclOperation.DESCRIBE,
            AclOperation.READ,
            AclOperation.WRITE,
            AclOperation.DELETE,
            AclOperation.ALTER,
        }
    ),
    AclOperation.DESCRIBE_CONFIGS: frozenset(
        {AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS}
    ),
}


@dataclass(frozen=True, slots=True)
class AuthorizerSettings:
    super_users: frozenset[Principal] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def authorize(
    acls: Acls,
    settings: AuthorizerSettings,
    principal: Principal,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
    name: str,
) -> bool:
    """Kafka's AclAuthorizer.authorize for one action."""
    if principal in settings.super_users:
        return True
    entries = acls.matching(resource_type, name)
    if not entries:
        return settings.allow_everyone_if_no_acl_found
    principals = (str(principal), f"{principal.type}:{WILDCARD}")
    applies = [e for e in entries if e.principal in principals and e.host in (host, WILDCARD)]
    if any(
        e.permission is Permission.DENY and e.operation in (operation, AclOperation.ALL)
        for e in applies
    ):
        return False
    allowing = _IMPLIED_BY.get(operation, frozenset({operation}))
    return any(
        e.permission is Permission.ALLOW
        and (e.operation is AclOperation.ALL or e.operation in allowing)
        for e in applies
    )


def authorize_any(
    acls: Acls,
    settings: AuthorizerSettings,
    principal: Principal,
    host: str,
    operation: AclOperation,
    resource_type: ResourceType,
) -> bool:
    """May the principal do `operation` on at least one resource of this type? (Kafka's
    authorizeByResourceType, for KIP-679's "WRITE on any topic" in InitProducerId): yes for
    super users, or with an ALLOW on some pattern, unless a DENY on every resource (`*`)."""
    if principal in settings.super_users:
        return True
    principals = (str(principal), f"{principal.type}:{WILDCARD}")
    applies = [
        (pattern, e)
        for pattern, entries in acls.by_pattern.items()
        if pattern.resource_type is resource_type
        for e in entries
        if e.principal in principals and e.host in (host, WILDCARD)
    ]
    if not any(p.resource_type is resource_type for p in acls.by_pattern):
        return settings.allow_everyone_if_no_acl_found
    if any(
        p.name == WILDCARD
        and p.pattern_type is PatternType.LITERAL
        and e.permission is Permission.DENY
        and e.operation in (operation, AclOperation.ALL)
        for p, e in applies
    ):
        return False
    return any(
        e.permission is Permission.ALLOW and e.operation in (operation, AclOperation.ALL)
        for _, e in applies
    )
