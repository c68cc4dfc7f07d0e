"""ListGroups: the groups this broker coordinates (an admin asks every broker)."""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.list_groups import ListGroupsRequest, ListGroupsResponse

__all__ = ["handle_list_groups"]


async def handle_list_groups(
    ctx: BrokerContext, header: RequestHeader, request: ListGroupsRequest
) -> ListGroupsResponse:
    if not ctx.group_coordinator.active:
        return ListGroupsResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    groups = ctx.group_coordinator.core.list_groups(request.states_filter)
    # Kafka: DESCRIBE on the cluster lists every group, else those the principal may describe.
    if ctx.authorizing and not ctx.authorize_cluster(AclOperation.DESCRIBE):
        groups = [
            g
            for g in groups
            if ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ]
    return ListGroupsResponse(ErrorCode.NONE, tuple(groups))
