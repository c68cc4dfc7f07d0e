"""CreateAcls, DescribeAcls and DeleteAcls (Kafka's AclAuthorizer admin side): ACLs in
ZooKeeper (controller/zk_acls.py), each pattern rewritten by compare-and-set with a change
notification that every broker follows (broker/acl_changes.py). ALTER on the cluster to change
them, DESCRIBE to read them, as Kafka."""

from __future__ import annotations

from collections.abc import Callable

from broker.context import BrokerContext
from broker.core.acl_admin import (
    ACL_CHANGE_ATTEMPTS,
    KEPT_CHANGING,
    Entries,
    PatternChange,
    filter_of,
    plan_creations,
    plan_deletions,
)
from broker.core.request_acls import may_change_acls, may_describe_acls
from controller.zk_acls import AclsChangedError, change_acls, read_all_acls
from controller.zk_types import ZkError
from protocol.acl import AclOperation, ResourcePattern, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.create_acls import (
    AclCreationResult,
    CreateAclsRequest,
    CreateAclsResponse,
)
from protocol.messages.delete_acls import (
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
)
from protocol.messages.describe_acls import (
    AclDescription,
    DescribeAclsRequest,
    DescribeAclsResource,
    DescribeAclsResponse,
)

__all__ = ["handle_create_acls", "handle_delete_acls", "handle_describe_acls"]

# Kafka's answer (KafkaApis) when no authorizer is configured: ACLs would have no effect.
_NO_AUTHORIZER = "no authorizer is configured on the broker (authorizer.class.name)"


async def handle_create_acls(
    ctx: BrokerContext, header: RequestHeader, request: CreateAclsRequest
) -> CreateAclsResponse:
    if not ctx.authorizing:
        failed = AclCreationResult(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)
        return CreateAclsResponse(tuple(failed for _ in request.creations))
    results = []
    denied = ctx.denied(AclOperation.ALTER, ResourceType.CLUSTER)
    for planned in plan_creations(request, may_alter=may_change_acls(ctx.authorize), denied=denied):
        if isinstance(planned, PatternChange):
            planned = AclCreationResult(*await _change(ctx, planned.pattern, planned.change))
        results.append(planned)
    return CreateAclsResponse(tuple(results))


async def handle_describe_acls(
    ctx: BrokerContext, header: RequestHeader, request: DescribeAclsRequest
) -> DescribeAclsResponse:
    if not ctx.authorizing:
        return DescribeAclsResponse(ErrorCode.SECURITY_DISABLED, _NO_AUTHORIZER)
    if not may_describe_acls(ctx.authorize):
        denied = ctx.denied(AclOperation.DESCRIBE, ResourceType.CLUSTER)
        return DescribeAclsResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED, denied)
    try:
        wanted = filter_of(request.filter)
    except ValueError as exc:
        return DescribeAclsResponse(ErrorCode.INVALID_REQUEST, str(exc))
    if ctx.zk.absent:
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
    may_alter = may_change_acls(ctx.authorize)
    zk = ctx.zk
    if may_alter and zk.absent:
        failed = DeleteAclsFilterResult(ErrorCode.NOT_CONTROLLER, "no ZooKeeper session")
        return DeleteAclsResponse(tuple(failed for _ in request.filters))
    denied = ctx.denied(AclOperation.ALTER, ResourceType.CLUSTER)
    results = []
    for planned in plan_deletions(request, may_alter=may_alter, denied=denied):
        if not isinstance(planned, DeleteAclsFilterResult):
            acls, _ = await zk.run(read_all_acls())  # present: refused above otherwise
            for pattern in planned.patterns(acls.bindings()):
                planned.written(pattern, await _change(ctx, pattern, planned.change(pattern)))
            planned = planned.result()
        results.append(planned)
    return DeleteAclsResponse(tuple(results))


async def _change(
    ctx: BrokerContext, pattern: ResourcePattern, change: Callable[[Entries], Entries]
) -> tuple[ErrorCode, str | None]:
    if ctx.zk.absent:
        return ErrorCode.NOT_CONTROLLER, "broker has no ZooKeeper session"
    for _ in range(ACL_CHANGE_ATTEMPTS):
        try:
            await ctx.zk.run(change_acls(pattern, change))
        except AclsChangedError:
            continue
        except ZkError as exc:
            return ErrorCode.UNKNOWN_SERVER_ERROR, f"ZooKeeper: {exc}"
        return ErrorCode.NONE, None
    return KEPT_CHANGING
