"""Fetch: read (broker.core.fetch), and long-poll in the purgatory until enough bytes, an
error to report, or `max_wait_ms` (Kafka's DelayedFetch)."""

from __future__ import annotations

import trio

from broker.context import BrokerContext
from broker.core.fetch import FetchRead, count_sent, fetch_keys, max_wait_ms, read_fetch
from protocol.codec import RequestHeader
from protocol.messages.fetch import FetchRequest, FetchResponse

__all__ = ["handle_fetch"]


async def handle_fetch(
    ctx: BrokerContext, header: RequestHeader, request: FetchRequest
) -> FetchResponse:
    deadline = trio.current_time() + max_wait_ms(request) / 1000
    keys = fetch_keys(request)
    while True:
        read = _read(ctx, request)
        if read.satisfied(request.min_bytes) or trio.current_time() >= deadline:
            break
        if not await ctx.purgatory.wait(keys, deadline, "fetch"):  # deadline, or shutdown
            read = _read(ctx, request)
            break
    count_sent(ctx.state, request, read.response)
    return read.response


def _read(ctx: BrokerContext, request: FetchRequest) -> FetchRead:
    read = read_fetch(ctx.state, request, ctx.now_ms())
    ctx.wake(read.wake)
    ctx.write_isr(read.isr_writes)
    return read
