"""UpdateMetadata (controller -> every broker): refresh the metadata cache."""

from __future__ import annotations

from broker.context import METADATA_KEY, BrokerContext
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse

__all__ = ["handle_update_metadata"]


async def handle_update_metadata(
    ctx: BrokerContext, header: RequestHeader, request: UpdateMetadataRequest
) -> UpdateMetadataResponse:
    refused = await ctx.admit_controller_request(request.controller_epoch, request.broker_epoch)
    if refused != ErrorCode.NONE:
        return UpdateMetadataResponse(refused)
    ctx.metadata.update(request)
    ctx.purgatory.notify(METADATA_KEY)
    return UpdateMetadataResponse(ErrorCode.NONE)
