"""ControlledShutdown (broker -> controller): move this broker's leaderships away first.

Only the active controller answers (NOT_CONTROLLER otherwise, so the broker finds the right
one and asks again). The controller serialises the request with its other events, moves the
leaderships it can, and returns the partitions the broker still leads.
"""

from __future__ import annotations

from broker.context import BrokerContext
from protocol.acl import AclOperation
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.common import TopicPartitionRef
from protocol.messages.controlled_shutdown import (
    ControlledShutdownRequest,
    ControlledShutdownResponse,
)

__all__ = ["handle_controlled_shutdown"]


async def handle_controlled_shutdown(
    ctx: BrokerContext, header: RequestHeader, request: ControlledShutdownRequest
) -> ControlledShutdownResponse:
    # Brokers only: on the control-plane listener (KIP-291), with CLUSTER_ACTION.
    if not ctx.on_control_plane() or not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return ControlledShutdownResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    controller = ctx.controller
    if not controller.is_active:
        return ControlledShutdownResponse(ErrorCode.NOT_CONTROLLER)
    error_code, remaining = await controller.controlled_shutdown(
        request.broker_id, request.broker_epoch
    )
    return ControlledShutdownResponse(
        error_code, tuple(TopicPartitionRef(topic, partition) for topic, partition in remaining)
    )
