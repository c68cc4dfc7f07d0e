"""DeleteGroups: empty groups go, with their offsets (each group its own write)."""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.delete_groups import DeletedGroup, DeleteGroupsRequest, DeleteGroupsResponse

__all__ = ["handle_delete_groups"]


async def handle_delete_groups(
    ctx: BrokerContext, header: RequestHeader, request: DeleteGroupsRequest
) -> DeleteGroupsResponse:
    coordinator = ctx.group_coordinator
    results = []
    for group_id in dict.fromkeys(request.groups_names):
        if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, group_id):
            code = ErrorCode.GROUP_AUTHORIZATION_FAILED
        elif not coordinator.active:
            code = ErrorCode.COORDINATOR_NOT_AVAILABLE
        else:
            code = await coordinator.write(coordinator.core.delete_group(group_id))
        results.append(DeletedGroup(group_id, code))
    return DeleteGroupsResponse(tuple(results))
