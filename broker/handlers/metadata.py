"""Metadata: brokers, controller and topics, from this broker's metadata cache."""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.codec import RequestHeader
from protocol.messages.metadata import MetadataRequest, MetadataResponse

__all__ = ["handle_metadata"]


async def handle_metadata(
    ctx: BrokerContext, header: RequestHeader, request: MetadataRequest
) -> MetadataResponse:
    cache = ctx.metadata
    return MetadataResponse(
        brokers=tuple(cache.brokers[b] for b in sorted(cache.brokers)),
        cluster_id=ctx.cluster_id,
        controller_id=cache.controller_id,
        topics=cache.topic_metadata(request.topics),
        controller_epoch=cache.controller_epoch,
    )
