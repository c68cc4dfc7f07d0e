"""OffsetDelete: forget a group's offsets for topics none of its members subscribes to."""

from __future__ import annotations

from dataclasses import replace

from broker.context import BrokerContext
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.offset_delete import (
    OffsetDeletePartitionResponse,
    OffsetDeleteRequest,
    OffsetDeleteResponse,
    OffsetDeleteTopicResponse,
)

__all__ = ["handle_offset_delete"]


async def handle_offset_delete(
    ctx: BrokerContext, header: RequestHeader, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    if not ctx.authorize(AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return OffsetDeleteResponse(ErrorCode.GROUP_AUTHORIZATION_FAILED)
    coordinator = ctx.group_coordinator
    if not coordinator.active:
        return OffsetDeleteResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    denied = [
        t
        for t in request.topics
        if not ctx.authorize(AclOperation.READ, ResourceType.TOPIC, t.name)
    ]
    if denied:
        request = replace(request, topics=tuple(t for t in request.topics if t not in denied))
    response: OffsetDeleteResponse = await coordinator.write(
        coordinator.core.delete_offsets(request)
    )
    if not denied:
        return response
    refused = tuple(
        OffsetDeleteTopicResponse(
            t.name,
            tuple(
                OffsetDeletePartitionResponse(
                    p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED
                )
                for p in t.partitions
            ),
        )
        for t in denied
    )
    return replace(response, topics=response.topics + refused)
