"""Produce: validate each partition's batches (header, CRC and records) and append.

acks=0 gets no response; acks=1 is answered once the leader appended; acks=-1 (all) waits
until the HW covers the appended batches (broker.core.delayed.DelayedProduce parks it;
`check_waiting` decides), as Kafka's DelayedProduce: the HW covering a batch counts only if
the ISR that got it there had min.insync.replicas members (Kafka's
checkEnoughReplicasReachOffset).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.core.state import BrokerState
from protocol.errors import ErrorCode
from protocol.messages.produce import (
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicResponse,
)
from protocol.topic_partition import INTERNAL_TOPICS, TopicPartition

__all__ = [
    "MAX_PRODUCE_TIMEOUT_MS",
    "ProduceAppend",
    "append_produce",
    "check_waiting",
    "produce_response",
    "time_out",
    "timeout_ms",
]

MAX_PRODUCE_TIMEOUT_MS = 5 * 60 * 1000


@dataclass(slots=True)
class ProduceAppend:
    results: dict[TopicPartition, ProducePartitionResponse]
    waiting: dict[TopicPartition, int] = field(default_factory=dict)  # acks=all: HW to reach
    wake: list[TopicPartition] = field(default_factory=list)  # appended to


def timeout_ms(request: ProduceRequest) -> int:
    return min(max(request.timeout_ms, 0), MAX_PRODUCE_TIMEOUT_MS)


def append_produce(
    state: BrokerState,
    request: ProduceRequest,
    wall_ms: int,
    *,
    internal: bool = False,
    denied: Mapping[str, str] | None = None,
) -> ProduceAppend:
    """`wall_ms`: the wall clock, for the log (segment times). `internal`: the broker's own
    write (the group coordinator's); clients may not append to internal topics (Kafka's
    INVALID_TOPIC_EXCEPTION). `denied`: topics the principal may not write, each with the
    refusal's error_message (TOPIC_AUTHORIZATION_FAILED; nothing of them is appended)."""
    denied = denied or {}
    if request.acks not in (-1, 0, 1):
        return ProduceAppend(_all(request, ErrorCode.INVALID_REQUIRED_ACKS))
    out = ProduceAppend({})
    named_twice = _named_twice(request)
    for topic in request.topic_data:
        for data in topic.partition_data:
            tp = TopicPartition(topic.name, data.index)
            if topic.name in denied:
                out.results[tp] = ProducePartitionResponse(
                    data.index,
                    ErrorCode.TOPIC_AUTHORIZATION_FAILED,
                    error_message=denied[topic.name],
                )
                continue
            if named_twice and tp in named_twice:
                # Each occurrence's answer must say what became of its data, and one answer per
                # partition cannot (Kafka's KafkaApis keeps the last one): none is appended,
                # each gets INVALID_REQUEST, as a resource named twice in IncrementalAlterConfigs.
                out.results[tp] = ProducePartitionResponse(
                    data.index,
                    ErrorCode.INVALID_REQUEST,
                    error_message=f"{topic.name}-{data.index} is named more than once",
                )
                continue
            if not internal and topic.name in INTERNAL_TOPICS:
                out.results[tp] = ProducePartitionResponse(
                    data.index,
                    ErrorCode.INVALID_TOPIC_EXCEPTION,
                    error_message=f"{topic.name} is internal: only the broker writes to it",
                )
                continue
            if request.acks == -1 and not state.enough_replicas(tp):
                out.results[tp] = ProducePartitionResponse(
                    data.index, ErrorCode.NOT_ENOUGH_REPLICAS, error_message="ISR too small"
                )
                continue
            result = state.replica_manager.append(tp, data.records, wall_ms)
            if result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and (
                state.metadata.partition(*tp) is not None
            ):
                result.error_code = ErrorCode.NOT_LEADER_OR_FOLLOWER
            out.results[tp] = ProducePartitionResponse(
                data.index,
                result.error_code,
                result.base_offset,
                -1,
                result.log_start_offset,
                result.error_message,
            )
            if result.error_code == ErrorCode.NONE:
                out.wake.append(tp)
                if request.acks == -1:
                    out.waiting[tp] = result.next_offset
    return out


def check_waiting(state: BrokerState, append: ProduceAppend) -> list[TopicPartition]:
    """Settle the acks=all partitions that can be settled now: their HW covers the batch,
    or they can no longer get there. Returns those acknowledged (error NONE)."""
    acked = []
    for tp, needed in list(append.waiting.items()):
        partition = state.replica_manager.partitions.get(tp)
        if partition is None or not partition.is_leader:
            _fail(append, tp, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        elif partition.high_watermark >= needed:
            if state.enough_replicas(tp):
                acked.append(tp)
                del append.waiting[tp]
            else:
                _fail(append, tp, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        elif not state.enough_replicas(tp):
            _fail(append, tp, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
    return acked


def time_out(append: ProduceAppend) -> None:
    """The deadline passed: whatever still waits is REQUEST_TIMED_OUT."""
    for tp in list(append.waiting):
        _fail(append, tp, ErrorCode.REQUEST_TIMED_OUT)


def produce_response(request: ProduceRequest, append: ProduceAppend) -> ProduceResponse:
    return ProduceResponse(
        tuple(
            ProduceTopicResponse(
                topic.name,
                tuple(
                    append.results[TopicPartition(topic.name, d.index)]
                    for d in topic.partition_data
                ),
            )
            for topic in request.topic_data
        )
    )


def _named_twice(request: ProduceRequest) -> set[TopicPartition]:
    seen: set[TopicPartition] = set()
    twice: set[TopicPartition] = set()
    for topic in request.topic_data:
        for data in topic.partition_data:
            tp = TopicPartition(topic.name, data.index)
            if tp in seen:
                twice.add(tp)
            seen.add(tp)
    return twice


def _fail(append: ProduceAppend, tp: TopicPartition, code: ErrorCode) -> None:
    index = append.results[tp].index
    append.results[tp] = ProducePartitionResponse(index, code, -1, -1, -1, code.name)
    append.waiting.pop(tp, None)


def _all(
    request: ProduceRequest, code: ErrorCode
) -> dict[TopicPartition, ProducePartitionResponse]:
    return {
        TopicPartition(topic.name, d.index): ProducePartitionResponse(d.index, code)
        for topic in request.topic_data
        for d in topic.partition_data
    }
