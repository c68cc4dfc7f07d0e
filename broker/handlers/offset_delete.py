"""OffsetDelete: forget a group's offsets for topics none of its members subscribes to."""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.offset_delete import OffsetDeleteRequest, OffsetDeleteResponse

__all__ = ["handle_offset_delete"]


async def handle_offset_delete(
    ctx: BrokerContext, header: RequestHeader, request: OffsetDeleteRequest
) -> OffsetDeleteResponse:
    coordinator = ctx.group_coordinator
    if coordinator is None:
        return OffsetDeleteResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return await coordinator.write(coordinator.core.delete_offsets(request))
