"""Kafka's ACL model (org.apache.kafka.common.acl and .resource): resource patterns, entries,
bindings, filters, and every ACL indexed for lookups. Shared by the broker's authorizer and the
controller's ZooKeeper code, as Kafka keeps it in its common clients package. Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Final

__all__ = [
    "CLUSTER_NAME",
    "WILDCARD",
    "AccessControlEntry",
    "AclBinding",
    "AclFilter",
    "AclOperation",
    "Acls",
    "PatternType",
    "Permission",
    "ResourcePattern",
    "ResourceType",
]

CLUSTER_NAME: Final = "kafka-cluster"  # Kafka's one CLUSTER resource
WILDCARD: Final = "*"


class ResourceType(enum.IntEnum):
    """Kafka's codes (org.apache.kafka.common.resource.ResourceType)."""

    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12


class Permission(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


# What an ALLOW of the key also allows (Kafka's AclAuthorizer: DESCRIBE is implied by READ,
# WRITE, DELETE, ALTER; DESCRIBE_CONFIGS by ALTER_CONFIGS).
@dataclass(frozen=True, slots=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType = PatternType.LITERAL


@dataclass(frozen=True, slots=True, order=True)
class AccessControlEntry:
    principal: str  # "User:alice", "User:*"
    host: str  # "*" or an address
    operation: AclOperation
    permission: Permission


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True, slots=True)
class AclFilter:
    """Kafka's AclBindingFilter: None (or ANY) matches anything; MATCH patterns match the
    patterns that would apply to that literal name."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: Permission = Permission.ANY

    def matches(self, binding: AclBinding) -> bool:
        p, e = binding.pattern, binding.entry
        if self.resource_type not in (ResourceType.ANY, p.resource_type):
            return False
        if self.pattern_type is PatternType.MATCH:
            if self.name is None:
                return True
            if p.pattern_type is PatternType.LITERAL:
                if p.name not in (self.name, WILDCARD):
                    return False
            elif not self.name.startswith(p.name):
                return False
        else:
            if self.pattern_type not in (PatternType.ANY, p.pattern_type):
                return False
            if self.name is not None and self.name != p.name:
                return False
        return (
            self.principal in (None, e.principal)
            and self.host in (None, e.host)
            and self.operation in (AclOperation.ANY, e.operation)
            and self.permission in (Permission.ANY, e.permission)
        )


@dataclass(frozen=True, slots=True)
class Acls:
    """Every ACL, indexed for lookups: literal ones by (type, name), prefixed ones by type."""

    by_pattern: Mapping[ResourcePattern, frozenset[AccessControlEntry]] = field(
        default_factory=dict
    )
    _prefixed: Mapping[ResourceType, tuple[ResourcePattern, ...]] = field(
        default_factory=dict, compare=False
    )

    @classmethod
    def of(cls, bindings: Iterable[AclBinding]) -> Acls:
        grouped: dict[ResourcePattern, set[AccessControlEntry]] = {}
        for binding in bindings:
            grouped.setdefault(binding.pattern, set()).add(binding.entry)
        return cls.from_patterns({p: frozenset(e) for p, e in grouped.items()})

    @classmethod
    def from_patterns(
        cls, by_pattern: Mapping[ResourcePattern, frozenset[AccessControlEntry]]
    ) -> Acls:
        prefixed: dict[ResourceType, list[ResourcePattern]] = {}
        for pattern, entries in by_pattern.items():
            if entries and pattern.pattern_type is PatternType.PREFIXED:
                prefixed.setdefault(pattern.resource_type, []).append(pattern)
        kept = {p: e for p, e in by_pattern.items() if e}
        return cls(kept, {t: tuple(ps) for t, ps in prefixed.items()})

    def bindings(self) -> Iterator[AclBinding]:
        for pattern in sorted(self.by_pattern):
            for entry in sorted(self.by_pattern[pattern]):
                yield AclBinding(pattern, entry)

    def matching(self, resource_type: ResourceType, name: str) -> list[AccessControlEntry]:
        """The entries of every pattern that applies to this resource."""
        found: list[AccessControlEntry] = []
        for literal in (name, WILDCARD):
            found.extend(self.by_pattern.get(ResourcePattern(resource_type, literal), ()))
        for pattern in self._prefixed.get(resource_type, ()):
            if name.startswith(pattern.name):
                found.extend(self.by_pattern[pattern])
        return found
