"""OffsetFetch: a group's committed offsets, from the coordinator's state."""

from __future__ import annotations

from broker.context import BrokerContext
from broker.core.request_acls import describable_offsets, may_fetch_offsets
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

__all__ = ["handle_offset_fetch"]


async def handle_offset_fetch(
    ctx: BrokerContext, header: RequestHeader, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    if not may_fetch_offsets(request, ctx.authorize):
        return OffsetFetchResponse((), ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if not ctx.group_coordinator.active:
        return OffsetFetchResponse((), ErrorCode.COORDINATOR_NOT_AVAILABLE)
    response = ctx.group_coordinator.core.fetch(request)
    if not ctx.authorizing:
        return response
    return describable_offsets(request, response, ctx.authorize)
