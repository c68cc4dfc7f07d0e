"""The fetch path (Kafka's Fetcher and FetchCollector): one long-polling Fetch per partition
leader, decoded straight into the partitions' buffers, and `drain` handing buffered records
out in offset order. Only partitions with nothing buffered are fetched, so memory stays
within one fetch's bytes per partition. docs/architecture.md ("client/") has the details.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

import trio

from client.client_metrics import ConsumerMetrics
from client.consumer.partition_state import (
    ConsumerRecord,
    PartitionState,
    advance_past_fetched,
    back_off,
    buffered_epoch,
    clear_buffer,
    epoch_or_none,
)
from client.errors import (
    CorruptBatchError,
    HighwaterClientError,
    OffsetOutOfRangeError,
    error_for_code,
)
from client.metadata import ClusterMetadata
from client.network import BrokerConnectionError
from protocol.errors import CorruptRecordError, ErrorCode, HighwaterError
from protocol.fetch_session import FetchSessionHandler, fetch_entry
from protocol.messages.fetch import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from protocol.records import LOG_OVERHEAD_BYTES, decode_batches_entries, decode_record
from protocol.topic_partition import TopicPartition

__all__ = ["LEADER_ERRORS", "FetchSettings", "Fetcher"]

LEADER_ERRORS: Final = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.REPLICA_NOT_AVAILABLE,
        ErrorCode.KAFKA_STORAGE_ERROR,
        ErrorCode.OFFSET_NOT_AVAILABLE,
    }
)

_new_record = tuple.__new__  # ConsumerRecord without its Python-level __new__

_BASE_AND_LENGTH: Final = struct.Struct(">qi")
_LAST_OFFSET_DELTA: Final = struct.Struct(">i")
_LAST_OFFSET_DELTA_AT: Final = 23


@dataclass(frozen=True, slots=True)
class FetchSettings:
    fetch_min_bytes: int
    fetch_max_wait_ms: int
    fetch_max_bytes: int
    max_partition_fetch_bytes: int
    request_timeout_ms: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    default_reset: int | None  # auto_offset_reset as a ListOffsets timestamp; None: "none"


class Fetcher:
    def __init__(self, metadata: ClusterMetadata, settings: FetchSettings) -> None:
        self.metadata = metadata
        self.settings = settings
        self.metrics = ConsumerMetrics()  # what Consumer.metrics() reports
        # One fetch session per leader (KIP-227): a fetch names only partitions whose
        # position or epoch changed, and the answer only partitions with news.
        self._sessions: dict[int, FetchSessionHandler] = {}

    def back_off(
        self, states: Mapping[TopicPartition, PartitionState], tps: Iterable[TopicPartition]
    ) -> None:
        s = self.settings
        back_off(states, tps, trio.current_time(), s.retry_backoff_ms, s.retry_backoff_max_ms)

    # ----- handing out buffered records ------------------------------------------------------

    @staticmethod
    def drain(states: Mapping[TopicPartition, PartitionState], limit: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        for state in states.values():
            if not state.fetchable:
                continue
            buffer = state.buffer
            start = state.buffer_pos
            if start < len(buffer) and len(out) < limit:
                taken = buffer[start : start + limit - len(out)]
                out += taken
                state.position = taken[-1].offset + 1
                state.buffer_pos = start + len(taken)
                state.position_epoch = buffered_epoch(state, state.buffer_pos - 1)
                if state.buffer_pos >= len(buffer):
                    clear_buffer(state)
            if not state.buffer and state.position is not None:
                advance_past_fetched(state)
            if len(out) >= limit:
                break
        return out

    # ----- fetching --------------------------------------------------------------------------

    async def fetch_round(
        self, states: Mapping[TopicPartition, PartitionState], deadline: float
    ) -> None:
        """One Fetch per leader with fetchable partitions; returns when one brought records,
        when all answered, or at the deadline."""
        now = trio.current_time()
        by_leader: dict[int, list[TopicPartition]] = {}
        next_retry = math.inf
        retry_s = self.settings.retry_backoff_ms / 1000
        for tp, state in states.items():
            if state.position is None or state.buffer or not state.fetchable:
                continue
            if state.pending_error is not None:
                error, state.pending_error = state.pending_error, None
                raise error
            if state.retry_at > now:
                next_retry = min(next_retry, state.retry_at)
                continue
            leader = self.metadata.leader_for(*tp)
            info = self.metadata.partition_info(*tp)
            if leader is None or info is None or state.awaits_validation(info.leader_epoch):
                self.metadata.request_update()
                next_retry = min(next_retry, now + retry_s)
                continue
            by_leader.setdefault(leader, []).append(tp)
        if not by_leader:
            await trio.sleep_until(min(deadline, next_retry, now + retry_s))
            return
        max_wait_ms = int(max(0.0, min(self.settings.fetch_max_wait_ms, (deadline - now) * 1000)))
        errors: list[HighwaterClientError] = []
        if len(by_leader) == 1:
            # One leader (one partition, or all led by one broker): fetch from this task. A
            # task of its own costs a trip through trio's scheduler each way, on the path
            # of every record (docs/performance.md, "The clients' side of a round").
            [(leader, tps)] = by_leader.items()
            await self._fetch_from(states, leader, tps, max_wait_ms, None, errors)
        else:
            async with trio.open_nursery() as nursery:
                for leader, tps in by_leader.items():
                    nursery.start_soon(
                        self._fetch_from, states, leader, tps, max_wait_ms, nursery, errors
                    )
        if errors:
            raise errors[0]

    async def _fetch_from(
        self,
        states: Mapping[TopicPartition, PartitionState],
        leader: int,
        tps: list[TopicPartition],
        max_wait_ms: int,
        nursery: trio.Nursery | None,
        errors: list[HighwaterClientError],
    ) -> None:
        """One Fetch to `leader`; with `nursery` (fetches to several leaders), records or an
        error here end the others."""
        settings = self.settings
        offsets = {tp: states[tp].next_fetch_offset for tp in tps}
        wanted: dict[TopicPartition, FetchPartition] = {}
        for tp in tps:
            info = self.metadata.partition_info(*tp)
            state = states[tp]
            leader_epoch = info.leader_epoch if info is not None else -1
            state.leader_epoch = leader_epoch  # records fetched now are valid under this epoch
            wanted[tp] = state.fetch_entry = fetch_entry(
                state.fetch_entry,
                tp.partition,
                offsets[tp],
                max(settings.max_partition_fetch_bytes, state.fetch_bytes),
                leader_epoch,
            )
        session = self._sessions.setdefault(leader, FetchSessionHandler())
        plan = session.build(wanted)
        request = FetchRequest(
            replica_id=CONSUMER_REPLICA_ID,
            max_wait_ms=max_wait_ms,
            min_bytes=settings.fetch_min_bytes,
            max_bytes=settings.fetch_max_bytes,
            topics=plan.topics,
            session_id=plan.session_id,
            session_epoch=plan.session_epoch,
            forgotten_topics_data=plan.forgotten,
        )
        answered = False
        try:
            started = trio.current_time()
            response: FetchResponse = await self.metadata.request(
                leader, request, timeout_ms=max_wait_ms + settings.request_timeout_ms
            )
            answered = True
            self.metrics.fetch_done(
                trio.current_time() - started,
                sum(len(p.records) for t in response.responses for p in t.partitions),
            )
        except BrokerConnectionError:
            self.metadata.request_update()
            self.back_off(states, tps)
            return
        finally:
            if not answered:  # failed, or cancelled (another leader answered first)
                session.handle_error()
        session.handle_response(response)  # a refused session: the next fetch is full
        got_records = False
        for topic_response in response.responses:
            for data in topic_response.partitions:
                tp = TopicPartition(topic_response.topic, data.partition_index)
                current = states.get(tp)
                if (
                    current is None
                    or not current.fetchable
                    or tp not in offsets
                    or current.next_fetch_offset != offsets[tp]
                ):
                    continue  # unassigned, being revoked or sought meanwhile: stale data
                try:
                    got_records |= self._handle_partition(states, tp, current, data)
                except HighwaterClientError as exc:
                    errors.append(exc)
        if (got_records or errors) and nursery is not None:
            nursery.cancel_scope.cancel()  # give the caller what arrived; drop slower fetches

    def _handle_partition(
        self,
        states: Mapping[TopicPartition, PartitionState],
        tp: TopicPartition,
        state: PartitionState,
        data: FetchPartitionData,
    ) -> bool:
        code = data.error_code
        if code == ErrorCode.NONE:
            state.high_watermark = data.high_watermark
            state.log_start_offset = data.log_start_offset
            state.failures = 0
            return self._append_records(tp, state, data.records)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            reset = self.settings.default_reset
            if reset is None:
                raise OffsetOutOfRangeError(
                    f"OFFSET_OUT_OF_RANGE: {tp.topic}-{tp.partition} offset "
                    f"{state.next_fetch_offset} (log start {data.log_start_offset}, "
                    f"high watermark {data.high_watermark})",
                    {(tp.topic, tp.partition): state.next_fetch_offset},
                )
            state.position = None
            state.position_epoch = None
            state.reset = reset
            return False
        if code in LEADER_ERRORS or ErrorCode(code).retriable:
            self.metadata.request_update()
            self.back_off(states, [tp])
            return False
        raise error_for_code(code, f"fetch {tp.topic}-{tp.partition}")

    def _append_records(self, tp: TopicPartition, state: PartitionState, records: bytes) -> bool:
        fetch_offset = state.next_fetch_offset
        appended = False
        whole_batches = 0
        read_batches = 0  # those whose records were all taken
        topic, partition = tp
        buffer = state.buffer
        append = buffer.append
        epochs = state.buffer_epochs
        kept = len(buffer)  # the buffer up to the last batch read whole
        try:
            for header, entries in decode_batches_entries(records):
                whole_batches += 1
                base_offset = header.base_offset
                base_timestamp = header.base_timestamp
                last_delta = header.last_offset_delta
                timestamp_type = header.timestamp_type
                for index, entry in enumerate(entries):
                    # decode_record's checks, inlined for the common shape; anything else
                    # goes through decode_record itself (which raises the precise error).
                    if type(entry) is tuple and len(entry) == 5:
                        ts_delta, offset_delta, key, value, headers = entry
                        if (
                            type(ts_delta) is int
                            and type(offset_delta) is int
                            and 0 <= offset_delta <= last_delta
                            and (key is None or type(key) is bytes)
                            and (value is None or type(value) is bytes)
                            and type(headers) is tuple
                            and not headers
                        ):
                            offset = base_offset + offset_delta
                            if offset < fetch_offset:
                                continue  # the fetch started mid-batch (or a bad delta)
                            fetch_offset = offset + 1  # offsets only go up, gaps or not
                            append(
                                _new_record(
                                    ConsumerRecord,
                                    (
                                        topic,
                                        partition,
                                        offset,
                                        base_timestamp + ts_delta,
                                        key,
                                        value,
                                        (),
                                        timestamp_type,
                                    ),
                                )
                            )
                            appended = True
                            continue
                    r = decode_record(entry, header, index)
                    if r.offset < fetch_offset:
                        continue
                    fetch_offset = r.offset + 1
                    append(
                        ConsumerRecord(
                            topic,
                            partition,
                            r.offset,
                            r.timestamp_ms,
                            r.key,
                            r.value,
                            r.headers,
                            timestamp_type,
                        )
                    )
                    appended = True
                epochs.append((len(state.buffer), header.partition_leader_epoch))
                if header.next_offset > state.next_fetch_offset:
                    state.next_fetch_offset = header.next_offset
                    state.fetched_epoch = epoch_or_none(header.partition_leader_epoch)
                read_batches += 1
                kept = len(buffer)
        except (CorruptRecordError, HighwaterError) as exc:
            del buffer[kept:]  # a batch is returned whole or not at all
            offset, next_offset = _corrupt_batch_offsets(records, read_batches, fetch_offset)
            error = CorruptBatchError(topic, partition, offset, next_offset, str(exc))
            error.__cause__ = exc
            if not buffer:
                raise error from exc
            state.pending_error = error
        settings = self.settings
        if whole_batches:
            state.fetch_bytes = 0
        elif len(records) >= LOG_OVERHEAD_BYTES:
            # Only a partial batch: it is larger than the partition fetch size. Ask for more.
            size = max(settings.max_partition_fetch_bytes, state.fetch_bytes)
            if size >= settings.fetch_max_bytes:
                raise HighwaterClientError(
                    f"MESSAGE_TOO_LARGE: a batch in {tp.topic}-{tp.partition} at offset "
                    f"{fetch_offset} exceeds fetch_max_bytes {settings.fetch_max_bytes}",
                    ErrorCode.MESSAGE_TOO_LARGE,
                )
            state.fetch_bytes = min(settings.fetch_max_bytes, size * 2)
        if not state.buffer and state.position is not None:
            advance_past_fetched(state)
        return appended


def _corrupt_batch_offsets(records: bytes, good_batches: int, fetch_offset: int) -> tuple[int, int]:
    """The base offset of the batch after the first `good_batches` of `records` (the one that
    failed to decode), and the offset past it: the next batch's base offset when it came
    along, else the damaged header's own count, else one past its base (at least past the
    fetch offset)."""
    positions: list[int] = []
    pos = 0
    while len(records) - pos >= LOG_OVERHEAD_BYTES and len(positions) < good_batches + 2:
        positions.append(pos)
        _, length = _BASE_AND_LENGTH.unpack_from(records, pos)
        if length <= 0:
            break
        pos += LOG_OVERHEAD_BYTES + length
    if good_batches >= len(positions):
        return fetch_offset, fetch_offset + 1
    at = positions[good_batches]
    base, _ = _BASE_AND_LENGTH.unpack_from(records, at)
    if good_batches + 1 < len(positions):
        after, _ = _BASE_AND_LENGTH.unpack_from(records, positions[good_batches + 1])
        if after > base:
            return base, after
    if len(records) - at >= _LAST_OFFSET_DELTA_AT + 4:
        (delta,) = _LAST_OFFSET_DELTA.unpack_from(records, at + _LAST_OFFSET_DELTA_AT)
        if delta >= 0:
            return base, max(base + delta + 1, fetch_offset + 1)
    return base, max(base + 1, fetch_offset + 1)
