"""Fetch: one read of every requested partition, as stored bytes (never decoded).

Consumers (replica_id -1) read below the HW; followers and the debug id up to the LEO. A
follower's fetch offset is its LEO, so a follower read also moves what the leader knows of
it: the HW (waking acks=all produces and consumers) and ISR expansion. As in Kafka (KIP-74)
the first partition with data returns at least one whole batch. The shell long-polls: it
reads again when a key it waits on is woken, until `min_bytes`, an error or `max_wait_ms`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.core.isr import IsrWrite
from broker.core.partition import Partition
from broker.core.state import BrokerState
from broker.core.topic_id_check import has_consistent_topic_id
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.fetch import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
)
from protocol.records import next_offset_after_whole_batches
from protocol.topic_partition import TopicPartition

__all__ = [
    "MAX_WAIT_CAP_MS",
    "FetchRead",
    "count_sent",
    "fetch_keys",
    "max_wait_ms",
    "read_fetch",
]

MAX_WAIT_CAP_MS = 60_000


@dataclass(slots=True)
class FetchRead:
    response: FetchResponse
    total_bytes: int
    has_error: bool
    wake: list[TopicPartition] = field(default_factory=list)  # their HW moved
    isr_writes: list[IsrWrite] = field(default_factory=list)  # followers that may join

    def satisfied(self, min_bytes: int) -> bool:
        """Answer now: enough bytes, or an error to report."""
        return self.total_bytes >= min_bytes or self.has_error


def fetch_keys(request: FetchRequest) -> list[TopicPartition]:
    return [TopicPartition(t.topic, p.partition) for t in request.topics for p in t.partitions]


def max_wait_ms(request: FetchRequest) -> int:
    return min(max(request.max_wait_ms, 0), MAX_WAIT_CAP_MS)


def read_fetch(
    state: BrokerState, request: FetchRequest, now_ms: int, denied: frozenset[str] = frozenset()
) -> FetchRead:
    """`denied`: topics the requester may not read (TOPIC_AUTHORIZATION_FAILED, nothing read,
    nothing about them changed)."""
    replicas = state.replica_manager
    partitions = replicas.partitions
    replica_id = request.replica_id
    follower = replica_id >= 0
    remaining = max(request.max_bytes, 0)
    read = FetchRead(FetchResponse(ErrorCode.NONE, ()), 0, False)
    topics = []
    for topic in request.topics:
        name = topic.topic
        if name in denied:
            read.has_error = True
            topics.append(FetchTopicResponse(name, tuple(_denied(w) for w in topic.partitions)))
            continue
        partitions_read: list[FetchPartitionData] = []
        topic_id = topic.topic_id  # named by id (KIP-516): set on every read of a session too
        for wanted in topic.partitions:
            tp = TopicPartition(name, wanted.partition)
            partition = partitions.get(tp)
            if (
                topic_id
                and partition is not None
                and not has_consistent_topic_id(topic_id, partition.log.topic_id)
            ):  # Kafka's readFromLog: the session's id is not the log's (topic recreated)
                read.has_error = True
                partitions_read.append(
                    FetchPartitionData(
                        wanted.partition, ErrorCode.INCONSISTENT_TOPIC_ID, -1, -1, b""
                    )
                )
                continue
            if partition is not None:
                end = _readable_end(partition, wanted, replica_id)
                if end >= 0:
                    # Nothing to read (an idle partition of a session, say): the answer the
                    # read below would give, without its objects; the follower's fetch counts.
                    partitions_read.append(_empty_answer(partition))
                    if follower:
                        _follower_fetched(state, read, partition, replica_id, end, end, now_ms)
                    continue
            try:
                result = replicas.read(
                    tp,
                    wanted.fetch_offset,
                    min(max(wanted.partition_max_bytes, 0), remaining),
                    replica_id=replica_id,
                    current_leader_epoch=wanted.current_leader_epoch,
                    min_one_batch=read.total_bytes == 0,
                )
                records = result.data.read()
            except HighwaterError as exc:
                read.has_error = True
                partitions_read.append(_error(state, tp, exc.code))
                continue
            except OSError as exc:  # EIO on a segment: this partition goes offline here
                read.has_error = True
                partitions_read.append(
                    _error(state, tp, replicas.storage_failed(tp, exc, write=False).code)
                )
                continue
            if follower:
                _follower_fetched(
                    state,
                    read,
                    partitions[tp],
                    replica_id,
                    wanted.fetch_offset,
                    result.log_end_offset,
                    now_ms,
                )
            read.total_bytes += len(records)
            remaining = max(0, remaining - len(records))
            partitions_read.append(
                FetchPartitionData(
                    wanted.partition,
                    ErrorCode.NONE,
                    high_watermark=result.high_watermark,
                    log_start_offset=result.log_start_offset,
                    records=records,
                    current_leader_epoch=replicas.partitions[tp].leader_epoch,
                )
            )
        topics.append(FetchTopicResponse(name, tuple(partitions_read)))
    read.response = FetchResponse(ErrorCode.NONE, tuple(topics))
    return read


def _error(state: BrokerState, tp: TopicPartition, code: ErrorCode) -> FetchPartitionData:
    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and state.metadata.partition(*tp):
        code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # the cluster has it: ask the metadata again
    partition = state.replica_manager.partitions.get(tp)
    return FetchPartitionData(
        tp.partition,
        code,
        high_watermark=partition.high_watermark if partition else -1,
        log_start_offset=partition.log.log_start_offset if partition else -1,
        records=b"",
    )


def _readable_end(partition: Partition, wanted: FetchPartition, replica_id: int) -> int:
    """The fetch offset when a read would answer no records and no error, else -1: this
    broker leads in the epoch asked for (KIP-320: -1 asks for none) and the fetch offset is
    where the requester's reads end (the LEO for followers, the HW for consumers), inside
    the log. For a follower that offset is the LEO (_follower_fetched takes it as such)."""
    if partition.leader_id != partition.broker_id:  # Partition.is_leader, inlined: per call
        return -1
    epoch = wanted.current_leader_epoch
    if epoch >= 0 and epoch != partition.leader_epoch:  # Partition.in_leader_epoch
        return -1
    offset = wanted.fetch_offset
    log = partition.log
    log_end_offset = log.log_end_offset
    end = log_end_offset if partition.reads_to_log_end(replica_id) else partition.high_watermark
    return offset if offset == end and log.log_start_offset <= offset <= log_end_offset else -1


def _empty_answer(partition: Partition) -> FetchPartitionData:
    """The partition's answer of no records, made again only when what it says changed."""
    answer = partition.empty_fetch_answer
    if (
        answer is None
        or answer.high_watermark != partition.high_watermark
        or answer.log_start_offset != partition.log.log_start_offset
        or answer.current_leader_epoch != partition.leader_epoch
    ):
        answer = partition.empty_fetch_answer = FetchPartitionData(
            partition.index,
            ErrorCode.NONE,
            high_watermark=partition.high_watermark,
            log_start_offset=partition.log.log_start_offset,
            records=b"",
            current_leader_epoch=partition.leader_epoch,
        )
    return answer


