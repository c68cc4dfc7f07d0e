"""Metadata: brokers, controller and topics, from this broker's metadata cache."""

from __future__ import annotations

from broker.context import SESSION, BrokerContext
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest, MetadataResponse, MetadataTopic

__all__ = ["handle_metadata"]


async def handle_metadata(
    ctx: BrokerContext, header: RequestHeader, request: MetadataRequest
) -> MetadataResponse:
    cache = ctx.metadata
    # Addresses on the listener this request came in on (Kafka's MetadataCache by listener).
    listener = SESSION.get().listener
    brokers = cache.brokers_on(listener)
    topics = cache.topic_metadata(request.topics, listener)
    by_id = cache.topic_metadata_by_id(request.topic_ids, listener)
    if ctx.authorizing:
        # Kafka: topics not describable are left out of "all topics" and refused by name.
        # Only a refusal by name is logged: leaving a topic out of "all topics" is no denial
        # (Kafka's filterByAuthorized asks with logIfDenied = false), and would log one line
        # per hidden topic per request.
        def describable(name: str, *, log_denied: bool = True) -> bool:
            return ctx.authorize(
                AclOperation.DESCRIBE, ResourceType.TOPIC, name, log_denied=log_denied
            )

        if request.topics is None:
            topics = tuple(t for t in topics if describable(t.name, log_denied=False))
        else:
            topics = tuple(
                t
                if describable(t.name)
                else MetadataTopic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, t.name, ())
                for t in topics
            )
        # Asked by id: a refusal names the id only, never the topic's name.
        by_id = tuple(
            t
            if t.error_code == ErrorCode.UNKNOWN_TOPIC_ID or describable(t.name)
            else MetadataTopic(ErrorCode.TOPIC_AUTHORIZATION_FAILED, "", (), topic_id=t.topic_id)
            for t in by_id
        )
    return MetadataResponse(
        brokers=tuple(brokers[b] for b in sorted(brokers)),
        cluster_id=ctx.cluster_id,
        controller_id=cache.controller_id,
        topics=topics + by_id,
        controller_epoch=cache.controller_epoch,
    )
