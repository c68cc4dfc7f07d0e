"""Fetch: serve log bytes as stored (never decoded), long-polling in the purgatory.

The request waits until at least `min_bytes` are available, an error is to be reported, or
`max_wait_ms` passes (Kafka's DelayedFetch). Consumers (replica_id -1) read below the HW;
followers and the debug id read up to the LEO. A follower's fetch offset is its LEO, so each
follower read also updates what the leader knows of it (HW, ISR expansion). As in Kafka
(KIP-74) the first partition with data returns at least one whole batch even if it is larger
than the size limits.
"""

from __future__ import annotations

import trio

from broker.context import BrokerContext
from broker.partition import ReadResult
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.fetch import (
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
)
from protocol.topic_partition import TopicPartition

__all__ = ["handle_fetch"]

MAX_WAIT_CAP_MS = 60_000


async def handle_fetch(
    ctx: BrokerContext, header: RequestHeader, request: FetchRequest
) -> FetchResponse:
    deadline = trio.current_time() + min(max(request.max_wait_ms, 0), MAX_WAIT_CAP_MS) / 1000
    keys = [(t.topic, p.partition) for t in request.topics for p in t.partitions]
    while True:
        response, total_bytes, has_error = _read_all(ctx, request)
        if total_bytes >= request.min_bytes or has_error or trio.current_time() >= deadline:
            return response
        if not await ctx.purgatory.wait(keys, deadline):  # deadline, or shutting down
            return _read_all(ctx, request)[0]


def _read_all(ctx: BrokerContext, request: FetchRequest) -> tuple[FetchResponse, int, bool]:
    now_ms = ctx.now_ms()
    remaining = max(request.max_bytes, 0)
    total_bytes = 0
    has_error = False
    topics = []
    for topic in request.topics:
        partitions = []
        for wanted in topic.partitions:
            tp = TopicPartition(topic.topic, wanted.partition)
            try:
                result = ctx.replica_manager.read(
                    tp,
                    wanted.fetch_offset,
                    min(max(wanted.partition_max_bytes, 0), remaining),
                    replica_id=request.replica_id,
                    current_leader_epoch=wanted.current_leader_epoch,
                    min_one_batch=total_bytes == 0,
                )
            except HighwaterError as exc:
                has_error = True
                code = exc.code
                if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and ctx.metadata.partition(*tp):
                    code = ErrorCode.NOT_LEADER_OR_FOLLOWER
                partition = ctx.replica_manager.partitions.get(tp)
                partitions.append(
                    FetchPartitionData(
                        wanted.partition,
                        code,
                        high_watermark=partition.high_watermark if partition else -1,
                        log_start_offset=partition.log.log_start_offset if partition else -1,
                        records=b"",
                    )
                )
                continue
            if request.replica_id >= 0:
                _follower_fetched(ctx, tp, request.replica_id, wanted.fetch_offset, result, now_ms)
            records = result.data.read()
            total_bytes += len(records)
            remaining = max(0, remaining - len(records))
            partitions.append(
                FetchPartitionData(
                    wanted.partition,
                    ErrorCode.NONE,
                    high_watermark=result.high_watermark,
                    log_start_offset=result.log_start_offset,
                    records=records,
                    current_leader_epoch=ctx.replica_manager.partitions[tp].leader_epoch,
                )
            )
        topics.append(FetchTopicResponse(topic.topic, tuple(partitions)))
    return FetchResponse(ErrorCode.NONE, tuple(topics)), total_bytes, has_error


def _follower_fetched(
    ctx: BrokerContext,
    tp: TopicPartition,
    replica_id: int,
    fetch_offset: int,
    result: ReadResult,
    now_ms: int,
) -> None:
    """A follower's fetch offset is its LEO: it may move the HW (waking acks=all producers and
    consumers parked on this partition) or let the follower back into the ISR."""
    partition = ctx.replica_manager.partitions[tp]
    if partition.update_follower_fetch(replica_id, fetch_offset, result.log_end_offset, now_ms):
        ctx.purgatory.notify(tp)
    if ctx.isr is not None:
        ctx.isr.maybe_expand(partition)
