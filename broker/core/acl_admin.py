"""CreateAcls and DeleteAcls as Kafka's AclAuthorizer checks and applies them: the refusal
without ALTER on the cluster, which binding a creation names, which filter a deletion names,
and each as a change of one pattern's entries (`controller.zk_acls.change_acls` writes it).
The broker's handlers (broker/handlers/acls.py) and the simulator plan with these, write each
change, and build the answers with them."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
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
from protocol.errors import ErrorCode
from protocol.messages.create_acls import AclCreation, AclCreationResult, CreateAclsRequest
from protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
)
from protocol.messages.describe_acls import AclFilterSpec

__all__ = [
    "ACL_CHANGE_ATTEMPTS",
    "KEPT_CHANGING",
    "Entries",
    "FilterDeletion",
    "Outcome",
    "PatternChange",
    "adder",
    "binding_of",
    "dropper",
    "filter_of",
    "plan_creations",
    "plan_deletions",
]

# A pattern's compare-and-set is tried this often when another writer keeps coming first.
ACL_CHANGE_ATTEMPTS: Final = 5
Outcome = tuple[ErrorCode, str | None]
KEPT_CHANGING: Final[Outcome] = (
    ErrorCode.UNKNOWN_SERVER_ERROR,
    "the ACLs kept changing meanwhile; try again",
)

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


@dataclass(frozen=True, slots=True)
class PatternChange:
    """A creation's write: `change` applied to `pattern`'s entries."""

    pattern: ResourcePattern
    change: Callable[[Entries], Entries]


@dataclass
class FilterDeletion:
    """One DeleteAcls filter's answer, built pattern by pattern as each pattern's change is
    written: the entries removed (Kafka's DeleteAclsMatchingAcl) and the last failure."""

    wanted: AclFilter
    matching: list[DeleteAclsMatchingAcl] = field(default_factory=list)
    error: Outcome = (ErrorCode.NONE, None)
    _removed: set[AccessControlEntry] = field(default_factory=set)

    def patterns(self, bindings: Iterable[AclBinding]) -> list[ResourcePattern]:
        """The stored patterns holding an entry this filter matches, in a fixed order."""
        return sorted({b.pattern for b in bindings if self.wanted.matches(b)})

    def change(self, pattern: ResourcePattern) -> Callable[[Entries], Entries]:
        """The change to write to `pattern`, then tell `written` its outcome."""
        self._removed = set()
        return dropper(self.wanted, pattern, self._removed)

    def written(self, pattern: ResourcePattern, outcome: Outcome) -> None:
        removed = self._removed
        if outcome[0] != ErrorCode.NONE:
            self.error = outcome
            return
        self.matching.extend(
            DeleteAclsMatchingAcl(
                ErrorCode.NONE,
                None,
                pattern.resource_type,
                pattern.name,
                pattern.pattern_type,
                e.principal,
                e.host,
                e.operation,
                e.permission,
            )
            for e in sorted(removed)
        )

    def result(self) -> DeleteAclsFilterResult:
        return DeleteAclsFilterResult(self.error[0], self.error[1], tuple(self.matching))


def plan_creations(
    request: CreateAclsRequest, *, may_alter: bool, denied: str
) -> list[AclCreationResult | PatternChange]:
    """Each creation's answer, or the change to write for it (the write's outcome is its
    answer): CLUSTER_AUTHORIZATION_FAILED (`denied` says why) for every one without ALTER on
    the cluster, INVALID_REQUEST for a binding Kafka would not store."""
    if not may_alter:
        failed = AclCreationResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
        return [failed for _ in request.creations]
    planned: list[AclCreationResult | PatternChange] = []
    for creation in request.creations:
        try:
            binding = binding_of(creation)
        except ValueError as exc:
            planned.append(AclCreationResult(ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        planned.append(PatternChange(binding.pattern, adder(binding.entry)))
    return planned


def plan_deletions(
    request: DeleteAclsRequest, *, may_alter: bool, denied: str
) -> list[DeleteAclsFilterResult | FilterDeletion]:
    """Each filter's answer, or its deletion to carry out (read the stored ACLs, write a change
    to each of its `patterns`): refused as `plan_creations` refuses, INVALID_REQUEST for a
    filter that names an unknown type, pattern type, operation or permission."""
    if not may_alter:
        failed = DeleteAclsFilterResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
        return [failed for _ in request.filters]
    planned: list[DeleteAclsFilterResult | FilterDeletion] = []
    for spec in request.filters:
        try:
            planned.append(FilterDeletion(filter_of(spec)))
        except ValueError as exc:
            planned.append(DeleteAclsFilterResult(ErrorCode.INVALID_REQUEST, str(exc)))
    return planned


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
