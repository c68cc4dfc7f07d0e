"""OffsetFetch: a group's committed offsets, from the coordinator's state."""

from __future__ import annotations

from dataclasses import replace

from broker.context import BrokerContext
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.offset_fetch import (
    OffsetFetchPartition,
    OffsetFetchRequest,
    OffsetFetchResponse,
)

__all__ = ["handle_offset_fetch"]


async def handle_offset_fetch(
    ctx: BrokerContext, header: RequestHeader, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, request.group_id):
        return OffsetFetchResponse((), ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if ctx.group_coordinator is None:
        return OffsetFetchResponse((), ErrorCode.COORDINATOR_NOT_AVAILABLE)
    response = ctx.group_coordinator.core.fetch(request)
    if not ctx.authorizing:
        return response

    # Kafka: topics not describable are left out of "all", refused when named.
    def describable(topic: str) -> bool:
        return ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, topic)

    if request.topics is None:
        return replace(response, topics=tuple(t for t in response.topics if describable(t.name)))
    refused = ErrorCode.TOPIC_AUTHORIZATION_FAILED
    return replace(
        response,
        topics=tuple(
            t
            if describable(t.name)
            else replace(
                t,
                partitions=tuple(
                    OffsetFetchPartition(p.partition_index, -1, refused) for p in t.partitions
                ),
            )
            for t in response.topics
        ),
    )
