"""The async consumer: assign or subscribe, seek, and poll records in offset order.

No background task: `poll()` refreshes metadata, resolves position resets with ListOffsets,
then returns buffered records or long-polls one Fetch per leader (Kafka's KafkaConsumer.poll).
Leader changes follow KIP-320: a position is validated with OffsetForLeaderEpoch when its
partition's leader epoch changes, and a truncation of consumed records raises
LogTruncationError. docs/architecture.md ("client/") has the details. Not safe for concurrent
use by several tasks (as Kafka's consumer).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from types import TracebackType
from typing import Final, NamedTuple

import trio

from client.client_metrics import ConsumerMetrics
from client.errors import (
    ClientClosedError,
    HighwaterClientError,
    LogTruncationError,
    OffsetOutOfRangeError,
    error_for_code,
)
from client.metadata import ClusterMetadata, list_offsets
from client.network import BrokerConnectionError
from protocol.errors import CorruptRecordError, ErrorCode, HighwaterError
from protocol.messages.fetch import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochPartitionResult,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochTopic,
)
from protocol.records import LOG_OVERHEAD_BYTES, decode_batches_entries, decode_record
from protocol.topic_partition import TopicPartition

__all__ = ["Consumer", "ConsumerRecord", "TopicPartition", "truncation_offset"]

RESETS: Final = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "none": None}
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


class ConsumerRecord(NamedTuple):
    """One consumed record (immutable; a NamedTuple, as kafka-python's, so that building
    thousands per fetch stays cheap)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_type: int = 0  # 0 create time, 1 log append time


_new_record = tuple.__new__  # ConsumerRecord without its Python-level __new__


@dataclass(slots=True)
class _PartitionState:
    position: int | None = None  # next offset poll returns; None: a reset is pending
    reset: int | None = None  # pending reset: -2 earliest, -1 latest, >= 0 a timestamp
    next_fetch_offset: int = 0
    # Fetched records not returned yet: buffer[buffer_pos:] (a list and an index, so poll
    # hands them out in slices rather than one popleft at a time).
    buffer: list[ConsumerRecord] = field(default_factory=list)
    buffer_pos: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    fetch_bytes: int = 0  # raised above max_partition_fetch_bytes for an oversized batch
    retry_at: float = 0.0  # trio time before which this partition is not fetched
    failures: int = 0  # consecutive retriable errors: the backoff doubles with each
    # KIP-320. The leader epoch of the batch holding the record just before `position` (None:
    # nothing consumed since the last seek or reset, so nothing to validate) ...
    position_epoch: int | None = None
    # ... and the leader epoch (from the metadata) at which that position was last fetched or
    # validated; a different one in the metadata means a leader change: validate first.
    leader_epoch: int | None = None
    fetched_epoch: int | None = None  # the epoch of the last whole batch fetched
    # One (buffer index after the batch's last record, batch epoch) per buffered batch.
    buffer_epochs: list[tuple[int, int]] = field(default_factory=list)

    def awaits_validation(self, current_leader_epoch: int) -> bool:
        """Records were consumed under an earlier leader epoch than the metadata's."""
        return (
            current_leader_epoch >= 0
            and self.position_epoch is not None
            and self.leader_epoch is not None
            and self.leader_epoch != current_leader_epoch
        )


def truncation_offset(
    position: int, position_epoch: int, leader_epoch: int, end_offset: int
) -> int | None:
    """KIP-320: the first offset known to diverge, or None if the position is valid.

    `position_epoch` is the epoch of the record consumed before `position`; (leader_epoch,
    end_offset) the leader's OffsetForLeaderEpoch answer for it: the largest epoch <= it that
    the leader has, and where that epoch ends in the leader's log. The log was truncated below
    the position if that end is before it, or if the leader never had the epoch (its records
    at those offsets carry an older one, so the last record consumed is not among them).
    An undefined answer (-1) means the leader has no epoch information: nothing to check.
    """
    if leader_epoch < 0 or end_offset < 0:
        return None
    if end_offset < position:
        return end_offset
    if leader_epoch < position_epoch:
        return position - 1
    return None


