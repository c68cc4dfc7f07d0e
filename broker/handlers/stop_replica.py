"""StopReplica (controller -> broker): stop serving partitions, and delete them if asked."""

from __future__ import annotations

from broker.context import METADATA_KEY, BrokerContext
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.stop_replica import (
    StopReplicaPartitionError,
    StopReplicaRequest,
    StopReplicaResponse,
)
from protocol.topic_partition import TopicPartition

__all__ = ["handle_stop_replica"]


async def handle_stop_replica(
    ctx: BrokerContext, header: RequestHeader, request: StopReplicaRequest
) -> StopReplicaResponse:
    refused = await ctx.admit_controller_request(request.controller_epoch, request.broker_epoch)
    if refused != ErrorCode.NONE:
        return StopReplicaResponse(refused)
    errors = []
    for topic in request.topic_states:
        for state in topic.partition_states:
            tp = TopicPartition(topic.topic_name, state.partition_index)
            if ctx.fetchers is not None:
                ctx.fetchers.unfollow(tp)
            try:
                ctx.replica_manager.stop_replica(tp, delete=state.delete_partition)
                code = ErrorCode.NONE
            except OSError:
                code = ErrorCode.KAFKA_STORAGE_ERROR
            errors.append(StopReplicaPartitionError(tp[0], tp[1], code))
            ctx.purgatory.notify(tp)
    ctx.purgatory.notify(METADATA_KEY)
    return StopReplicaResponse(ErrorCode.NONE, tuple(errors))
