"""UpdateMetadata (controller -> every broker): refresh the metadata cache, drop stray logs
(broker.core.controller_requests)."""

from __future__ import annotations

from broker.context import BrokerContext
from broker.core.controller_requests import apply_update_metadata
from protocol.acl import AclOperation
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

__all__ = ["handle_update_metadata"]


async def handle_update_metadata(
    ctx: BrokerContext, header: RequestHeader, request: UpdateMetadataRequest
) -> UpdateMetadataResponse:
    # Brokers only: on the control-plane listener (KIP-291), with CLUSTER_ACTION.
    if not ctx.on_control_plane() or not ctx.authorize_cluster(AclOperation.CLUSTER_ACTION):
        return UpdateMetadataResponse(ErrorCode.CLUSTER_AUTHORIZATION_FAILED)
    refused = await ctx.admit_controller_request(
        request.controller_id, request.controller_epoch, request.broker_epoch
    )
    if refused != ErrorCode.NONE:
        return UpdateMetadataResponse(refused)
    outcome = apply_update_metadata(ctx.state, request)
    ctx.apply(outcome.actions)
    return outcome.response