class Consumer:
    """`async with Consumer(bootstrap) as c: c.assign([("t", 0)]); await c.poll(1000)`."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = "highwater-consumer",
        auto_offset_reset: str = "latest",
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52_428_800,
        max_partition_fetch_bytes: int = 1_048_576,
        max_poll_records: int = 500,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        default_api_timeout_ms: int = 60_000,
        metadata_max_age_ms: int = 300_000,
    ) -> None:
        if auto_offset_reset not in RESETS:
            raise ValueError(f"auto_offset_reset must be one of {sorted(RESETS)}")
        self.auto_offset_reset = auto_offset_reset
        self.fetch_min_bytes = fetch_min_bytes
        self.fetch_max_wait_ms = fetch_max_wait_ms
        self.fetch_max_bytes = fetch_max_bytes
        self.max_partition_fetch_bytes = max_partition_fetch_bytes
        self.max_poll_records = max_poll_records
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_ms, retry_backoff_max_ms)
        self.default_api_timeout_ms = default_api_timeout_ms
        self.metadata = ClusterMetadata(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        self._states: dict[TopicPartition, _PartitionState] = {}
        self._subscription: set[str] | None = None
        self._closed = False
        self._metrics = ConsumerMetrics()

    # ----- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        await self.metadata.aclose()

    # ----- assignment and positions ----------------------------------------------------------

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Consume exactly these partitions (replacing any assignment or subscription).
        Positions of partitions already assigned are kept; new ones start at auto_offset_reset."""
        self._subscription = None
        wanted = [TopicPartition(t, p) for t, p in partitions]
        self._set_assignment(wanted)
        self.metadata.set_topics({tp.topic for tp in wanted})

    def subscribe(self, topics: Iterable[str]) -> None:
        """Consume every partition of these topics; partitions added later are picked up on a
        metadata refresh (metadata_max_age_ms). No consumer groups: this consumer reads all."""
        self._subscription = set(topics)
        self.metadata.set_topics(self._subscription)
        self._sync_subscription()

    def unsubscribe(self) -> None:
        self._subscription = None
        self._states.clear()

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def subscription(self) -> set[str]:
        return set(self._subscription or ())

    def seek(self, partition: tuple[str, int], offset: int) -> None:
        """The next poll returns `partition` from `offset` (out of range: auto_offset_reset)."""
        if offset < 0:
            raise ValueError("offset must be >= 0")
        _set_position(self._state(partition), offset)

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Lazily (at the next poll/position) move to the log start offset."""
        self._request_reset(partitions, EARLIEST_TIMESTAMP)

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Lazily move to the end: the high watermark, what a consumer can read up to."""
        self._request_reset(partitions, LATEST_TIMESTAMP)

    def seek_to_timestamp(
        self, timestamp_ms: int, partitions: Iterable[tuple[str, int]] | None = None
    ) -> None:
        """Lazily move to the first offset whose timestamp >= timestamp_ms (none: the end)."""
        if timestamp_ms < 0:
            raise ValueError("timestamp_ms must be >= 0")
        self._request_reset(partitions, timestamp_ms)

    async def position(self, partition: tuple[str, int]) -> int:
        """The offset of the next record poll returns for `partition` (resolving a reset)."""
        state = self._state(partition)
        if state.position is None:
            await self._resolve_resets(self.default_api_timeout_ms)
        assert state.position is not None
        return state.position

    def highwater(self, partition: tuple[str, int]) -> int | None:
        """The partition's high watermark as of the last fetch (None before one)."""
        hw = self._state(partition).high_watermark
        return None if hw < 0 else hw

    def lag(self) -> dict[TopicPartition, int]:
        """Records behind, per assigned partition: HW (as of the last fetch) - position.
        Partitions not fetched yet, or with a reset pending, are left out."""
        return {
            tp: max(0, state.high_watermark - state.position)
            for tp, state in self._states.items()
            if state.high_watermark >= 0 and state.position is not None
        }

    def metrics(self) -> dict[str, float]:
        """Kafka's consumer metrics by name: records-consumed-total/-rate,
        bytes-consumed-rate, fetch-latency-avg/-max (ms), records-lag-max and
        records-lag:<topic>-<partition> (HW - position) (client/client_metrics.py)."""
        return self._metrics.snapshot(self.lag())

    async def end_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """The high watermark (ListOffsets latest) of each partition."""
        return await self._offsets(partitions, LATEST_TIMESTAMP, timeout_ms)

    async def beginning_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        return await self._offsets(partitions, EARLIEST_TIMESTAMP, timeout_ms)

    async def offsets_for_times(
        self, timestamps: dict[tuple[str, int], int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """(offset, timestamp) of the first record at or after each timestamp (None: none)."""
        found = await list_offsets(
            self.metadata,
            {(t, p): ts for (t, p), ts in timestamps.items()},
            timeout_ms=self.default_api_timeout_ms if timeout_ms is None else timeout_ms,
        )
        return {
            TopicPartition(*tp): (value if value[0] >= 0 else None) for tp, value in found.items()
        }

    async def partitions_for(self, topic: str) -> tuple[int, ...]:
        return await self.metadata.wait_for_topic(topic, self.default_api_timeout_ms)

    async def _offsets(
        self, partitions: Iterable[tuple[str, int]], timestamp: int, timeout_ms: float | None
    ) -> dict[TopicPartition, int]:
        found = await list_offsets(
            self.metadata,
            {(t, p): timestamp for t, p in partitions},
            timeout_ms=self.default_api_timeout_ms if timeout_ms is None else timeout_ms,
        )
        return {TopicPartition(*tp): offset for tp, (offset, _) in found.items()}

    def _state(self, partition: tuple[str, int]) -> _PartitionState:
        state = self._states.get(TopicPartition(*partition))
        if state is None:
            raise HighwaterClientError(f"{partition[0]}-{partition[1]} is not assigned")
        return state

    def _request_reset(self, partitions: Iterable[tuple[str, int]] | None, reset: int) -> None:
        targets = list(self._states) if partitions is None else list(partitions)
        for tp in targets:
            state = self._state(tp)
            state.position = None
            state.position_epoch = None
            state.reset = reset
            _clear_buffer(state)

    def _default_reset(self) -> int | None:
        return RESETS[self.auto_offset_reset]

    def _set_assignment(self, wanted: Iterable[TopicPartition]) -> None:
        states = {}
        for tp in wanted:
            state = self._states.get(tp)
            states[tp] = (
                state if state is not None else _PartitionState(reset=self._default_reset())
            )
        self._states = states

    def _sync_subscription(self) -> None:
        if self._subscription is None:
            return
        wanted = [
            TopicPartition(topic, p)
            for topic in sorted(self._subscription)
            for p in self.metadata.partitions_for(topic) or ()
        ]
        if set(wanted) != set(self._states):
            self._set_assignment(wanted)

    # ----- poll --------------------------------------------------------------------------------

    async def poll(
        self, timeout_ms: float = 1_000, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records after the current positions (offset order within each partition), waiting
        at most timeout_ms for some to arrive; [] if none did."""
        if self._closed:
            raise ClientClosedError("consumer is closed")
        if not self._states and self._subscription is None:
            raise HighwaterClientError("poll without assign() or subscribe()")
        limit = self.max_poll_records if max_records is None else max_records
        deadline = trio.current_time() + max(0.0, timeout_ms) / 1000
        while True:
            await self.metadata.maybe_refresh()
            self._sync_subscription()
            if any(s.position is None for s in self._states.values()):
                await self._resolve_resets(
                    max(0.0, (deadline - trio.current_time()) * 1000), quiet=True
                )
            records = self._drain(limit)
            if records:
                self._metrics.records_consumed += len(records)
                return records
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                return []
            await self._validate_positions()
            await self._fetch_round(deadline)

    def _drain(self, limit: int) -> list[ConsumerRecord]:
        out: list[ConsumerRecord] = []
        for state in self._states.values():
            buffer = state.buffer
            start = state.buffer_pos
            if start < len(buffer) and len(out) < limit:
                taken = buffer[start : start + limit - len(out)]
                out += taken
                state.position = taken[-1].offset + 1
                state.buffer_pos = start + len(taken)
                state.position_epoch = _buffered_epoch(state, state.buffer_pos - 1)
                if state.buffer_pos >= len(buffer):
                    _clear_buffer(state)
            if not state.buffer and state.position is not None:
                _advance_past_fetched(state)
            if len(out) >= limit:
                break
        return out

    async def _resolve_resets(self, timeout_ms: float, *, quiet: bool = False) -> None:
        """ListOffsets for partitions whose position is pending; raise OffsetOutOfRangeError
        for those without a strategy ("none"). `quiet`: leave unresolved ones for later."""
        # Twice: a timestamp with no record at/after it turns into a "latest" reset.
        for _ in range(2):
            await self._resolve_resets_once(timeout_ms, quiet=quiet)
            if all(s.position is not None for s in self._states.values()):
                return

    async def _resolve_resets_once(self, timeout_ms: float, *, quiet: bool) -> None:
        pending = {tp: s for tp, s in self._states.items() if s.position is None}
        none = {tp: -1 for tp, s in pending.items() if s.reset is None}
        if none:
            raise OffsetOutOfRangeError(
                "OFFSET_OUT_OF_RANGE: no position and auto_offset_reset is 'none' for "
                + ", ".join(f"{t}-{p}" for t, p in none),
                {(tp.topic, tp.partition): pos for tp, pos in none.items()},
            )
        timestamps = {
            (tp.topic, tp.partition): s.reset for tp, s in pending.items() if s.reset is not None
        }
        try:
            found = await list_offsets(
                self.metadata, timestamps, timeout_ms=timeout_ms, partial=quiet
            )
        except HighwaterClientError:
            if quiet:
                return  # as Kafka's poll: retried on the next round (e.g. a topic being created)
            raise
        for tp, (offset, _) in found.items():
            state = self._states.get(TopicPartition(*tp))
            if state is None or state.position is not None:
                continue
            if offset < 0:
                state.reset = LATEST_TIMESTAMP  # no record at/after the timestamp: the end
                continue
            _set_position(state, offset)  # as Kafka: a reset position is not validated

    async def _fetch_round(self, deadline: float) -> None:
        """One Fetch per leader with fetchable partitions; returns when one brought records,
        when all answered, or at the deadline."""
        now = trio.current_time()
        by_leader: dict[int, list[TopicPartition]] = {}
        next_retry = math.inf
        for tp, state in self._states.items():
            if state.position is None or state.buffer:
                continue
            if state.retry_at > now:
                next_retry = min(next_retry, state.retry_at)
                continue
            leader = self.metadata.leader_for(*tp)
            info = self.metadata.partition_info(*tp)
            if leader is None or info is None or state.awaits_validation(info.leader_epoch):
                self.metadata.request_update()
                next_retry = min(next_retry, now + self.retry_backoff_ms / 1000)
                continue
            by_leader.setdefault(leader, []).append(tp)
        if not by_leader:
            await trio.sleep_until(min(deadline, next_retry, now + self.retry_backoff_ms / 1000))
            return
        max_wait_ms = int(max(0.0, min(self.fetch_max_wait_ms, (deadline - now) * 1000)))
        errors: list[HighwaterClientError] = []
        async with trio.open_nursery() as nursery:
            for leader, tps in by_leader.items():
                nursery.start_soon(self._fetch_from, leader, tps, max_wait_ms, nursery, errors)
        if errors:
            raise errors[0]

    async def _fetch_from(
        self,
        leader: int,
        tps: list[TopicPartition],
        max_wait_ms: int,
        nursery: trio.Nursery,
        errors: list[HighwaterClientError],
    ) -> None:
        offsets = {tp: self._states[tp].next_fetch_offset for tp in tps}
        topics: dict[str, list[FetchPartition]] = {}
        for tp in tps:
            info = self.metadata.partition_info(*tp)
            state = self._states[tp]
            leader_epoch = info.leader_epoch if info is not None else -1
            state.leader_epoch = leader_epoch  # records fetched now are valid under this epoch
            topics.setdefault(tp.topic, []).append(
                FetchPartition(
                    tp.partition,
                    offsets[tp],
                    max(self.max_partition_fetch_bytes, state.fetch_bytes),
                    current_leader_epoch=leader_epoch,
                )
            )
        request = FetchRequest(
            replica_id=CONSUMER_REPLICA_ID,
            max_wait_ms=max_wait_ms,
            min_bytes=self.fetch_min_bytes,
            max_bytes=self.fetch_max_bytes,
            topics=tuple(FetchTopic(t, tuple(ps)) for t, ps in topics.items()),
        )
        try:
            started = trio.current_time()
            response: FetchResponse = await self.metadata.request(
                leader, request, timeout_ms=max_wait_ms + self.request_timeout_ms
            )
            self._metrics.fetch_done(
                trio.current_time() - started,
                sum(len(p.records) for t in response.responses for p in t.partitions),
            )
        except BrokerConnectionError:
            self.metadata.request_update()
            self._back_off(tps)
            return
        got_records = False
        for topic_response in response.responses:
            for data in topic_response.partitions:
                tp = TopicPartition(topic_response.topic, data.partition_index)
                current = self._states.get(tp)
                if current is None or tp not in offsets or current.next_fetch_offset != offsets[tp]:
                    continue  # unassigned or sought meanwhile: stale data
                try:
                    got_records |= self._handle_partition(tp, current, data)
                except HighwaterClientError as exc:
                    errors.append(exc)
        if got_records or errors:
            nursery.cancel_scope.cancel()  # give the caller what arrived; drop slower fetches

    def _handle_partition(
        self, tp: TopicPartition, state: _PartitionState, data: FetchPartitionData
    ) -> bool:
        code = data.error_code
        if code == ErrorCode.NONE:
            state.high_watermark = data.high_watermark
            state.log_start_offset = data.log_start_offset
            state.failures = 0
            return self._append_records(tp, state, data.records)
        if code == ErrorCode.OFFSET_OUT_OF_RANGE:
            reset = self._default_reset()
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
            self._back_off([tp])
            return False
        raise error_for_code(code, f"fetch {tp.topic}-{tp.partition}")

    def _append_records(self, tp: TopicPartition, state: _PartitionState, records: bytes) -> bool:
        fetch_offset = state.next_fetch_offset
        appended = False
        whole_batches = 0
        topic, partition = tp
        append = state.buffer.append
        epochs = state.buffer_epochs
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
                    state.fetched_epoch = _epoch_or_none(header.partition_leader_epoch)
        except (CorruptRecordError, HighwaterError) as exc:
            raise HighwaterClientError(
                f"CORRUPT_MESSAGE: {tp.topic}-{tp.partition} at offset {fetch_offset}: {exc}",
                ErrorCode.CORRUPT_MESSAGE,
            ) from exc
        if whole_batches:
            state.fetch_bytes = 0
        elif len(records) >= LOG_OVERHEAD_BYTES:
            # Only a partial batch: it is larger than the partition fetch size. Ask for more.
            size = max(self.max_partition_fetch_bytes, state.fetch_bytes)
            if size >= self.fetch_max_bytes:
                raise HighwaterClientError(
                    f"MESSAGE_TOO_LARGE: a batch in {tp.topic}-{tp.partition} at offset "
                    f"{fetch_offset} exceeds fetch_max_bytes {self.fetch_max_bytes}",
                    ErrorCode.MESSAGE_TOO_LARGE,
                )
            state.fetch_bytes = min(self.fetch_max_bytes, size * 2)
        if not state.buffer and state.position is not None:
            _advance_past_fetched(state)
        return appended

    def _back_off(self, tps: Iterable[TopicPartition]) -> None:
        """Retry these partitions after retry_backoff_ms, doubled per consecutive failure up to
        retry_backoff_max_ms (Kafka's exponential retry backoff)."""
        now = trio.current_time()
        for tp in tps:
            state = self._states.get(tp)
            if state is not None:
                state.failures += 1
                backoff_ms = min(
                    self.retry_backoff_max_ms,
                    self.retry_backoff_ms * (1 << min(state.failures - 1, 16)),
                )
                state.retry_at = now + backoff_ms / 1000

    # ----- position validation (KIP-320) -------------------------------------------------------

    async def _validate_positions(self) -> None:
        """OffsetForLeaderEpoch (one request per leader, concurrently) for the positions whose
        partition has a new leader epoch since they were fetched; LogTruncationError if a
        leader's log no longer holds what was consumed."""
        now = trio.current_time()
        by_leader: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp, state in self._states.items():
            if state.position is None or state.buffer or state.retry_at > now:
                continue
            info = self.metadata.partition_info(*tp)
            if info is None or not state.awaits_validation(info.leader_epoch):
                continue
            leader = self.metadata.leader_for(*tp)
            if leader is None:
                self.metadata.request_update()
                continue
            by_leader.setdefault(leader, []).append((tp, info.leader_epoch))
        if not by_leader:
            return
        errors: list[HighwaterClientError] = []
        async with trio.open_nursery() as nursery:
            for leader, wanted in by_leader.items():
                nursery.start_soon(self._validate_at, leader, wanted, errors)
        if errors:
            raise errors[0]

    async def _validate_at(
        self,
        leader: int,
        wanted: list[tuple[TopicPartition, int]],
        errors: list[HighwaterClientError],
    ) -> None:
        asked: dict[TopicPartition, tuple[int, int, int]] = {}  # position, its epoch, current
        topics: dict[str, list[OffsetForLeaderEpochPartition]] = {}
        for tp, current_epoch in wanted:
            state = self._states[tp]
            assert state.position is not None and state.position_epoch is not None
            asked[tp] = (state.position, state.position_epoch, current_epoch)
            topics.setdefault(tp.topic, []).append(
                OffsetForLeaderEpochPartition(tp.partition, state.position_epoch, current_epoch)
            )
        request = OffsetForLeaderEpochRequest(
            tuple(OffsetForLeaderEpochTopic(t, tuple(ps)) for t, ps in topics.items())
        )
        try:
            response: OffsetForLeaderEpochResponse = await self.metadata.request(
                leader, request, timeout_ms=self.request_timeout_ms
            )
        except BrokerConnectionError:
            self.metadata.request_update()
            self._back_off(asked)
            return
        for topic_result in response.topics:
            for result in topic_result.partitions:
                tp = TopicPartition(topic_result.topic, result.partition)
                current = self._states.get(tp)
                if tp not in asked or current is None:
                    continue
                position, position_epoch, current_epoch = asked[tp]
                if (current.position, current.position_epoch) != (position, position_epoch):
                    continue  # sought meanwhile: the answer is about another position
                try:
                    self._complete_validation(tp, current, current_epoch, result)
                except HighwaterClientError as exc:
                    errors.append(exc)

    def _complete_validation(
        self,
        tp: TopicPartition,
        state: _PartitionState,
        current_epoch: int,
        result: OffsetForLeaderEpochPartitionResult,
    ) -> None:
        code = result.error_code
        if code == ErrorCode.NONE:
            assert state.position is not None and state.position_epoch is not None
            divergent = truncation_offset(
                state.position, state.position_epoch, result.leader_epoch, result.end_offset
            )
            if divergent is not None:
                # The position stays unvalidated: every poll raises this until a seek.
                raise LogTruncationError(tp.topic, tp.partition, state.position, divergent)
            state.leader_epoch = current_epoch
            state.failures = 0
            return
        if code in LEADER_ERRORS or ErrorCode(code).retriable:
            self.metadata.request_update()
            self._back_off([tp])
            return
        raise error_for_code(code, f"offset for leader epoch of {tp.topic}-{tp.partition}")


def _clear_buffer(state: _PartitionState) -> None:
    state.buffer = []
    state.buffer_pos = 0
    state.buffer_epochs = []


def _set_position(state: _PartitionState, offset: int) -> None:
    """A position from a seek or a reset: nothing consumed behind it, nothing to validate."""
    state.position = offset
    state.next_fetch_offset = offset
    state.reset = None
    state.position_epoch = None
    state.fetched_epoch = None
    _clear_buffer(state)


def _advance_past_fetched(state: _PartitionState) -> None:
    """Everything fetched was returned: continue after the last whole batch (skipping records
    below a mid-batch fetch offset), which is then the batch the position's epoch comes from."""
    assert state.position is not None
    if state.next_fetch_offset > state.position:
        state.position = state.next_fetch_offset
        state.position_epoch = state.fetched_epoch


def _buffered_epoch(state: _PartitionState, index: int) -> int | None:
    """The leader epoch of the batch that buffer[index] came from."""
    marks = state.buffer_epochs
    at = bisect.bisect_right(marks, index, key=itemgetter(0))
    return _epoch_or_none(marks[at][1]) if at < len(marks) else None


def _epoch_or_none(epoch: int) -> int | None:
    return epoch if epoch >= 0 else None  # batches written without an epoch: nothing to check