def _follower_fetched(
    state: BrokerState,
    read: FetchRead,
    partition: Partition,
    replica_id: int,
    fetch_offset: int,
    log_end_offset: int,
    now_ms: int,
) -> None:
    """A follower's fetch offset is its LEO: it may move the HW or let it back into the ISR.
    Read after the partition was read (our LEO then: `log_end_offset`), as Kafka's
    updateFollowerFetchState."""
    if partition.update_follower_fetch(replica_id, fetch_offset, log_end_offset, now_ms):
        read.wake.append(TopicPartition(partition.topic, partition.index))
    if replica_id in partition.isr:
        return  # a member already: Partition.isr_to_expand would answer None
    write = state.isr.maybe_expand(partition, replica_id)
    if write is not None:
        read.isr_writes.append(write)


def _denied(wanted: FetchPartition) -> FetchPartitionData:
    return FetchPartitionData(wanted.partition, ErrorCode.TOPIC_AUTHORIZATION_FAILED, -1, -1, b"")


def count_sent(state: BrokerState, request: FetchRequest, response: FetchResponse) -> None:
    """Count the answer's bytes per topic: a follower's as replication out, a consumer's as
    bytes out, with the records it covers (the offsets from the fetch offset to the end of
    its last whole batch: the headers alone are read)."""
    replicas = state.replica_manager
    follower = request.replica_id >= 0
    for wanted, topic in zip(request.topics, response.responses, strict=False):
        counters = None
        for asked, data in zip(wanted.partitions, topic.partitions, strict=False):
            size = len(data.records)
            if not size:
                continue
            if counters is None:
                counters = replicas.counters(topic.topic)
            if follower:
                counters.replication_bytes_out += size
                continue
            counters.bytes_out += size
            end = next_offset_after_whole_batches(data.records)
            if end > asked.fetch_offset:
                counters.records_out += end - asked.fetch_offset
