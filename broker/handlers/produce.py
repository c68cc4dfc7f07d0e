"""Produce: append (broker.core.produce); acks=all waits in the purgatory until the HW covers
the batches or `timeout_ms` passes (Kafka's DelayedProduce); acks=0 gets no response."""

from __future__ import annotations

import trio

from broker.context import BrokerContext
from broker.core.produce import (
    append_produce,
    check_waiting,
    produce_response,
    time_out,
    timeout_ms,
)
from broker.core.request_acls import produce_denied
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.messages.produce import ProduceRequest, ProduceResponse

__all__ = ["handle_produce"]


async def handle_produce(
    ctx: BrokerContext, header: RequestHeader, request: ProduceRequest
) -> ProduceResponse | None:
    denied: dict[str, str] = {}
    if ctx.authorizing:
        denied = {
            t: ctx.denied(AclOperation.WRITE, ResourceType.TOPIC, t)
            for t in produce_denied(request, ctx.authorize)
        }
    append = append_produce(ctx.state, request, ctx.wall_ms(), denied=denied)
    ctx.wake(append.wake)
    if request.acks == 0:
        return None
    deadline = trio.current_time() + timeout_ms(request) / 1000
    gave_up = False  # the purgatory's deadline passed, or the broker is shutting down
    while append.waiting:
        check_waiting(ctx.state, append)
        if not append.waiting or trio.current_time() >= deadline or gave_up:
            break
        gave_up = not await ctx.purgatory.wait(list(append.waiting), deadline, "produce")
    time_out(append)
    return produce_response(request, append)
