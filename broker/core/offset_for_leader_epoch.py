"""OffsetForLeaderEpoch (KIP-101/279): where did an epoch end on this leader."""

from __future__ import annotations

from broker.core.state import BrokerState
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochPartitionResult,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochTopicResult,
)
from protocol.topic_partition import TopicPartition

__all__ = ["answer_offset_for_leader_epoch"]


def answer_offset_for_leader_epoch(
    state: BrokerState,
    request: OffsetForLeaderEpochRequest,
    denied: frozenset[str] = frozenset(),
) -> OffsetForLeaderEpochResponse:
    """`denied`: topics the requester may not describe (TOPIC_AUTHORIZATION_FAILED)."""
    return OffsetForLeaderEpochResponse(
        tuple(
            OffsetForLeaderEpochTopicResult(
                topic.topic,
                tuple(
                    OffsetForLeaderEpochPartitionResult(
                        ErrorCode.TOPIC_AUTHORIZATION_FAILED, p.partition
                    )
                    if topic.topic in denied
                    else _one(state, topic.topic, p)
                    for p in topic.partitions
                ),
            )
            for topic in request.topics
        )
    )


def _one(
    state: BrokerState, topic: str, wanted: OffsetForLeaderEpochPartition
) -> OffsetForLeaderEpochPartitionResult:
    try:
        partition = state.replica_manager.leader_partition(TopicPartition(topic, wanted.partition))
        partition.check_leader_epoch(wanted.current_leader_epoch)
    except HighwaterError as exc:
        return OffsetForLeaderEpochPartitionResult(exc.code, wanted.partition)
    epoch, end_offset = partition.log.end_offset_for_epoch(wanted.leader_epoch)
    return OffsetForLeaderEpochPartitionResult(ErrorCode.NONE, wanted.partition, end_offset, epoch)
