"""Metadata: brokers, controller and topics, from this broker's metadata cache."""

from __future__ import annotations

from broker.context import SESSION, BrokerContext
from protocol.codec import RequestHeader
from protocol.messages.metadata import MetadataRequest, MetadataResponse

__all__ = ["handle_metadata"]


async def handle_metadata(
    ctx: BrokerContext, header: RequestHeader, request: MetadataRequest
) -> MetadataResponse:
    cache = ctx.metadata
    # Addresses on the listener this request came in on (Kafka's MetadataCache by listener).
    listener = SESSION.get().listener
    brokers = cache.brokers_on(listener)
    return MetadataResponse(
        brokers=tuple(brokers[b] for b in sorted(brokers)),
        cluster_id=ctx.cluster_id,
        controller_id=cache.controller_id,
        topics=cache.topic_metadata(request.topics, listener),
        controller_epoch=cache.controller_epoch,
    )
