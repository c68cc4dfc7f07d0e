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
    if not ctx.accept_controller_epoch(request.controller_epoch):
        return UpdateMetadataResponse(ErrorCode.STALE_CONTROLLER_EPOCH)
    ctx.metadata.update(request)
    ctx.purgatory.notify(METADATA_KEY)
    return UpdateMetadataResponse(ErrorCode.NONE)
