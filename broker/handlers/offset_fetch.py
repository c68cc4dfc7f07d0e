"""OffsetFetch: a group's committed offsets, from the coordinator's state."""

from __future__ import annotations

from broker.context import BrokerContext
from broker.core.request_acls import authorized_offset_fetch
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.offset_fetch import OffsetFetchRequest, OffsetFetchResponse

__all__ = ["handle_offset_fetch"]


async def handle_offset_fetch(
    ctx: BrokerContext, header: RequestHeader, request: OffsetFetchRequest
) -> OffsetFetchResponse:
    coordinator = ctx.group_coordinator

    def fetch(request: OffsetFetchRequest) -> OffsetFetchResponse:
        if not coordinator.active:  # after the group check, as KafkaApis
            return OffsetFetchResponse((), ErrorCode.COORDINATOR_NOT_AVAILABLE)
        return coordinator.core.fetch(request)

    return authorized_offset_fetch(request, fetch, ctx.authorize if ctx.authorizing else None)
