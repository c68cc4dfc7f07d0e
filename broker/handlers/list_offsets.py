"""ListOffsets: earliest (-2), latest (-1), the record with the largest timestamp (-3,
KIP-734) or the first offset at/after a timestamp.

For a consumer "latest" is the HW and a timestamp lookup only finds committed records; the
debug replica id (-2) and followers see up to the LEO. Only the leader answers, except for the
debug id: as in Kafka (fetchOnlyFromLeader = replicaId != DebuggingConsumerId), any broker
hosting the partition answers it from its own replica, so `topics describe` can show each
replica's log end offset while a follower catches up.
"""

from __future__ import annotations

from broker.context import BrokerContext
from broker.core.partition import DEBUG_REPLICA_ID, Partition
from broker.log.errors import LogStorageError
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopicResponse,
)
from protocol.topic_partition import TopicPartition

__all__ = ["handle_list_offsets"]


async def handle_list_offsets(
    ctx: BrokerContext, header: RequestHeader, request: ListOffsetsRequest
) -> ListOffsetsResponse:
    denied = {
        t.name
        for t in request.topics
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t.name)
    }
    return ListOffsetsResponse(
        tuple(
            ListOffsetsTopicResponse(
                topic.name,
                tuple(
                    ListOffsetsPartitionResponse(
                        p.partition_index, ErrorCode.TOPIC_AUTHORIZATION_FAILED
                    )
                    if topic.name in denied
                    else _one(ctx, topic.name, p, request.replica_id)
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
    )


def _one(
    ctx: BrokerContext, topic: str, wanted: ListOffsetsPartition, replica_id: int
) -> ListOffsetsPartitionResponse:
    index = wanted.partition_index
    try:
        partition = _hosted_partition(ctx, TopicPartition(topic, index), replica_id)
        partition.check_leader_epoch(wanted.current_leader_epoch)
    except HighwaterError as exc:
        code = exc.code
        if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and ctx.metadata.partition(topic, index):
            code = ErrorCode.NOT_LEADER_OR_FOLLOWER
        return ListOffsetsPartitionResponse(index, code)
    # Kafka's ListOffsets gives the debug id the LEO too (no isolation level but a client's).
    limit = (
        partition.log_end_offset
        if replica_id == DEBUG_REPLICA_ID or partition.reads_to_log_end(replica_id)
        else partition.high_watermark
    )
    if wanted.timestamp == EARLIEST_TIMESTAMP:
        start = partition.log.log_start_offset
        return ListOffsetsPartitionResponse(index, 0, -1, start, _epoch_at(partition, start))
    if wanted.timestamp == LATEST_TIMESTAMP:
        return ListOffsetsPartitionResponse(index, 0, -1, limit, partition.leader_epoch)
    try:
        if wanted.timestamp == MAX_TIMESTAMP:
            found = partition.log.fetch_offset_of_max_timestamp(limit)
        elif wanted.timestamp >= 0:
            found = partition.log.fetch_offset_by_timestamp(wanted.timestamp)
        else:
            return ListOffsetsPartitionResponse(index, ErrorCode.INVALID_REQUEST)
    except HighwaterError as exc:  # e.g. an undecodable record on the way
        return ListOffsetsPartitionResponse(index, exc.code)
    except OSError as exc:  # a segment that cannot be read: the partition goes offline here
        error = ctx.replica_manager.storage_failed(TopicPartition(topic, index), exc, write=False)
        return ListOffsetsPartitionResponse(index, error.code)
    if found is None or found[0] >= limit:
        return ListOffsetsPartitionResponse(index, 0, -1, -1, -1)  # none yet, as in Kafka
    offset, timestamp = found
    return ListOffsetsPartitionResponse(index, 0, timestamp, offset, _epoch_at(partition, offset))


def _hosted_partition(ctx: BrokerContext, tp: TopicPartition, replica_id: int) -> Partition:
    """The leader's replica; for the debug id, this broker's replica, leader or follower."""
    if replica_id != DEBUG_REPLICA_ID:
        return ctx.replica_manager.leader_partition(tp)
    partition = ctx.replica_manager.partitions.get(tp)
    if partition is None and tp in ctx.replica_manager.offline:
        raise LogStorageError(ctx.replica_manager.offline[tp])
    if partition is None:
        raise HighwaterError(
            f"{tp[0]}-{tp[1]} is not hosted on broker {ctx.broker_id}",
            ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        )
    return partition


def _epoch_at(partition: Partition, offset: int) -> int:
    """The leader epoch of the batch holding `offset`, from the leader-epoch cache."""
    epoch = -1
    for entry in partition.log.leader_epoch_cache.entries():
        if entry.start_offset > offset:
            break
        epoch = entry.epoch
    return epoch
