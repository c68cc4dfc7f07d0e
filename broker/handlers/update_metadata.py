"""UpdateMetadata (controller -> every broker): refresh the metadata cache.

The controller always sends the whole picture, so a partition it no longer places on this
broker (topic deleted, or replica moved away) has no business here: its log goes unless a
LeaderAndIsr claimed it (a replica that missed its StopReplica, being down or the
controller failing mid-way)."""

from __future__ import annotations

from broker.context import METADATA_KEY, BrokerContext
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.topic_partition import TopicPartition

__all__ = ["handle_update_metadata"]


async def handle_update_metadata(
    ctx: BrokerContext, header: RequestHeader, request: UpdateMetadataRequest
) -> UpdateMetadataResponse:
    refused = await ctx.admit_controller_request(request.controller_epoch, request.broker_epoch)
    if refused != ErrorCode.NONE:
        return UpdateMetadataResponse(refused)
    ctx.metadata.update(request)
    ctx.replica_manager.delete_stray_logs(
        {
            TopicPartition(s.topic_name, s.partition_index): s.replicas
            for s in request.partition_states
        }
    )
    ctx.purgatory.notify(METADATA_KEY)
    return UpdateMetadataResponse(ErrorCode.NONE)
