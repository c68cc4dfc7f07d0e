"""CreateAcls, DescribeAcls and DeleteAcls (Kafka's AclAuthorizer admin side): ACLs in
ZooKeeper (controller/zk_acls.py), each pattern rewritten by compare-and-set with a change
notification that every broker follows (broker/acl_changes.py). ALTER on the cluster to change
them, DESCRIBE to read them, as Kafka."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from broker.context import BrokerContext
from broker.core.principal import parse_principal
from controller.zk_acls import AclsChangedError, change_acls, read_all_acls
from controller.zk_types import ZkError
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
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.create_acls import (
    AclCreation,
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsMatchingAcl,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from protocol.messages.describe_acls import (
    AclDescription,
    AclFilterSpec,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)

__all__ = ["handle_create_acls", "handle_delete_acls", "handle_describe_acls"]

_ATTEMPTS = 5
_CONCRETE_TYPES = (ResourceType.TOPIC, ResourceType.GROUP, ResourceType.CLUSTER)
_CONCRETE_OPERATIONS = frozenset(AclOperation) - {AclOperation.UNKNOWN, AclOperation.ANY}
# Kafka's answer (KafkaApis) when no authorizer is configured: ACLs would have no effect.
_NO_AUTHORIZER = "no authorizer is configured on the broker (authorizer.class.name)"


async def handle_create_acls(
    ctx: BrokerContext, header: RequestHeader, request: CreateAclsRequest
) -> CreateAclsResponse:
    if not ctx.authorizing:
        failed = AclCreationResult(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)
        return CreateAclsResponse(tuple(failed for _ in request.creations))
    if not ctx.authorize_cluster(AclOperation.ALTER):
        denied = ctx.denied(AclOperation.ALTER, ResourceType.CLUSTER)
        failed = AclCreationResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
        return CreateAclsResponse(tuple(failed for _ in request.creations))
    results = []
    for creation in request.creations:
        try:
            binding = _binding(creation)
        except ValueError as exc:
            results.append(AclCreationResult(ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        code, message = await _change(ctx, binding.pattern, _adder(binding.entry))
        results.append(AclCreationResult(code, message))
    return CreateAclsResponse(tuple(results))


async def handle_describe_acls(
    ctx: BrokerContext, header: RequestHeader, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    if not ctx.authorizing:
        return DescribeAclsResponse(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)
    if not ctx.authorize_cluster(AclOperation.DESCRIBE):
        denied = ctx.denied(AclOperation.DESCRIBE, ResourceType.CLUSTER)
        return DescribeAclsResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    try:
        wanted = _filter(request.filter)
    except ValueError as exc:
        return DescribeAclsResponse(ErrorCode.INVALID_REQUEST, str(exc))
    if ctx.zk is None:
        return DescribeAclsResponse(ErrorCode.NOT_CONTROLLER, "broker has no ZooKeeper session")
    acls, _ = await ctx.zk.run(read_all_acls())  # as stored now, not as cached
    grouped: dict[ResourcePattern, list[AclDescription]] = {}
    for binding in acls.bindings():
        if wanted.matches(binding):
            e = binding.entry
            grouped.setdefault(binding.pattern, []).append(
                AclDescription(e.principal, e.host, e.operation, e.permission)
            )
    return DescribeAclsResponse(
        ErrorCode.NONE,
        None,
        tuple(
            DescribeAclsResource(p.resource_type, p.name, p.pattern_type, tuple(entries))
            for p, entries in grouped.items()
        ),
    )


async def handle_delete_acls(
    ctx: BrokerContext, header: RequestHeader, request: DeleteAclsRequest
) -> DeleteAclsResponse:
    if not ctx.authorizing:
        failed = DeleteAclsFilterResult(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)
        return DeleteAclsResponse(tuple(failed for _ in request.filters))
    if not ctx.authorize_cluster(AclOperation.ALTER):
        denied = ctx.denied(AclOperation.ALTER, ResourceType.CLUSTER)
        failed = DeleteAclsFilterResult(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
        return DeleteAclsResponse(tuple(failed for _ in request.filters))
    if ctx.zk is None:
        failed = DeleteAclsFilterResult(ErrorCode.NOT_CONTROLLER, "no ZooKeeper session")
        return DeleteAclsResponse(tuple(failed for _ in request.filters))
    results = []
    for spec in request.filters:
        try:
            wanted = _filter(spec)
        except ValueError as exc:
            results.append(DeleteAclsFilterResult(ErrorCode.INVALID_REQUEST, str(exc)))
            continue
        acls, _ = await ctx.zk.run(read_all_acls())
        matching: list[DeleteAclsMatchingAcl] = []
        error: tuple[ErrorCode, str | None] = (ErrorCode.NONE, None)
        for pattern in {b.pattern for b in acls.bindings() if wanted.matches(b)}:
            removed: set[AccessControlEntry] = set()
            drop = _dropper(wanted, pattern, removed)
            code, message = await _change(ctx, pattern, drop)
            if code != ErrorCode.NONE:
                error = (code, message)
                continue
            matching.extend(
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
        results.append(DeleteAclsFilterResult(error[0], error[1], tuple(matching)))
    return DeleteAclsResponse(tuple(results))


Entries = frozenset[AccessControlEntry]


def _adder(entry: AccessControlEntry) -> Callable[[Entries], Entries]:
    def add(old: Entries) -> Entries:
        return old | {entry}

    return add


def _dropper(
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


async def _change(
    ctx: BrokerContext, pattern: ResourcePattern, change: Callable[[Entries], Entries]
) -> tuple[ErrorCode, str | None]:
    if ctx.zk is None:
        return ErrorCode.NOT_CONTROLLER, "broker has no ZooKeeper session"
    for _ in range(_ATTEMPTS):
        try:
            await ctx.zk.run(change_acls(pattern, change))
        except AclsChangedError:
            continue
        except ZkError as exc:
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc}"
        return ErrorCode.NONE, None
    return ErrorCode.UNKNOWN_SERVER_ERROR, "the ACLs kept changing meanwhile; try again"


def _binding(creation: AclCreation) -> AclBinding:
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


def _filter(spec: AclFilterSpec) -> AclFilter:
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
