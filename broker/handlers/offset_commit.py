"""OffsetCommit: checked by the coordinator core, written to `__consumer_offsets`, answered
once committed (acks=all)."""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitPartitionResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopicResponse,
)

__all__ = ["handle_offset_commit"]


async def handle_offset_commit(
    ctx: BrokerContext, header: RequestHeader, request: OffsetCommitRequest
) -> OffsetCommitResponse:
    coordinator = ctx.group_coordinator
    if coordinator is None:
        return OffsetCommitResponse(
            tuple(
                OffsetCommitTopicResponse(
                    t.name,
                    tuple(
                        OffsetCommitPartitionResponse(
                            p.partition_index, ErrorCode.COORDINATOR_NOT_AVAILABLE
                        )
                        for p in t.partitions
                    ),
                )
                for t in request.topics
            )
        )
    decision = coordinator.core.commit(request, coordinator.topics(), ctx.now_ms())
    return await coordinator.write(decision)
