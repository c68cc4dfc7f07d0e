"""ListOffsets: earliest (-2), latest (-1) or the first offset at/after a timestamp.

For a consumer "latest" is the HW and a timestamp lookup only finds committed records; the
debug replica id (-2) and followers see up to the LEO.
"""

from __future__ import annotations

from broker.context import BrokerContext
from broker.partition import CONSUMER_REPLICA_ID
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)

__all__ = ["handle_list_offsets"]


async def handle_list_offsets(
    ctx: BrokerContext, header: RequestHeader, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    return ListOffsetsResponse(
        tuple(
            ListOffsetsTopicResponse(
                topic.name,
                tuple(_one(ctx, topic.name, p, request.replica_id) for p in topic.partitions),
            )
            for topic in request.topics
        )
    )


def _one(
    ctx: BrokerContext, topic: str, wanted: ListOffsetsPartition, replica_id: int
) -> ListOffsetsPartitionResponse:
    index = wanted.partition_index
    try:
        partition = ctx.replica_manager.leader_partition((topic, index))
        partition.check_leader_epoch(wanted.current_leader_epoch)
    except HighwaterError as exc:
        code = exc.code
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and ctx.metadata.partition(topic, index):
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ListOffsetsPartitionResponse(index, code)
    limit = (
        partition.high_watermark if replica_id == CONSUMER_REPLICA_ID else partition.log_end_offset
    )
    epoch = partition.leader_epoch
    if wanted.timestamp == EARLIEST_TIMESTAMP:
        return ListOffsetsPartitionResponse(index, 0, -1, partition.log.log_start_offset, epoch)
    if wanted.timestamp == LATEST_TIMESTAMP:
        return ListOffsetsPartitionResponse(index, 0, -1, limit, epoch)
    if wanted.timestamp < 0:
        return ListOffsetsPartitionResponse(index, ErrorCode.INVALID_REQUEST)
    found = partition.log.fetch_offset_by_timestamp(wanted.timestamp)
    if found is None or found[0] >= limit:
        return ListOffsetsPartitionResponse(index, 0, -1, -1, epoch)  # none yet, as in Kafka
    offset, timestamp = found
    return ListOffsetsPartitionResponse(index, 0, timestamp, offset, epoch)
