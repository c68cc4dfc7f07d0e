"""ConsumerGroupHeartbeat (KIP-848): the coordinator core decides, the shell writes the
group's record and answers once it is committed (docs/groups.md)."""

from __future__ import annotations

from dataclasses import replace

from broker.context import CLIENT_HOST, SESSION, BrokerContext
from broker.core.group.membership import MayDescribe
from broker.core.group.model import Member
from broker.core.group.topic_ids import named_partitions, with_topic_ids
from broker.core.request_acls import heartbeat_refusal
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    HeartbeatAssignment,
)

__all__ = ["handle_consumer_group_heartbeat"]

_TOPIC_IDS_VERSION = 1  # KIP-516 (protocol.messages.consumer_group_heartbeat)


async def handle_consumer_group_heartbeat(
    ctx: BrokerContext, header: RequestHeader, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupHeartbeatResponse:
    refusal = heartbeat_refusal(request, ctx.authorize, SESSION.get().principal)
    if refusal is not None:
        return refusal
    coordinator = ctx.group_coordinator
    if not coordinator.active:
        return ConsumerGroupHeartbeatResponse(ErrorCode.COORDINATOR_NOT_AVAILABLE)
    if header.api_version >= _TOPIC_IDS_VERSION and request.topic_partitions:
        request = replace(
            request, topic_partitions=named_partitions(request.topic_partitions, ctx.metadata)
        )
    if not request.client_id and header.client_id:
        request = replace(request, client_id=header.client_id)
    may_describe: MayDescribe | None = None
    if ctx.authorizing:

        def may_describe(member: Member, topic: str) -> bool:
            return ctx.may_describe_as(member.principal, member.client_host, topic)

    decision = coordinator.core.heartbeat(
        request,
        coordinator.topics(),
        ctx.now_ms(),
        CLIENT_HOST.get(),
        wall_ms=ctx.wall_ms(),
        principal=str(SESSION.get().principal),
        may_describe=may_describe,
    )
    response = await coordinator.write(decision)
    if header.api_version >= _TOPIC_IDS_VERSION and response.assignment is not None:
        assignment = with_topic_ids(response.assignment.topic_partitions, ctx.metadata)
        response = replace(response, assignment=HeartbeatAssignment(assignment))
    return response
