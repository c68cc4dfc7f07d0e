"""ConsumerGroupHeartbeat (KIP-848): the coordinator core decides, the shell writes the
group's record and answers once it is committed (docs/groups.md)."""

from __future__ import annotations

from dataclasses import replace

from broker.context import CLIENT_HOST, BrokerContext
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
)

__all__ = ["handle_consumer_group_heartbeat"]


async def handle_consumer_group_heartbeat(
    ctx: BrokerContext, header: RequestHeader, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    coordinator = ctx.group_coordinator
    if coordinator is None:
        return ConsumerGroupHeartbeatResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if not request.client_id and header.client_id:
        request = replace(request, client_id=header.client_id)
    decision = coordinator.core.heartbeat(
        request, coordinator.topics(), ctx.now_ms(), CLIENT_HOST.get()
    )
    return await coordinator.write(decision)
