"""CreateAcls and DeleteAcls as Kafka's AclAuthorizer checks and applies them: which binding a
creation names, which filter a deletion names, and each as a change of one pattern's entries
(`controller.zk_acls.change_acls` writes it). The broker's handlers (broker/handlers/acls.py)
and the simulator share these."""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, TypeVar

from broker.core.principal import parse_principal
from protocol.acl import (
    WILDCARD,
    AccessControlEntry,
    AclBinding,
    AclFilter,
    AclOperation,
    PatternType,
    Permission,
    ResourcePattern,
    ResourceType,
)
from protocol.messages.create_acls import AclCreation
from protocol.messages.describe_acls import AclFilterSpec

__all__ = ["Entries", "adder", "binding_of", "dropper", "filter_of"]

_CONCRETE_TYPES: Final = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER)
_CONCRETE_OPERATIONS: Final = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}

Entries = frozenset[AccessControlEntry]


def adder(entry: AccessControlEntry) -> Callable[[Entries], Entries]:
    def add(old: Entries) -> Entries:
        return old | {entry}

    return add


def dropper(
    wanted: AclFilter, pattern: ResourcePattern, removed: set[AccessControlEntry]
) -> Callable[[Entries], Entries]:
    """A change dropping the entries `wanted` matches; those dropped land in `removed` (the
    last attempt's, when a compare-and-set is retried)."""

    def drop(old: Entries) -> Entries:
        gone = {e for e in old if wanted.matches(AclBinding(pattern, e))}
        removed.clear()
        removed.update(gone)
        return old - gone

    return drop


def binding_of(creation: AclCreation) -> AclBinding:
    """A creation as Kafka checks it: concrete type, pattern, operation and permission; a
    Type:name principal; CLUSTER named kafka-cluster."""
    resource_type = _enum(ResourceType, creation.resource_type, "resource type")
    if resource_type not in _CONCRETE_TYPES:
        raise ValueError(f"resource type {resource_type.name}: TOPIC, GROUP or CLUSTER")
    pattern_type = _enum(PatternType, creation.resource_pattern_type, "pattern type")
    if pattern_type not in (PatternType.LITERAL, PatternType.PREFIXED):
        raise ValueError(f"pattern type {pattern_type.name}: LITERAL or PREFIXED")
    if not creation.resource_name or "/" in creation.resource_name:
        raise ValueError("a resource name is not empty and has no /")
    if resource_type is ResourceType.CLUSTER and creation.resource_name != "kafka-cluster":
        raise ValueError("the CLUSTER resource is named kafka-cluster")
    if pattern_type is PatternType.PREFIXED and creation.resource_name == WILDCARD:
        raise ValueError("a PREFIXED pattern is not *")
    operation = _enum(AclOperation, creation.operation, "operation")
    if operation not in _CONCRETE_OPERATIONS:
        raise ValueError(f"operation {operation.name} is not one an ACL can hold")
    permission = _enum(Permission, creation.permission_type, "permission")
    if permission not in (Permission.ALLOW, Permission.DENY):
        raise ValueError(f"permission {permission.name}: ALLOW or DENY")
    parse_principal(creation.principal)
    if not creation.host:
        raise ValueError("a host is * or an address")
    return AclBinding(
        ResourcePattern(resource_type, creation.resource_name, pattern_type),
        AccessControlEntry(creation.principal, creation.host, operation, permission),
    )


def filter_of(spec: AclFilterSpec) -> AclFilter:
    return AclFilter(
        _enum(ResourceType, spec.resource_type, "resource type"),
        spec.resource_name,
        _enum(PatternType, spec.pattern_type, "pattern type"),
        spec.principal,
        spec.host,
        _enum(AclOperation, spec.operation, "operation"),
        _enum(Permission, spec.permission_type, "permission"),
    )


E = TypeVar("E", ResourceType, PatternType, AclOperation, Permission)


def _enum(kind: type[E], value: int, what: str) -> E:
    try:
        found = kind(value)
    except ValueError:
        raise ValueError(f"unknown {what} {value}") from None
    if found.name == "UNKNOWN":
        raise ValueError(f"unknown {what} {value}")
    return found
