"""OffsetFetch: a group's committed offsets, from the coordinator's state."""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

__all__ = ["handle_offset_fetch"]


async def handle_offset_fetch(
    ctx: BrokerContext, header: RequestHeader, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    if ctx.group_coordinator is None:
        return OffsetFetchResponse((), ErrorCode.COORDINATOR_NOT_AVAILABLE)
    return ctx.group_coordinator.core.fetch(request)
