"""DeleteTopics: ask the controller (through ZooKeeper) to delete, then wait until it has (a
DelayedDeleteTopics, broker.core.delayed_topics, parked in the purgatory).

As in Kafka's ZooKeeper mode: `/admin/delete_topics/<t>` is the request; the controller stops
and deletes the replicas, removes the topic's znodes, and tells every broker.
"""

from __future__ import annotations

from dataclasses import replace

import trio

from broker.context import BrokerContext
from broker.core.delayed_topics import DelayedDeleteTopics
from controller.zk_topics import UnknownTopicError, mark_topic_for_deletion
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.delete_topics import (
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from protocol.topic_partition import INTERNAL_TOPICS

__all__ = ["handle_delete_topics"]

MAX_DELETE_TIMEOUT_MS = 5 * 60 * 1000


async def handle_delete_topics(
    ctx: BrokerContext, header: RequestHeader, request: DeleteTopicsRequest
) -> DeleteTopicsResponse:
    deadline = trio.current_time() + min(max(request.timeout_ms, 0), MAX_DELETE_TIMEOUT_MS) / 1000
    names = list(request.topic_names)
    unknown_ids = []
    by_id_only = set()
    for topic_id in request.topic_ids:  # KIP-516
        found = ctx.metadata.topic_name(topic_id)
        if found is None:
            message = f"topic id {topic_id} is unknown"
            unknown_ids.append(
                DeletableTopicResult("", ErrorCode.UNKNOWN_TOPIC_ID, message, topic_id)
            )
        else:
            by_id_only.add(found)
            names.append(found)
    by_id_only -= set(request.topic_names)
    topic_ids = {name: ctx.metadata.topic_id(name) for name in names}  # before they go
    results: dict[str, DeletableTopicResult] = {}
    for name in names:
        if not ctx.authorize(AclOperation.DELETE, ResourceType.TOPIC, name):
            denied = ctx.denied(AclOperation.DELETE, ResourceType.TOPIC, name)
            results[name] = DeletableTopicResult(name, ErrorCode.TOPIC_AUTHORIZATION_FAILED, denied)
        elif name not in ctx.metadata.topics:
            results[name] = DeletableTopicResult(
                name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
            )
        elif name in INTERNAL_TOPICS:
            results[name] = DeletableTopicResult(
                name, ErrorCode.INVALID_TOPIC_EXCEPTION, f"{name} is internal to the brokers"
            )
        elif not ctx.config.delete_topic_enable:
            results[name] = DeletableTopicResult(
                name, ErrorCode.INVALID_REQUEST, "delete.topic.enable is false"
            )
        elif ctx.zk.absent:
            results[name] = DeletableTopicResult(name, ErrorCode.NOT_CONTROLLER, "no ZooKeeper")
        else:
            try:
                await ctx.zk.run(mark_topic_for_deletion(name))
            except UnknownTopicError:  # deleted meanwhile
                results[name] = DeletableTopicResult(
                    name, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, f"topic {name!r} does not exist"
                )
            else:
                results[name] = DeletableTopicResult(name, ErrorCode.NONE)
    deletion = DelayedDeleteTopics(results)
    results = await ctx.purgatory.complete(
        deletion, ctx.state, ctx.now_ms, deadline, "topic", ctx.apply
    )
    answers = []
    for name in dict.fromkeys(names):
        result = replace(results[name], topic_id=topic_ids[name])
        if name in by_id_only and result.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
            result = replace(result, name="")  # as Kafka: a refusal by id names no topic
        answers.append(result)
    return DeleteTopicsResponse((*answers, *unknown_ids))
