"""StopReplica (controller -> broker): stop serving partitions, and delete them if asked
(broker.core.controller_requests)."""

from __future__ import annotations

from broker.context import BrokerContext
from broker.core.controller_requests import apply_stop_replica
from protocol.acl import AclOperation
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse

__all__ = ["handle_stop_replica"]


async def handle_stop_replica(
    ctx: BrokerContext, header: RequestHeader, request: StopReplicaRequest
) -> StopReplicaResponse:
    # Brokers only: on the control-plane listener (KIP-291), with CLUSTER_ACTION.
    if not ctx.on_control_plane() or not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return StopReplicaResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    refused = await ctx.admit_controller_request(
        request.controller_id, request.controller_epoch, request.broker_epoch
    )
    if refused != ErrorCode.NONE:
        return StopReplicaResponse(refused)
    outcome = apply_stop_replica(ctx.state, request)
    ctx.apply(outcome.actions)
    return outcome.response
