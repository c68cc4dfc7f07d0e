"""Fetch: open its session (broker.core.fetch_session), read (broker.core.fetch), and
long-poll in the purgatory until enough bytes, an error to report, or `max_wait_ms`
(broker.core.delayed.DelayedFetch); the session decides which partitions the answer names.
A follower's fetch is authorized before its session opens; a session belongs to the
principal and listener that opened it."""

from __future__ import annotations

import trio

from broker.context import SESSION, BrokerContext
from broker.core.delayed import DelayedFetch
from broker.core.fetch import count_sent, max_wait_ms
from broker.core.fetch_session import FetchContext, SessionOwner, answer_fetch, open_fetch
from broker.core.fetch_topic_ids import names_topics_by_id, resolve_topic_ids, with_topic_ids
from broker.core.request_acls import fetch_denied, may_follow
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchRequest, FetchResponse, FetchTopicResponse
from protocol.topic_id import NO_TOPIC_ID
from protocol.topic_partition import TopicPartition

__all__ = ["handle_fetch"]

_TOPIC_IDS_VERSION = 2  # KIP-516 (protocol.messages.fetch)


async def handle_fetch(
    ctx: BrokerContext, header: RequestHeader, request: FetchRequest
) -> FetchResponse:
    unknown: tuple[FetchTopicResponse, ...] = ()
    if names_topics_by_id(request):  # Kafka's Fetch v13+
        request, unknown = resolve_topic_ids(
            request, ctx.metadata.topic_name, lambda tp: _log_topic_id(ctx, tp)
        )
    response = await _fetch(ctx, request)
    if header.api_version < _TOPIC_IDS_VERSION:
        return response
    # Every topic's id, also in an incremental answer to a request that named none.
    return with_topic_ids(response, ctx.metadata.topic_id, unknown)


async def _fetch(ctx: BrokerContext, request: FetchRequest) -> FetchResponse:
    if request.replica_id >= 0 and not _may_follow(ctx):
        # A follower's fetch from the wrong listener or without CLUSTER_ACTION (the hole
        # behind CVE-2018-1288): every topic refused, and no session, which would be
        # privileged in the cache.
        session = FetchContext(request)
        denied = frozenset(t.topic for t in request.topics)
    else:
        caller = SESSION.get()
        owner = SessionOwner(caller.principal, caller.listener)
        session = open_fetch(ctx.state.fetch_sessions, request, ctx.now_ms(), owner)
        if session.error != ErrorCode.NONE:
            return answer_fetch(session, FetchResponse(session.error, ()))
        request = session.request  # an incremental fetch reads every partition of its session
        denied = fetch_denied(request, ctx.authorize) if ctx.authorizing else frozenset()
    deadline = trio.current_time() + max_wait_ms(request) / 1000
    fetch = DelayedFetch(request, denied)
    response = await ctx.purgatory.complete(
        fetch, ctx.state, ctx.now_ms, deadline, "fetch", ctx.apply
    )
    count_sent(ctx.state, request, response)
    return answer_fetch(session, response)


def _log_topic_id(ctx: BrokerContext, tp: TopicPartition) -> str:
    """The id stored with the log this broker hosts for `tp`; "" for none or no log."""
    partition = ctx.state.replica_manager.partitions.get(tp)
    return partition.log.topic_id if partition is not None else NO_TOPIC_ID


def _may_follow(ctx: BrokerContext) -> bool:
    """A fetch as a follower (replica_id >= 0) moves the HW and the ISR, so it is taken only
    where followers connect, the inter-broker (or control-plane) listener, even without an
    authorizer (Kafka takes it on any listener), and with CLUSTER_ACTION. The leader then
    counts it only from an assigned replica (Partition.update_follower_fetch)."""
    if not ctx.config.takes_follower_fetches(SESSION.get().listener):
        ctx.log_refused("follower fetch refused: not the inter-broker listener")
        return False
    return may_follow(ctx.authorize)
