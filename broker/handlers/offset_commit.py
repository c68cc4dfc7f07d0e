"""OffsetCommit: checked by the coordinator core, written to `__consumer_offsets`, answered
once committed (acks=all)."""

from __future__ import annotations

from broker.context import BrokerContext
from broker.core.request_acls import (
    offset_commit_denied,
    offset_commit_refused,
    split_offset_commit,
)
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitRequest,
    OffsetCommitResponse,
)

__all__ = ["handle_offset_commit"]


async def handle_offset_commit(
    ctx: BrokerContext, header: RequestHeader, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    split = split_offset_commit(request, offset_commit_denied(request, ctx.authorize))
    if split.request is None:
        return split.refused
    coordinator = ctx.group_coordinator
    if not coordinator.active:
        return offset_commit_refused(request.topics, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    decision = coordinator.core.commit(split.request, coordinator.topics(), ctx.wall_ms())
    response: OffsetCommitResponse = await coordinator.write(decision)
    return split.merged(response)
