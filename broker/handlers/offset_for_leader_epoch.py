"""OffsetForLeaderEpoch (KIP-101/279): see broker.core.offset_for_leader_epoch."""

from __future__ import annotations

from broker.context import BrokerContext
from broker.core.offset_for_leader_epoch import answer_offset_for_leader_epoch
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
)

__all__ = ["handle_offset_for_leader_epoch"]


async def handle_offset_for_leader_epoch(
    ctx: BrokerContext, header: RequestHeader, request: OffsetForLeaderEpochRequest
) -> OffsetForLeaderEpochResponse:
    denied: frozenset[str] = frozenset()
    # Kafka: CLUSTER_ACTION (a follower) may ask about any topic, others need DESCRIBE.
    if ctx.authorizing and not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION, log_denied=False):
        denied = frozenset(
            t.topic
            for t in request.topics
            if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.topic)
        )
    return answer_offset_for_leader_epoch(ctx.state, request, denied)
