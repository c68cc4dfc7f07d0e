"""OffsetCommit: checked by the coordinator core, written to `__consumer_offsets`, answered
once committed (acks=all)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from broker.context import BrokerContext
from broker.core.request_acls import offset_commit_denied
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetCommitTopicResponse,
)

__all__ = ["handle_offset_commit"]


async def handle_offset_commit(
    ctx: BrokerContext, header: RequestHeader, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    coordinator = ctx.group_coordinator
    not_read = offset_commit_denied(request, ctx.authorize)
    if not_read is None:
        return _all(request.topics, ErrorCode.GROUP_AUTHORIZATION_FAILED)
    if coordinator is None:
        return _all(request.topics, ErrorCode.COORDINATOR_NOT_AVAILABLE)
    # Kafka: READ on each topic; the others are refused and the rest committed.
    denied = [t for t in request.topics if t.name in not_read]
    if denied:
        allowed = tuple(t for t in request.topics if t not in denied)
        refused = _all(denied, ErrorCode.TOPIC_AUTHORIZATION_FAILED)
        if not allowed:
            return refused
        request = replace(request, topics=allowed)
    decision = coordinator.core.commit(request, coordinator.topics(), ctx.wall_ms())
    response: OffsetCommitResponse = await coordinator.write(decision)
    if denied:
        response = replace(response, topics=response.topics + refused.topics)
    return response


def _all(topics: Sequence[OffsetCommitTopic], code: ErrorCode) -> OffsetCommitResponse:
    return OffsetCommitResponse(
        tuple(
            OffsetCommitTopicResponse(
                t.name,
                tuple(OffsetCommitPartitionResponse(p.partition_index, code) for p in t.partitions),
            )
            for t in topics
        )
    )
