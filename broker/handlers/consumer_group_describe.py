"""ConsumerGroupDescribe (KIP-848): state, epochs, assignor and members of groups this broker
coordinates (others: NOT_COORDINATOR, each)."""

from __future__ import annotations

from broker.context import BrokerContext
from broker.core.authorizer import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_describe import (
    ConsumerGroupDescribeRequest,
    ConsumerGroupDescribeResponse,
    DescribedGroup,
)

__all__ = ["handle_consumer_group_describe"]


async def handle_consumer_group_describe(
    ctx: BrokerContext, header: RequestHeader, request: ConsumerGroupDescribeRequest
) -> ConsumerGroupDescribeResponse:
    coordinator = ctx.group_coordinator
    groups = tuple(
        DescribedGroup(g, ErrorCode.GROUP_AUTHORIZATION_FAILED)
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, g)
        else coordinator.core.describe(g)
        if coordinator is not None
        else DescribedGroup(g, ErrorCode.COORDINATOR_NOT_AVAILABLE)
        for g in dict.fromkeys(request.group_ids)
    )
    return ConsumerGroupDescribeResponse(groups)
