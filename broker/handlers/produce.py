"""Produce: validate each partition's batches (header + CRC, never the records) and append.

acks=0 gets no response; acks=1 is answered once the leader appended; acks=-1 (all) waits in
the purgatory until the HW covers the appended batches or `timeout_ms` passes.
"""

from __future__ import annotations

import trio

from broker.context import BrokerContext
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.produce import (
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from protocol.topic_partition import TopicPartition

__all__ = ["handle_produce"]

MAX_PRODUCE_TIMEOUT_MS = 5 * 60 * 1000


async def handle_produce(
    ctx: BrokerContext, header: RequestHeader, request: ProduceRequest
) -> ProduceResponse | None:
    if request.acks not in (-1, 0, 1):
        return _all_failed(request, ErrorCode.INVALID_REQUIRED_ACKS)
    now_ms = ctx.now_ms()
    results: dict[TopicPartition, ProducePartitionResponse] = {}
    waiting: dict[TopicPartition, int] = {}  # acks=all: the HW each partition must reach
    for topic in request.topic_data:
        for data in topic.partition_data:
            tp = TopicPartition(topic.name, data.index)
            if request.acks == -1 and not _enough_replicas(ctx, tp):
                results[tp] = ProducePartitionResponse(
                    data.index, ErrorCode.NOT_ENOUGH_REPLICAS, error_message="ISR too small"
                )
                continue
            result = ctx.replica_manager.append(tp, data.records, now_ms)
            if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and (
                ctx.metadata.partition(*tp) is not None
            ):
                result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            results[tp] = ProducePartitionResponse(
                data.index,
                result.error_code,
                result.base_offset,
                -1,
                result.log_start_offset,
                result.error_message,
            )
            if result.error_code == ErrorCode.NONE:
                ctx.purgatory.notify(tp)
                if request.acks == -1:
                    waiting[tp] = result.next_offset
    if request.acks == 0:
        return None
    if waiting:
        await _wait_for_high_watermarks(ctx, waiting, results, request.timeout_ms)
    return ProduceResponse(
        tuple(
            ProduceTopicResponse(
                topic.name,
                tuple(results[TopicPartition(topic.name, d.index)] for d in topic.partition_data),
            )
            for topic in request.topic_data
        )
    )


async def _wait_for_high_watermarks(
    ctx: BrokerContext,
    waiting: dict[TopicPartition, int],
    results: dict[TopicPartition, ProducePartitionResponse],
    timeout_ms: int,
) -> None:
    deadline = trio.current_time() + min(max(timeout_ms, 0), MAX_PRODUCE_TIMEOUT_MS) / 1000
    gave_up = False  # the purgatory's deadline passed, or the broker is shutting down
    while True:
        for tp, needed in list(waiting.items()):
            partition = ctx.replica_manager.partitions.get(tp)
            if partition is None or not partition.is_leader:
                results[tp] = _replace_error(results[tp], ErrorCode.NOT_LEADER_OR_FOLLOWER)
                del waiting[tp]
            elif partition.high_watermark >= needed:
                # Kafka's checkEnoughReplicasReachOffset: the HW covering the batch counts only
                # if the ISR that got it there was big enough.
                if not _enough_replicas(ctx, tp):
                    results[tp] = _replace_error(
                        results[tp], ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                    )
                del waiting[tp]
            elif not _enough_replicas(ctx, tp):
                results[tp] = _replace_error(
                    results[tp], ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND
                )
                del waiting[tp]
        if not waiting or trio.current_time() >= deadline or gave_up:
            break
        gave_up = not await ctx.purgatory.wait(waiting, deadline)
    for tp in waiting:
        results[tp] = _replace_error(results[tp], ErrorCode.REQUEST_TIMED_OUT)


def _enough_replicas(ctx: BrokerContext, tp: TopicPartition) -> bool:
    """Kafka's acks=all rule: ISR size >= min(min.insync.replicas, replication factor)."""
    partition = ctx.replica_manager.partitions.get(tp)
    if partition is None or not partition.is_leader:
        return True  # the append reports NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION
    min_isr = partition.min_insync_replicas or ctx.config.min_insync_replicas
    return len(partition.isr) >= min(min_isr, len(partition.replicas))


def _replace_error(response: ProducePartitionResponse, code: ErrorCode) -> ProducePartitionResponse:
    return ProducePartitionResponse(response.index, code, -1, -1, -1, code.name)


def _all_failed(request: ProduceRequest, code: ErrorCode) -> ProduceResponse:
    return ProduceResponse(
        tuple(
            ProduceTopicResponse(
                topic.name,
                tuple(ProducePartitionResponse(d.index, code) for d in topic.partition_data),
            )
            for topic in request.topic_data
        )
    )
