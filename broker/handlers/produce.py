"""Produce: append (broker.core.produce); acks=all waits in the purgatory until the HW covers
the batches or `timeout_ms` passes (broker.core.delayed.DelayedProduce); acks=0 gets no
response."""

from __future__ import annotations

import trio

from broker.context import BrokerContext
from broker.core.delayed import DelayedProduce
from broker.core.produce import append_produce, timeout_ms
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
    produce = DelayedProduce(
        request, append_produce(ctx.state, request, ctx.wall_ms(), denied=denied)
    )
    ctx.apply(produce.take_actions())
    if request.acks == 0:
        return None
    deadline = trio.current_time() + timeout_ms(request) / 1000
    return await ctx.purgatory.complete(
        produce, ctx.state, ctx.now_ms, deadline, "produce", ctx.apply
    )
