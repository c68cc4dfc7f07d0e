"""The async producer: Kafka's RecordAccumulator + Sender, in trio.

`send()` picks a partition (explicit, murmur2 of the key, or sticky for keyless records), appends
the record to that partition's open batch and returns a `DeliveryFuture` at once; it only waits
for topic metadata (first send to a topic) and for buffer memory, each bounded by max_block_ms.
`send_nowait()` is the synchronous core (trio.WouldBlock instead of waiting): the per-record
path has no await; `send` yields once per batch it opens or fills so the sender keeps requests
in flight while the caller builds the next batches. Records are kept per batch in their
msgpack form (drain = one pack), and a record's DeliveryFuture is a 3-slot view of its batch's
shared result: futures and callbacks are resolved in bulk when the batch completes.

One sender task drains the accumulator: a partition's head batch is *ready* when it is full,
lingered linger_ms, or a flush/close is in progress. For each broker leading a ready partition it
sends one Produce request carrying the ready batches of every partition that broker leads (up to
max_request_size), with at most max_in_flight_requests_per_connection requests outstanding per
broker. Retriable errors (and connection errors/timeouts) put the batch back in its partition's
queue after retry_backoff_ms and ask for a metadata refresh, until `retries` or
delivery_timeout_ms run out; anything else fails the batch's futures with the Kafka error name.
A batch is encoded once, at its first drain; a retry resends the identical bytes.

Idempotence (KIP-98, on by default as in Kafka 3.x; needs acks="all", retries > 0 and at most 5
requests in flight per connection: `enable_idempotence=None` turns it off silently when another
setting conflicts, `True` raises ValueError). Before its first Produce the sender gets a
producer id and epoch with InitProducerId from any broker (retriable errors retried every
retry_backoff_ms, at most max_block_ms; then the queued records fail and a later send tries
again). Each partition's batches get consecutive sequence numbers when first drained (wrapping
at 2**31-1 to 0), stamped into the encoded bytes and kept across retries, so the leader stores
a resent batch once and answers it with the original offset. Order per partition is kept across
retries as in Kafka: at most 5 unacknowledged batches per partition (the leader dedupes against
its last 5; only 1 until the partition's first acknowledgement, since a leader takes a producer
it does not know at any sequence); a retried batch goes back into its queue in sequence order,
and while a partition has retried batches only its lowest unacknowledged one is sent, alone
for its partition in its request (a leader answers a request holding a resend with the resent
batch's offset and appends nothing of it). OUT_OF_ORDER_SEQUENCE_NUMBER for a batch with an
unacknowledged predecessor is retried (that predecessor failed first). Because only 5 batches
of a partition may be out at once, a partition that falls behind (two full batches waiting)
fills its next batches up to 256 KiB instead of batch_size: with acks=all on a replicated
partition, 5 batches of 16 KiB per round trip would otherwise halve throughput. A topic with a
small segment.bytes or max.message.bytes refuses those (RECORD_LIST_TOO_LARGE,
MESSAGE_TOO_LARGE): the partition's batches then go one per request (as Kafka's), and a batch
refused alone is split into batches of at most batch_size and half its size that keep its
sequence numbers (KIP-126), later batches staying within that size; a single record refused
alone fails, as in Kafka.

What stops an idempotent producer (a `ProducerFatalError`; Kafka bumps the epoch instead in
some cases): OUT_OF_ORDER_SEQUENCE_NUMBER for the batch that is next in sequence
(`OutOfOrderSequenceError`), INVALID_PRODUCER_EPOCH (`ProducerFencedError`),
UNKNOWN_PRODUCER_ID (`UnknownProducerIdError`), and a batch that fails (delivery_timeout_ms,
retries or an error code that does not say "not appended") after an attempt whose outcome is
unknown (a connection error, a timeout, NOT_ENOUGH_REPLICAS_AFTER_APPEND...): its sequence is
unresolved, so no later batch of the partition can be numbered safely. That batch fails with its
own error, every other pending record of the producer (queued or in flight) fails with the
fatal error, and every later `send()` raises it: nothing is dropped or duplicated silently.
A batch the broker refused outright (MESSAGE_TOO_LARGE, NOT_ENOUGH_REPLICAS until it
expired, ...) fails alone: its sequence numbers are given back and the partition's later batches
renumbered (Kafka's adjustSequencesDueToFailedBatch). A queued batch expiring while earlier
batches of its partition are in flight is the same: if it was never sent, or every attempt was
refused, it fails alone; if an attempt's outcome is unknown, the producer stops.

Without idempotence (producer id -1): with more than one request in flight a retried batch can
land after a later one, and a retry after a lost acknowledgement duplicates its records;
max_in_flight_requests_per_connection=1 keeps order (the partition is muted while its batch is
in flight).
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

import trio

from client.errors import (
    ClientClosedError,
    HighwaterClientError,
    HighwaterTimeoutError,
    NoBrokersAvailable,
    OutOfOrderSequenceError,
    ProducerFatalError,
    error_for_code,
)
from client.metadata import ClusterMetadata
from client.network import BrokerConnectionError
from client.partitioner import StickyPartitioner, partition_for_key
from protocol.compression import Compression
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.produce import (
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from protocol.records import (
    BATCH_HEADER_BYTES,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Record,
    build_batch_from_entries,
)
from protocol.topic_partition import TopicPartition

__all__ = [
    "MAX_IN_FLIGHT_BATCHES_PER_PARTITION",
    "DeliveryFuture",
    "IdempotenceState",
    "PartitionSequences",
    "Producer",
    "ProducerBatch",
    "RecordAccumulator",
    "RecordMetadata",
    "estimate_record_bytes",
    "increment_sequence",
]

COMPRESSIONS: Final = {
    "none": Compression.NONE,
    "gzip": Compression.GZIP,
    "zstd": Compression.ZSTD,
}
# Errors after which our idea of the partition's leader is probably wrong.
METADATA_ERRORS: Final = frozenset(
    {
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.LEADER_NOT_AVAILABLE,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
# Idempotence: a partition leader keeps the last 5 batches per producer to answer resends.
MAX_IN_FLIGHT_BATCHES_PER_PARTITION: Final = 5
_MAX_SEQUENCE: Final = 0x7FFFFFFF  # sequences wrap from 2**31-1 to 0
_TRANSACTION_TIMEOUT_MS: Final = 60_000  # Kafka's transaction.timeout.ms (no transactions here)
# Answers after which a batch may be in the log even though it failed: a resend would be
# deduplicated, but giving its sequence numbers to another batch would not be safe.
_MAYBE_APPENDED: Final = frozenset(
    {
        ErrorCode.UNKNOWN_SERVER_ERROR,
        ErrorCode.REQUEST_TIMED_OUT,
        ErrorCode.NETWORK_EXCEPTION,
        ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND,
        ErrorCode.KAFKA_STORAGE_ERROR,
    }
)
# The coordinator errors Kafka retries for InitProducerId, whether or not protocol.errors names
# them: COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR.
_COORDINATOR_RETRIABLE_CODES: Final = frozenset({14, 15, 16})
_RECORD_OVERHEAD_BYTES: Final = 16  # msgpack array, deltas and bin headers of one record
# The most a backlogged idempotent partition's batch grows to: 5 of them in flight keep a
# replicated partition's pipeline full, and each stays well under message.max.bytes (1 MiB).
_MAX_BACKLOG_BATCH_BYTES: Final = 256 * 1024
_NETWORK_TIMEOUT_MARGIN_MS: Final = 1_000  # the broker answers its own timeout first
# Refusals of a batch as too big, after which it is split into batches of batch_size (KIP-126).
_TOO_LARGE: Final = frozenset({ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.RECORD_LIST_TOO_LARGE})


def estimate_record_bytes(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> int:
    """Uncompressed size of a record in a batch (close to msgpack's; used for batch_size)."""
    size = _RECORD_OVERHEAD_BYTES + len(key or b"") + len(value or b"")
    for name, header_value in headers:
        size += 4 + len(name) + len(header_value or b"")
    return size


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int  # -1 with acks=0 (the broker does not answer)
    timestamp: int  # the record's create time, or the broker's log append time


class _BatchResult:
    """The outcome of one batch, shared by the futures of its records (Kafka's
    ProduceRequestResult): one event and one callback list per batch, not per record."""

    __slots__ = (
        "base_offset",
        "callbacks",
        "done",
        "error",
        "event",
        "log_append_time_ms",
        "partition",
        "parts",
        "topic",
        "whole",
    )

    def __init__(self, topic: str, partition: int) -> None:
        self.topic = topic
        self.partition = partition
        self.event = trio.Event()
        self.done = False  # event.is_set(), as a plain attribute for the per-record checks
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: HighwaterClientError | None = None
        # (fn, future) in registration order, run once when the batch completes
        self.callbacks: list[tuple[Callable[[DeliveryFuture], None], DeliveryFuture]] = []
        # Set when the batch was split (KIP-126): (index of its first record here, the result
        # of the smaller batch holding it), in order. Each record completes with its piece, as
        # in Kafka; this result is done when all the pieces are.
        self.parts: list[tuple[int, _BatchResult]] | None = None
        self.whole: _BatchResult | None = None  # the result this one is a piece of

    def part_of(self, index: int) -> tuple[_BatchResult, int]:
        """The result that holds record `index` of this batch, and the record's index there
        (through splits of splits)."""
        result = self
        while result.parts is not None:
            first, part = next((f, r) for f, r in reversed(result.parts) if f <= index)
            result, index = part, index - first
        return result, index

    def split_into(self, parts: list[tuple[int, _BatchResult]]) -> None:
        """Hand this batch's records to the results of its pieces (see `parts`)."""
        self.parts = parts
        callbacks, self.callbacks = self.callbacks, []
        for fn, future in callbacks:  # each record's callback now runs with its piece
            future.add_done_callback(fn)
        for _, part in parts:
            part.whole = self
        # Wake the records' waiters, which go on waiting for their own piece; a fresh event
        # stands for the whole batch (flush waits for that).
        woken, self.event = self.event, trio.Event()
        woken.set()

    def finish(self) -> None:
        """Mark done, wake the waiters and run the callbacks (once)."""
        if self.done:
            return
        self.done = True
        self.event.set()
        callbacks, self.callbacks = self.callbacks, []
        for fn, future in callbacks:
            fn(future)
        whole = self.whole
        if whole is not None and whole.parts and all(part.done for _, part in whole.parts):
            whole.finish()


class DeliveryFuture:
    """The delivery result of one record: `await fut` gives RecordMetadata or raises
    HighwaterClientError. `add_done_callback(fn)` calls fn(fut) in the producer's trio thread.

    Light by design (three slots): the state lives in its batch's shared result, which the
    sender resolves for all the batch's records at once."""

    __slots__ = ("_index", "_result", "timestamp_ms")

    def __init__(self, result: _BatchResult, index: int, timestamp_ms: int) -> None:
        self._result = result
        self._index = index
        self.timestamp_ms = timestamp_ms

    @property
    def topic(self) -> str:
        return self._result.topic

    @property
    def partition(self) -> int:
        return self._result.partition

    def _own(self) -> tuple[_BatchResult, int]:
        """The result this record completes with, and its index there (its batch's, or after
        a split, its piece's)."""
        result = self._result
        if result.parts is None:
            return result, self._index
        return result.part_of(self._index)

    def done(self) -> bool:
        return self._own()[0].done

    def exception(self) -> HighwaterClientError | None:
        result = self._own()[0]
        if not result.done:
            raise RuntimeError("delivery not complete yet")
        return result.error

    def result(self) -> RecordMetadata:
        """The metadata of a completed delivery; raises its error, or RuntimeError if pending."""
        error = self.exception()
        if error is not None:
            raise error
        result, index = self._own()
        offset = -1 if result.base_offset < 0 else result.base_offset + index
        timestamp = (
            result.log_append_time_ms if result.log_append_time_ms >= 0 else self.timestamp_ms
        )
        return RecordMetadata(result.topic, result.partition, offset, timestamp)

    async def wait(self) -> RecordMetadata:
        while not (own := self._own()[0]).done:
            await own.event.wait()  # also set when `own` is split: then wait for the piece
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self.wait().__await__()

    def add_done_callback(self, fn: Callable[[DeliveryFuture], None]) -> None:
        result = self._own()[0]
        if result.done:
            fn(self)
        else:
            result.callbacks.append((fn, self))


class ProducerBatch:
    """One partition's batch being filled: its records are kept in their msgpack form
    (`[timestamp delta, offset delta, key, value, headers]`), so building it is one pack."""

    __slots__ = (
        "attempts",
        "base_sequence",
        "base_timestamp",
        "capacity",
        "created_ms",
        "encoded",
        "entries",
        "estimated_bytes",
        "last_error",
        "max_timestamp",
        "maybe_appended",
        "partition",
        "record_count",
        "result",
        "retry_at_ms",
        "sent_behind",
        "sent_sequence",
        "sent_together",
        "topic",
    )

    def __init__(
        self, topic: str, partition: int, created_ms: float, capacity: int = 16_384
    ) -> None:
        self.topic = topic
        self.partition = partition
        self.created_ms = created_ms
        self.capacity = capacity  # estimated bytes at which the batch is full
        # msgpack-ready tuples (packed as arrays; tuples of scalars escape the cyclic GC)
        self.entries: list[tuple[Any, ...]] = []
        self.record_count = 0
        self.base_timestamp = -1
        self.max_timestamp = -1
        self.estimated_bytes = BATCH_HEADER_BYTES
        self.result = _BatchResult(topic, partition)
        self.attempts = 0
        self.retry_at_ms = 0.0
        self.encoded: bytes | None = None  # built once at first drain; retries resend it
        # Idempotence: assigned at first drain (inside `encoded`); lowered only when an earlier
        # batch of the partition is refused and gives its numbers back (then re-encoded).
        self.base_sequence = NO_SEQUENCE
        self.sent_sequence = NO_SEQUENCE  # base_sequence in the bytes of the latest attempt
        # The latest attempt went while an earlier batch of the partition was unacknowledged:
        # a gap the leader reports for it may be that batch's, even if it is acknowledged by
        # the time the answer is handled (answers to pipelined requests are handled in any
        # order).
        self.sent_behind = False
        # The latest attempt went in one request with other batches of the partition: a
        # refusal as too large, which is for them all, says nothing of this batch alone.
        self.sent_together = False
        self.maybe_appended = False  # an attempt ended without a clear "not appended"
        self.last_error: HighwaterClientError | None = None

    @property
    def tp(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    def add(
        self,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        size: int,
    ) -> DeliveryFuture:
        index = self.record_count
        if index == 0:
            self.base_timestamp = self.max_timestamp = timestamp_ms
        elif timestamp_ms > self.max_timestamp:
            self.max_timestamp = timestamp_ms
        self.entries.append((timestamp_ms - self.base_timestamp, index, key, value, headers))
        self.record_count = index + 1
        self.estimated_bytes += size
        return DeliveryFuture(self.result, index, timestamp_ms)

    @property
    def records(self) -> list[Record]:
        """The batch's records (for inspection; the send path never builds these)."""
        return [
            Record(value, key, self.base_timestamp + delta, tuple(headers))
            for delta, _, key, value, headers in self.entries
        ]

    def complete(self, base_offset: int, log_append_time_ms: int) -> None:
        self.result.base_offset = base_offset
        self.result.log_append_time_ms = log_append_time_ms
        self._done()

    def fail(self, error: HighwaterClientError) -> None:
        self.result.error = error
        self._done()

    def _done(self) -> None:
        if not self.result.done:
            self.entries = []  # the encoded bytes (if any) are all a retry would need
            self.result.finish()

    def split(self, max_bytes: int) -> list[ProducerBatch]:
        """This batch's records as consecutive batches of at most `max_bytes` (estimated; one
        record each at least), whose results complete this one's (KIP-126); none if it would
        stay one batch. Sequence numbers carry over: the pieces take this batch's range."""
        pieces: list[ProducerBatch] = []
        piece: ProducerBatch | None = None
        parts: list[tuple[int, _BatchResult]] = []
        for index, (delta, _, key, value, headers) in enumerate(self.entries):
            size = estimate_record_bytes(key, value, headers)
            if piece is None or piece.estimated_bytes + size > max_bytes:
                piece = ProducerBatch(self.topic, self.partition, self.created_ms, max_bytes)
                piece.attempts = self.attempts
                piece.last_error = self.last_error
                if self.base_sequence != NO_SEQUENCE:
                    piece.base_sequence = increment_sequence(self.base_sequence, index)
                pieces.append(piece)
                parts.append((index, piece.result))
            piece.add(self.base_timestamp + delta, key, value, headers, size)
        if len(pieces) < 2:
            return []  # cannot be cut smaller
        self.result.split_into(parts)
        return pieces


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment` as Kafka counts sequences: from 2**31-1 on to 0 (also backwards)."""
    return (sequence + increment) & _MAX_SEQUENCE


class PartitionSequences:
    """One partition's sequence bookkeeping (Kafka's TransactionManager.TopicPartitionEntry)."""

    __slots__ = ("acknowledged", "next_sequence", "unacked")

    def __init__(self) -> None:
        self.next_sequence = 0
        # Sequenced batches not completed yet (queued for a retry or in flight), in sequence
        # order: unacked[0] is the one the leader expects next.
        self.unacked: list[ProducerBatch] = []
        self.acknowledged = False  # the leader acknowledged a batch of ours: it knows us


class IdempotenceState:
    """The idempotent producer's bookkeeping: producer id, epoch and per-partition sequences,
    and the rules that keep a partition's batches in order (Kafka's TransactionManager without
    transactions). Pure: no IO, no clock."""

    def __init__(self) -> None:
        self.producer_id = NO_PRODUCER_ID
        self.producer_epoch = NO_PRODUCER_EPOCH
        self.partitions: dict[TopicPartition, PartitionSequences] = {}

    def sendable(self, batch: ProducerBatch) -> bool:
        """Whether a partition's head batch may be drained now (Kafka's
        shouldStopDrainBatchesForPartition, inverted)."""
        entry = self.partitions.get(batch.tp)
        if batch.base_sequence == NO_SEQUENCE:
            if entry is None:
                return True
            limit = MAX_IN_FLIGHT_BATCHES_PER_PARTITION if entry.acknowledged else 1
            return len(entry.unacked) < limit
        # Sequenced: encoded but never sent (goes as a new batch would), or being retried
        # (only the lowest unacknowledged batch goes until it succeeds: nextBatchBySequence).
        return batch.attempts == 0 or (
            entry is not None and bool(entry.unacked) and entry.unacked[0] is batch
        )

    def assign(self, batch: ProducerBatch) -> None:
        """Give a batch its partition's next sequence numbers (once: retries keep them)."""
        if batch.base_sequence != NO_SEQUENCE:
            return
        entry = self.partitions.get(batch.tp)
        if entry is None:
            entry = self.partitions[batch.tp] = PartitionSequences()
        batch.base_sequence = entry.next_sequence
        entry.next_sequence = increment_sequence(entry.next_sequence, batch.record_count)
        entry.unacked.append(batch)

    def is_next(self, batch: ProducerBatch) -> bool:
        """Whether every earlier batch of the partition is acknowledged, i.e. base_sequence is
        the last acknowledged sequence + 1 (Kafka's isNextSequence)."""
        entry = self.partitions.get(batch.tp)
        return entry is not None and bool(entry.unacked) and entry.unacked[0] is batch

    def acknowledge(self, batch: ProducerBatch) -> None:
        entry = self.partitions[batch.tp]
        entry.unacked.remove(batch)
        entry.acknowledged = True

    def release(self, batch: ProducerBatch) -> None:
        """`batch` failed and is certainly not in the log: give its sequence numbers back, so
        the partition's later batches move down and are re-encoded before they next go
        (Kafka's adjustSequencesDueToFailedBatch)."""
        entry = self.partitions.get(batch.tp)
        if entry is None or batch not in entry.unacked:
            return
        index = entry.unacked.index(batch)
        del entry.unacked[index]
        for later in entry.unacked[index:]:
            later.base_sequence = increment_sequence(later.base_sequence, -batch.record_count)
            later.encoded = None
        entry.next_sequence = increment_sequence(entry.next_sequence, -batch.record_count)

    def replace(self, batch: ProducerBatch, pieces: list[ProducerBatch]) -> None:
        """`batch` was split into `pieces` that hold its sequence numbers, in order."""
        unacked = self.partitions[batch.tp].unacked
        index = unacked.index(batch)
        unacked[index : index + 1] = pieces

    def retry_goes_before(self, batch: ProducerBatch) -> Callable[[ProducerBatch], bool]:
        """For re-enqueueing `batch` in sequence order: whether a queued batch comes after it."""
        order = self.partitions[batch.tp].unacked
        rank = order.index(batch)
        return lambda queued: queued.base_sequence == NO_SEQUENCE or order.index(queued) > rank


class RecordAccumulator:
    """Per-partition queues of batches; pure bookkeeping, time passed in (no IO, no clock)."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: float,
        delivery_timeout_ms: float,
        muting: bool,
        sendable: Callable[[ProducerBatch], bool] | None = None,
        backlog_batch_size: int | None = None,
    ) -> None:
        self.batch_size = batch_size
        # A partition with two full batches already waiting fills its next batch up to this
        # (None: never): the idempotent producer may have only 5 batches of a partition
        # unacknowledged, so when it falls behind, bigger batches keep its throughput.
        self.backlog_batch_size = backlog_batch_size
        self.linger_ms = linger_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.muting = muting  # one batch in flight per partition (max in flight 1: keeps order)
        # Idempotence: whether a partition's head batch may go now (IdempotenceState.sendable).
        self.sendable = sendable
        self.batches: dict[tuple[str, int], deque[ProducerBatch]] = {}
        self.muted: set[tuple[str, int]] = set()
        self.incomplete: set[ProducerBatch] = set()  # queued or in flight
        self.flushing = 0
        self._drain_index: dict[int, int] = {}
        # The batch being filled per partition (the tail of its queue, while open).
        self._open: dict[tuple[str, int], ProducerBatch] = {}
        # Partitions whose leader refused a batch or a request as too large (a small
        # max.message.bytes or segment.bytes): from then on their batches go one per request,
        # as Kafka's producer sends them, and stay within the size learned here (a batch
        # refused alone halves it, down from batch_size). Forgotten a while after the last
        # refusal (forget_size_limits), so a topic whose limits were raised gets full batches.
        self.one_per_request: set[TopicPartition] = set()
        self.max_batch_bytes: dict[tuple[str, int], int] = {}
        self._size_limit_at_ms: dict[tuple[str, int], float] = {}  # last refusal, per partition

    def append(
        self,
        topic: str,
        partition: int,
        record: Record,
        size: int,
        now_ms: float | Callable[[], float],
    ) -> tuple[DeliveryFuture, bool]:
        """Add a record; (its future, whether the sender should look: new or full batch).
        `now_ms` may be a clock, read only when a batch is created (the hot path skips it)."""
        timestamp = record.timestamp_ms
        if timestamp < 0:
            timestamp = time.time_ns() // 1_000_000
        return self.append_fields(
            topic, partition, timestamp, record.key, record.value, record.headers, size, now_ms
        )

    def append_fields(
        self,
        topic: str,
        partition: int,
        timestamp_ms: int,
        key: bytes | None,
        value: bytes | None,
        headers: Sequence[tuple[str, bytes | None]],
        size: int,
        now_ms: float | Callable[[], float],
    ) -> tuple[DeliveryFuture, bool]:
        """`append` without a Record object: the producer's hot path."""
        tp = (topic, partition)  # a plain tuple: this runs per record
        batch = self._open.get(tp)
        if batch is not None and batch.estimated_bytes + size <= batch.capacity:
            # The common case, ProducerBatch.add inlined (an open batch is never encoded).
            index = batch.record_count
            if timestamp_ms > batch.max_timestamp:
                batch.max_timestamp = timestamp_ms
            batch.entries.append((timestamp_ms - batch.base_timestamp, index, key, value, headers))
            batch.record_count = index + 1
            estimated = batch.estimated_bytes = batch.estimated_bytes + size
            return DeliveryFuture(batch.result, index, timestamp_ms), (estimated >= batch.capacity)
        wake = False
        if batch is None or batch.estimated_bytes + size > batch.capacity:
            queue = self.batches.get(tp)
            if queue is None:
                queue = self.batches[tp] = deque()
            capacity = self.batch_size
            if self.backlog_batch_size is not None and len(queue) >= 2:
                capacity = self.backlog_batch_size
            if self.max_batch_bytes:
                capacity = min(capacity, self.max_batch_bytes.get(tp, capacity))
            batch = ProducerBatch(
                topic, partition, now_ms() if callable(now_ms) else now_ms, capacity
            )
            queue.append(batch)
            self.incomplete.add(batch)
            self._open[tp] = batch
            wake = True
        future = batch.add(timestamp_ms, key, value, headers, size)
        if batch.estimated_bytes >= batch.capacity:
            wake = True
        return future, wake

    def _head_ready_at(self, queue: deque[ProducerBatch], now_ms: float) -> float:
        """When the partition's head batch may be sent (<= now_ms: now)."""
        head = queue[0]
        if head.attempts > 0:
            return head.retry_at_ms
        if len(queue) > 1 or head.estimated_bytes >= self.batch_size or self.flushing:
            return now_ms
        return head.created_ms + self.linger_ms

    def ready(
        self, leader_for: Callable[[str, int], int | None], now_ms: float
    ) -> tuple[set[int], float, bool]:
        """(brokers with a sendable batch, ms until the next batch may become ready,
        whether some partition with data has no known leader)."""
        nodes: set[int] = set()
        next_ms = math.inf
        unknown_leader = False
        sendable = self.sendable
        for tp, queue in self.batches.items():
            if not queue or tp in self.muted or (sendable is not None and not sendable(queue[0])):
                continue
            leader = leader_for(*tp)
            if leader is None:
                unknown_leader = True
                continue
            at = self._head_ready_at(queue, now_ms)
            if at <= now_ms:
                nodes.add(leader)
            else:
                next_ms = min(next_ms, at - now_ms)
        return nodes, next_ms, unknown_leader

    def drain(
        self,
        node: int,
        leader_for: Callable[[str, int], int | None],
        max_bytes: int,
        now_ms: float,
        encode: Callable[[ProducerBatch], bytes],
    ) -> list[ProducerBatch]:
        """Take batches for partitions led by `node`: every non-backing-off head batch (as Kafka:
        once a broker is ready, all its partitions ride along) and further full batches, up to
        max_bytes (at least one batch). Starts at a rotating partition so none starves. A batch
        is encoded (and closed) at its first drain, even if it then waits for the next request.
        With idempotence, `sendable` decides which heads may go, and a retried batch goes alone
        for its partition (a leader answers a resend in a request only when it is the
        partition's first batch there)."""
        tps = [
            tp
            for tp, queue in self.batches.items()
            if queue and tp not in self.muted and leader_for(*tp) == node
        ]
        if not tps:
            return []
        start = self._drain_index.get(node, 0) % len(tps)
        self._drain_index[node] = start + 1
        drained: list[ProducerBatch] = []
        size = 0
        sendable = self.sendable
        for tp in tps[start:] + tps[:start]:
            queue = self.batches[tp]
            while queue:
                head = queue[0]
                if head.attempts > 0 and head.retry_at_ms > now_ms:
                    break
                if sendable is not None and not sendable(head):
                    break
                if drained and drained[-1].tp == tp and self._head_ready_at(queue, now_ms) > now_ms:
                    break  # a later, still-filling batch of the same partition: let it fill
                data = head.encoded
                if data is None:
                    data = head.encoded = encode(head)
                    if self._open.get(tp) is head:
                        del self._open[tp]  # its bytes are final: new records go elsewhere
                if drained and size + len(data) > max_bytes:
                    return drained
                queue.popleft()
                drained.append(head)
                size += len(data)
                if self.muting:
                    self.muted.add(tp)
                    break
                if head.attempts > 0 or tp in self.one_per_request:
                    # A retry goes alone for its partition: with idempotence a resend is then
                    # one whole batch; and batches refused together as too large go again one
                    # by one (and, on that partition, every batch from then on).
                    break
        return drained

    def reenqueue(
        self,
        batch: ProducerBatch,
        now_ms: float,
        backoff_ms: float,
        goes_before: Callable[[ProducerBatch], bool] | None = None,
    ) -> None:
        """Put a batch back for a retry: before the first queued batch that `goes_before` says
        comes after it (idempotence: in sequence order); by default, after the retries already
        queued and before any batch not sent yet (batches refused together stay in order)."""
        batch.retry_at_ms = now_ms + backoff_ms
        queue = self.batches.setdefault(batch.tp, deque())
        if goes_before is None:
            goes_before = _never_sent
        for index, queued in enumerate(queue):
            if goes_before(queued):
                queue.insert(index, batch)
                return
        queue.append(batch)

    def learn_size_limit(
        self, tp: TopicPartition, now_ms: float, max_batch_bytes: int | None = None
    ) -> None:
        """The leader refused a batch or a request of `tp` as too large (see one_per_request)."""
        self.one_per_request.add(tp)
        if max_batch_bytes is not None:
            known = self.max_batch_bytes.get(tp, max_batch_bytes)
            self.max_batch_bytes[tp] = min(known, max_batch_bytes)
        self._size_limit_at_ms[tp] = now_ms

    def forget_size_limits(self, now_ms: float, max_age_ms: float) -> None:
        """Forget what was learned of a partition's size limits `max_age_ms` after its last
        refusal: the producer finds out again (one refusal) if they still hold."""
        if not self._size_limit_at_ms:
            return
        for tp, at_ms in list(self._size_limit_at_ms.items()):
            if now_ms - at_ms >= max_age_ms:
                del self._size_limit_at_ms[tp]
                self.one_per_request.discard(tp)
                self.max_batch_bytes.pop(tp, None)

    def expire(self, now_ms: float) -> list[ProducerBatch]:
        """Remove and return queued batches older than delivery_timeout_ms."""
        expired = []
        for queue in self.batches.values():
            while queue and now_ms - queue[0].created_ms >= self.delivery_timeout_ms:
                batch = queue.popleft()
                if self._open.get(batch.tp) is batch:
                    del self._open[batch.tp]
                expired.append(batch)
        return expired

    def abort_all(self) -> list[ProducerBatch]:
        aborted = [b for q in self.batches.values() for b in q]
        for queue in self.batches.values():
            queue.clear()
        self._open.clear()
        return aborted

    def has_queued(self) -> bool:
        return any(self.batches.values())


class Producer:
    """`async with Producer("h:p,h:p") as producer: fut = await producer.send(...)`.

    Defaults as Kafka 3.x: acks="all" and idempotence on (`enable_idempotence=None`: on unless
    acks, retries or max_in_flight_requests_per_connection conflict; True: ValueError then;
    False: off). See the module docstring for what idempotence guarantees and when it stops.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        acks: int | str = "all",
        enable_idempotence: bool | None = None,
        linger_ms: float = 5,
        batch_size: int = 16_384,
        compression: str = "none",
        retries: int = 2_147_483_647,
        retry_backoff_ms: float = 100,
        delivery_timeout_ms: float = 120_000,
        request_timeout_ms: int = 30_000,
        max_block_ms: float = 60_000,
        buffer_memory: int = 32 * 1024 * 1024,
        max_request_size: int = 1_048_576,
        max_in_flight_requests_per_connection: int = 5,
        metadata_max_age_ms: int = 300_000,
        client_id: str = "highwater-producer",
        partitioner: StickyPartitioner | None = None,
    ) -> None:
        if acks == "all":
            acks = -1
        if acks not in (-1, 0, 1):
            raise ValueError(f"acks must be 0, 1, -1 or 'all', not {acks!r}")
        if compression not in COMPRESSIONS:
            raise ValueError(f"compression must be one of {sorted(COMPRESSIONS)}")
        if batch_size <= 0 or max_in_flight_requests_per_connection <= 0 or buffer_memory <= 0:
            raise ValueError("batch_size, buffer_memory and max in flight must be positive")
        self.enable_idempotence = _idempotence_enabled(
            enable_idempotence, int(acks), retries, max_in_flight_requests_per_connection
        )
        self.acks = int(acks)
        self.compression = COMPRESSIONS[compression]
        self.retries = retries
        self.retry_backoff_ms = retry_backoff_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self.max_block_ms = max_block_ms
        self.buffer_memory = buffer_memory
        self.max_request_size = max_request_size
        self.max_in_flight = max_in_flight_requests_per_connection
        self.metadata = ClusterMetadata(
            bootstrap,
            client_id=client_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=int(retry_backoff_ms),
            metadata_max_age_ms=metadata_max_age_ms,
        )
        self._idempotence = IdempotenceState() if self.enable_idempotence else None
        self._accumulator = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=linger_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            muting=max_in_flight_requests_per_connection == 1,
            sendable=self._idempotence.sendable if self._idempotence is not None else None,
            backlog_batch_size=(
                max(batch_size, min(max_request_size, _MAX_BACKLOG_BATCH_BYTES))
                if self._idempotence is not None
                else None
            ),
        )
        self._partitioner = partitioner or StickyPartitioner(batch_size)
        # send's fast path reads a plain StickyPartitioner's state (not a subclass's)
        self._plain_sticky = type(self._partitioner) is StickyPartitioner
        self._sticky = self._partitioner._sticky
        self._sticky_bytes = self._partitioner._batch_size
        self._initializing = False  # an InitProducerId task is running
        self._fatal_error: ProducerFatalError | None = None  # set: the producer has stopped

        self._buffer_used = 0
        self._memory_freed = trio.Event()
        self._wakeup = trio.Event()
        self._yield_due = False  # send_nowait opened or filled a batch: send yields once
        self._available: dict[str, Callable[[], tuple[int, ...]]] = {}
        self._topic_partitions = self.metadata.partitions_by_topic
        self._open_batches = self._accumulator._open
        self._batch_size = batch_size
        self._max_record_bytes = min(max_request_size - BATCH_HEADER_BYTES, buffer_memory)
        self._accepting = False  # between __aenter__ and close: send may queue records
        self._in_flight: dict[int, int] = {}
        self._refreshing = False
        self._nursery: trio.Nursery | None = None
        self._exit_stack: contextlib.AsyncExitStack | None = None
        self._closing = False
        self._closed = False
        self._sender_done = trio.Event()
        self._background_scope = trio.CancelScope()

    @property
    def producer_id(self) -> int:
        """The id from InitProducerId (-1 before it, or without idempotence)."""
        return NO_PRODUCER_ID if self._idempotence is None else self._idempotence.producer_id

    @property
    def producer_epoch(self) -> int:
        return NO_PRODUCER_EPOCH if self._idempotence is None else self._idempotence.producer_epoch

    # ----- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        if self._exit_stack is not None:
            raise RuntimeError("a Producer can be entered once")
        stack = contextlib.AsyncExitStack()
        outer = await stack.enter_async_context(trio.open_nursery())
        self._exit_stack = stack
        await outer.start(self._run_background)
        return self

    async def _run_background(self, task_status: trio.TaskStatus[None]) -> None:
        """The sender and its request tasks, under a cancel scope of their own: closing
        cancels them, never the body of the caller's `async with`."""
        with self._background_scope:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._accepting = not self._closing
                task_status.started()
                await self._run_sender()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._exit_stack is not None
        stack = self._exit_stack
        try:
            await self.aclose(timeout_ms=None if exc is None else 0)
        except BaseException as close_error:
            # Closing was interrupted: typically a Cancelled, maybe of our own nursery (which
            # must absorb it) or of the caller's scope. The exit stack has to see *that*
            # exception, not the body's None, or a Cancelled escapes a block that succeeded.
            if exc is not None:
                return await stack.__aexit__(exc_type, exc, tb)
            if await stack.__aexit__(type(close_error), close_error, close_error.__traceback__):
                return None
            raise
        return await stack.__aexit__(exc_type, exc, tb)

    async def aclose(self, timeout_ms: float | None = None) -> None:
        """Send what is buffered (waiting at most timeout_ms; None: until delivered or expired),
        fail what is left with ClientClosedError, stop the sender, close connections."""
        if self._closed:
            return
        self._closing = True
        self._accepting = False
        self._wake()
        try:
            if timeout_ms is None or timeout_ms > 0:
                with trio.move_on_after(math.inf if timeout_ms is None else timeout_ms / 1000):
                    await self._flush_all()
        finally:
            # Also when the wait above is cancelled from outside: nothing stays pending.
            self._closed = True
            for batch in list(self._accumulator.incomplete):
                self._finish(batch, error=ClientClosedError("producer closed before delivery"))
            self._wake()
            self._background_scope.cancel()
            await self.metadata.aclose()  # drops the connections before its checkpoint

    # ----- sending ---------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
        *,
        callback: Callable[[DeliveryFuture], None] | None = None,
    ) -> DeliveryFuture:
        """Queue one record; the returned future completes when the broker acknowledges it.
        `callback` (as Kafka's send(record, callback)): fut.add_done_callback(callback).

        Waits (at most max_block_ms) only for the topic's metadata and for buffer memory.
        When the record opens or fills a batch, send also yields to the scheduler once (not a
        cancellation point): the sender then ships full batches while the caller keeps
        producing, as Kafka's sender thread would.
        """
        if type(headers) is not tuple:
            headers = tuple(headers)
        try:
            future = self.send_nowait(
                topic, value, key, partition, headers, timestamp_ms, callback=callback
            )
        except trio.WouldBlock:
            future = await self._send_waiting(
                topic, value, key, partition, headers, timestamp_ms, callback
            )
        if self._yield_due:
            self._yield_due = False
            await trio.lowlevel.cancel_shielded_checkpoint()
        return future

    def send_nowait(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
        *,
        callback: Callable[[DeliveryFuture], None] | None = None,
    ) -> DeliveryFuture:
        """`send` without waiting or yielding, for tight loops: raises trio.WouldBlock (the
        record is not queued) when it would have to wait for the topic's metadata or for
        buffer memory; `await send(...)` then waits.

        The caller must yield to trio now and then (any checkpoint, e.g. once per batch's
        worth of records) so the sender can run; `await send(...)` does that by itself.
        """
        if not self._accepting:
            raise self._not_accepting_error()
        partitions = self._topic_partitions.get(topic)
        if not partitions:
            raise trio.WouldBlock
        num_partitions = len(partitions)
        if partition is not None and not 0 <= partition < num_partitions:
            raise HighwaterClientError(
                f"UNKNOWN_TOPIC_OR_PARTITION: partition {partition} of {topic!r} "
                f"(it has {num_partitions})",
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            )
        size = _RECORD_OVERHEAD_BYTES + (len(key) if key else 0) + (len(value) if value else 0)
        if headers:
            if type(headers) is not tuple:
                headers = tuple(headers)
            for name, header_value in headers:
                size += 4 + len(name) + len(header_value or b"")
        else:
            headers = ()
        if size > self._max_record_bytes:
            raise HighwaterClientError(
                f"MESSAGE_TOO_LARGE: a record of about {size} bytes is larger than "
                f"max_request_size {self.max_request_size} or buffer_memory",
                ErrorCode.MESSAGE_TOO_LARGE,
            )
        buffer_used = self._buffer_used + size
        if buffer_used > self.buffer_memory:
            raise trio.WouldBlock
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, num_partitions)
            elif (
                self._plain_sticky
                and (sticky := self._sticky.get(topic)) is not None
                and sticky.produced_bytes < self._sticky_bytes
                and sticky.partition < num_partitions
            ):
                # StickyPartitioner.partition + record_appended, inlined for the common case
                partition = sticky.partition
                sticky.produced_bytes += size
            else:
                partition = self._choose_sticky(topic, num_partitions, size)
        if timestamp_ms is None:
            timestamp_ms = _time_ns() // 1_000_000
        # RecordAccumulator.append_fields, inlined for the common case: room in the open batch.
        batch = self._open_batches.get((topic, partition))
        if batch is not None and batch.estimated_bytes + size <= batch.capacity:
            index = batch.record_count
            if timestamp_ms > batch.max_timestamp:
                batch.max_timestamp = timestamp_ms
            batch.entries.append((timestamp_ms - batch.base_timestamp, index, key, value, headers))
            batch.record_count = index + 1
            estimated = batch.estimated_bytes = batch.estimated_bytes + size
            future = DeliveryFuture(batch.result, index, timestamp_ms)
            wake = estimated >= batch.capacity
        else:
            future, wake = self._accumulator.append_fields(
                topic, partition, timestamp_ms, key, value, headers, size, _now_ms
            )
        self._buffer_used = buffer_used
        if callback is not None:
            future._result.callbacks.append((callback, future))  # not done: just queued
        if wake:
            self._wakeup.set()
            self._yield_due = True
        return future

    def _not_accepting_error(self) -> HighwaterClientError:
        fatal = self._fatal_error
        if fatal is None:
            return ClientClosedError("producer is closed or not started (use `async with`)")
        return type(fatal)(
            f"{fatal.name}: the producer stopped after a fatal error and takes no more "
            f"records; create a new Producer (the error: {fatal})",
            fatal.code,
        )

    def _choose_sticky(self, topic: str, num_partitions: int, size: int) -> int:
        partitioner = self._partitioner
        available = self._available.get(topic)
        if available is None:
            available = self._available[topic] = functools.partial(
                self.metadata.available_partitions, topic
            )
        partition = partitioner.partition(topic, num_partitions, available)
        partitioner.record_appended(topic, partition, size)
        return partition

    async def _send_waiting(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None,
        partition: int | None,
        headers: tuple[tuple[str, bytes | None], ...],
        timestamp_ms: int | None,
        callback: Callable[[DeliveryFuture], None] | None,
    ) -> DeliveryFuture:
        """send's slow path: wait (each at most max_block_ms) for metadata, then memory."""
        while True:
            if not self._accepting:
                raise self._not_accepting_error()
            if not self.metadata.partition_count(topic):
                await self.metadata.wait_for_topic(topic, self.max_block_ms)
            size = estimate_record_bytes(key, value, headers)
            if size <= self.buffer_memory and self._buffer_used + size > self.buffer_memory:
                await self._wait_for_memory(size)
            try:
                return self.send_nowait(
                    topic, value, key, partition, headers, timestamp_ms, callback=callback
                )
            except trio.WouldBlock:
                continue  # the topic vanished from the metadata meanwhile: wait again

    async def flush(self, timeout_ms: float | None = None) -> None:
        """Make every queued record sendable now and wait until all are delivered or failed.
        HighwaterTimeoutError if timeout_ms passes first (records stay queued)."""
        if timeout_ms is None:
            await self._flush_all()
            return
        with trio.move_on_after(timeout_ms / 1000) as scope:
            await self._flush_all()
        if scope.cancelled_caught:
            raise HighwaterTimeoutError(f"flush did not complete in {timeout_ms:.0f} ms")

    async def partitions_for(self, topic: str) -> tuple[int, ...]:
        return await self.metadata.wait_for_topic(topic, self.max_block_ms)

    async def _flush_all(self) -> None:
        accumulator = self._accumulator
        accumulator.flushing += 1
        self._wake()
        try:
            for batch in list(accumulator.incomplete):
                while not batch.result.done:  # its event is also set when it is split
                    await batch.result.event.wait()
        finally:
            accumulator.flushing -= 1

    async def _wait_for_memory(self, size: int) -> None:
        deadline = trio.current_time() + self.max_block_ms / 1000
        while self._buffer_used + size > self.buffer_memory:
            if self._closing:
                raise ClientClosedError("producer closed while waiting for buffer memory")
            self._wake()
            with trio.move_on_at(deadline):
                await self._memory_freed.wait()
            if trio.current_time() >= deadline and self._buffer_used + size > self.buffer_memory:
                raise HighwaterTimeoutError(
                    f"no buffer memory for {size} bytes within max_block_ms {self.max_block_ms}"
                )

    # ----- the sender ------------------------------------------------------------------------

    def _wake(self) -> None:
        self._wakeup.set()

    def _encode(self, batch: ProducerBatch) -> bytes:
        idempotence = self._idempotence
        if idempotence is None:
            producer_id, producer_epoch = NO_PRODUCER_ID, NO_PRODUCER_EPOCH
        else:
            idempotence.assign(batch)
            producer_id, producer_epoch = idempotence.producer_id, idempotence.producer_epoch
        return build_batch_from_entries(
            batch.entries,
            base_timestamp=batch.base_timestamp,
            max_timestamp=batch.max_timestamp,
            compression=self.compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=batch.base_sequence,
        )

    async def _run_sender(self) -> None:
        accumulator = self._accumulator
        metadata = self.metadata
        assert self._nursery is not None
        try:
            while True:
                self._wakeup = trio.Event()
                now = _now_ms()
                for batch in accumulator.expire(now):
                    self._fail(batch, self._expiry_error(batch, now))
                accumulator.forget_size_limits(now, metadata.metadata_max_age_ms)
                nodes, next_ms, unknown_leader = accumulator.ready(metadata.leader_for, now)
                if unknown_leader:
                    metadata.request_update()
                if (
                    metadata.refresh_due(now)
                    and not self._refreshing
                    and (accumulator.has_queued() or metadata.update_requested)
                ):
                    self._refreshing = True
                    self._nursery.start_soon(self._refresh_metadata)
                if self._needs_producer_id():
                    nodes = set()  # nothing goes before the producer id is known
                drained = False
                for node in nodes:
                    if self._in_flight.get(node, 0) >= self.max_in_flight:
                        continue
                    batches = accumulator.drain(
                        node, metadata.leader_for, self.max_request_size, now, self._encode
                    )
                    if batches:
                        drained = True
                        request = self._produce_request(batches)
                        self._in_flight[node] = self._in_flight.get(node, 0) + 1
                        self._nursery.start_soon(self._send_produce, node, batches, request)
                if self._closed:
                    return
                if drained and self._idempotence is not None:
                    # A retry goes alone and max_request_size may cut a drain short: look
                    # again before waiting.
                    await trio.lowlevel.checkpoint()
                    continue
                if accumulator.has_queued():
                    oldest = min(b[0].created_ms for b in accumulator.batches.values() if b)
                    next_ms = min(next_ms, oldest + self.delivery_timeout_ms - now)
                if unknown_leader:
                    next_ms = min(next_ms, self.retry_backoff_ms)
                with trio.move_on_after(max(next_ms, 1) / 1000):
                    await self._wakeup.wait()
        finally:
            self._sender_done.set()

    def _needs_producer_id(self) -> bool:
        """Idempotence without a producer id yet: start InitProducerId if records wait."""
        idempotence = self._idempotence
        if idempotence is None or idempotence.producer_id != NO_PRODUCER_ID:
            return False
        if not self._initializing and self._fatal_error is None and self._accumulator.has_queued():
            assert self._nursery is not None
            self._initializing = True
            self._nursery.start_soon(self._init_producer_id)
        return True

    async def _init_producer_id(self) -> None:
        """InitProducerId from any broker (Kafka's Sender.maybeWaitForProducerId): retriable
        errors retried every retry_backoff_ms for at most max_block_ms; then the records queued
        fail with a timeout (a later send tries again). Other errors stop the producer."""
        assert self._idempotence is not None
        deadline = trio.current_time() + self.max_block_ms / 1000
        last_error = "no answer"
        try:
            while trio.current_time() < deadline:
                with trio.move_on_at(deadline):
                    try:
                        response = await self._request_producer_id()
                    except (BrokerConnectionError, NoBrokersAvailable) as exc:
                        last_error = str(exc)
                    else:
                        code = response.error_code
                        if code == ErrorCode.NONE:
                            self._idempotence.producer_id = response.producer_id
                            self._idempotence.producer_epoch = response.producer_epoch
                            return
                        error = error_for_code(code, "InitProducerId")
                        if not (error.retriable or code in _COORDINATOR_RETRIABLE_CODES):
                            self._stop(ProducerFatalError(str(error), error.code))
                            return
                        last_error = str(error)
                    await trio.sleep(self.retry_backoff_ms / 1000)
            timeout = HighwaterTimeoutError(
                f"no producer id (InitProducerId) within max_block_ms {self.max_block_ms:.0f}: "
                f"{last_error}"
            )
            for batch in self._accumulator.abort_all():
                self._finish(batch, error=timeout)
        finally:
            self._initializing = False
            self._wake()

    async def _request_producer_id(self) -> InitProducerIdResponse:
        conn = await self.metadata.any_connection()
        response: InitProducerIdResponse = await conn.request(
            InitProducerIdRequest(transaction_timeout_ms=_TRANSACTION_TIMEOUT_MS),
            timeout_ms=self.request_timeout_ms + _NETWORK_TIMEOUT_MARGIN_MS,
        )
        return response

    async def _refresh_metadata(self) -> None:
        try:
            await self.metadata.maybe_refresh()
        finally:
            self._refreshing = False
            self._wake()

    def _produce_request(self, batches: list[ProducerBatch]) -> ProduceRequest:
        """The request for drained batches, built at once: their bytes are final only now (a
        batch refused meanwhile may renumber the later ones)."""
        by_topic: dict[str, dict[int, list[bytes]]] = {}
        per_partition: dict[TopicPartition, int] = {}
        for batch in batches:
            per_partition[batch.tp] = per_partition.get(batch.tp, 0) + 1
        for batch in batches:
            assert batch.encoded is not None
            batch.attempts += 1
            batch.sent_sequence = batch.base_sequence
            idempotence = self._idempotence
            batch.sent_behind = idempotence is not None and not idempotence.is_next(batch)
            batch.sent_together = per_partition[batch.tp] > 1
            by_topic.setdefault(batch.topic, {}).setdefault(batch.partition, []).append(
                batch.encoded
            )
        return ProduceRequest(
            acks=self.acks,
            timeout_ms=self.request_timeout_ms,
            topic_data=tuple(
                ProduceTopicData(
                    topic,
                    tuple(ProducePartitionData(p, b"".join(data)) for p, data in parts.items()),
                )
                for topic, parts in by_topic.items()
            ),
        )

    async def _send_produce(
        self, node: int, batches: list[ProducerBatch], request: ProduceRequest
    ) -> None:
        try:
            try:
                response = await self.metadata.request(
                    node,
                    request,
                    timeout_ms=self.request_timeout_ms + _NETWORK_TIMEOUT_MARGIN_MS,
                    expect_response=self.acks != 0,
                )
            except BrokerConnectionError as exc:
                self.metadata.request_update()
                code = (
                    ErrorCode.REQUEST_TIMED_OUT
                    if "timed out" in str(exc)
                    else ErrorCode.NETWORK_EXCEPTION
                )
                for batch in batches:
                    self._retry_or_fail(batch, code, f"broker {node}: {exc}")
                return
            if self.acks == 0:
                for batch in batches:
                    self._finish(batch, base_offset=-1)
                return
            self._handle_response(node, batches, response)
        finally:
            self._in_flight[node] -= 1
            for batch in batches:
                self._accumulator.muted.discard(batch.tp)
            self._wake()

    def _handle_response(
        self, node: int, batches: list[ProducerBatch], response: ProduceResponse
    ) -> None:
        answers = {(t.name, p.index): p for t in response.responses for p in t.partition_responses}
        next_offset: dict[TopicPartition, int] = {}
        for batch in batches:
            answer = answers.get(batch.tp)
            if answer is None:
                self._retry_or_fail(
                    batch,
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"broker {node} did not answer {batch.tp}",
                )
                continue
            code = answer.error_code
            if code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER and self._idempotence is not None:
                code = ErrorCode.NONE  # as Kafka: already in the log, its offset forgotten
            if code != ErrorCode.NONE:
                self._retry_or_fail(
                    batch, code, f"{batch.topic}-{batch.partition}", answer.error_message
                )
                continue
            # Several batches of one partition were appended back to back.
            base = next_offset.get(batch.tp, answer.base_offset)
            next_offset[batch.tp] = base + batch.record_count
            self._acknowledged(batch, base, answer.log_append_time_ms)

    def _acknowledged(
        self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int
    ) -> None:
        idempotence = self._idempotence
        if idempotence is None or batch not in self._accumulator.incomplete:
            self._finish(batch, base_offset=base_offset, log_append_time_ms=log_append_time_ms)
            return
        idempotence.acknowledge(batch)
        self._finish(batch, base_offset=base_offset, log_append_time_ms=log_append_time_ms)
        if batch.sent_sequence != batch.base_sequence:
            # Appended under the numbers it had when sent, which an earlier refused batch then
            # gave back: the leader's sequence and ours now differ for this partition.
            self._stop(
                OutOfOrderSequenceError(
                    f"OUT_OF_ORDER_SEQUENCE_NUMBER: {batch.topic}-{batch.partition}: a batch "
                    f"was appended with sequence {batch.sent_sequence} after an earlier batch "
                    f"was refused; the leader's sequence no longer matches the producer's"
                )
            )

    def _retry_or_fail(
        self, batch: ProducerBatch, code: int, context: str, broker_message: str | None = None
    ) -> None:
        if batch not in self._accumulator.incomplete:
            return  # failed meanwhile: the producer stopped
        error = error_for_code(code, context, broker_message)
        batch.last_error = error
        now = _now_ms()
        if code in METADATA_ERRORS:
            self.metadata.request_update()
        if code in _MAYBE_APPENDED or code not in ErrorCode._value2member_map_:
            batch.maybe_appended = True
        retriable = error.retriable
        if code in _TOO_LARGE:
            self._accumulator.learn_size_limit(batch.tp, now)
            # With other batches of its partition, the refusal may be for another one, or
            # for all together (more than a segment): alone, this batch may go.
            retriable = retriable or batch.sent_together
        idempotence = self._idempotence
        if idempotence is not None and isinstance(error, ProducerFatalError):
            # A gap before the batch the leader expects next is fatal; before a later one,
            # it only means an earlier batch failed first: retry in order.
            retriable = code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and (
                not idempotence.is_next(batch)
                or batch.sent_behind
                or batch.sent_sequence != batch.base_sequence
            )
            if not retriable:
                self._stop(error, batch)
                return
        if (
            retriable
            and batch.attempts <= self.retries
            and not self._closed
            and now - batch.created_ms < self.delivery_timeout_ms
        ):
            goes_before = None if idempotence is None else idempotence.retry_goes_before(batch)
            self._accumulator.reenqueue(batch, now, self.retry_backoff_ms, goes_before)
            return
        if retriable and now - batch.created_ms >= self.delivery_timeout_ms:
            error = self._expiry_error(batch, now)
        elif (
            code in _TOO_LARGE
            and not batch.maybe_appended
            and not self._closed
            and self._split(batch, now)
        ):
            return
        self._fail(batch, error)

    def _split(self, batch: ProducerBatch, now: float) -> bool:
        """KIP-126: a batch refused alone as too large (MESSAGE_TOO_LARGE; RECORD_LIST_TOO_LARGE,
        so larger than a segment) goes again as smaller batches, in its place in the
        partition's order: of at most batch_size (Kafka's split), and at most half its own
        size, so that a record that fits alone always gets through; the partition's later
        batches keep within that size. False for a single record: it fails, as in Kafka."""
        accumulator = self._accumulator
        limit = min(self._batch_size, batch.estimated_bytes // 2)
        pieces = batch.split(limit)
        if not pieces:
            return False
        accumulator.learn_size_limit(batch.tp, now, limit)
        accumulator.incomplete.discard(batch)
        accumulator.incomplete.update(pieces)
        idempotence = self._idempotence
        if idempotence is not None:
            idempotence.replace(batch, pieces)
        for piece in pieces:
            goes_before = None if idempotence is None else idempotence.retry_goes_before(piece)
            accumulator.reenqueue(piece, now, 0, goes_before)
        return True

    def _fail(self, batch: ProducerBatch, error: HighwaterClientError) -> None:
        """Fail one batch. With idempotence, a batch that may be in the log leaves its
        partition's sequence unresolved: the producer stops; one certainly not in the log gives
        its sequence numbers back."""
        idempotence = self._idempotence
        if idempotence is None or batch.base_sequence == NO_SEQUENCE:
            self._finish(batch, error=error)
        elif batch.maybe_appended and not self._closed:
            self._stop(
                ProducerFatalError(
                    f"the outcome of a batch of {batch.topic}-{batch.partition} is unknown "
                    f"(sequence {batch.base_sequence}; {error}): later batches cannot be "
                    f"numbered safely"
                ),
                batch,
                error,
            )
        else:
            idempotence.release(batch)
            self._finish(batch, error=error)

    def _stop(
        self,
        fatal: ProducerFatalError,
        batch: ProducerBatch | None = None,
        batch_error: HighwaterClientError | None = None,
    ) -> None:
        """The idempotent producer's fatal state: `batch` fails (with `batch_error`, default
        `fatal`), every other pending record with `fatal`, and later sends raise it."""
        if self._fatal_error is not None:
            return
        self._fatal_error = fatal
        self._accepting = False
        if batch is not None:
            self._finish(batch, error=batch_error or fatal)
        others = type(fatal)(
            f"{fatal.name}: not delivered (if it was already sent: outcome unknown), the "
            f"producer stopped: {fatal}",
            fatal.code,
        )
        self._accumulator.abort_all()
        for pending in list(self._accumulator.incomplete):
            self._finish(pending, error=others)
        self._wake()

    def _expiry_error(self, batch: ProducerBatch, now: float) -> HighwaterTimeoutError:
        last = f"; last error {batch.last_error}" if batch.last_error else ""
        return HighwaterTimeoutError(
            f"expiring {batch.record_count} record(s) for {batch.topic}-{batch.partition}: "
            f"{now - batch.created_ms:.0f} ms has passed since batch creation{last}"
        )

    def _finish(
        self,
        batch: ProducerBatch,
        *,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        error: HighwaterClientError | None = None,
    ) -> None:
        if batch not in self._accumulator.incomplete:
            return
        self._accumulator.incomplete.discard(batch)
        self._buffer_used -= batch.estimated_bytes - BATCH_HEADER_BYTES
        self._memory_freed.set()
        self._memory_freed = trio.Event()
        if error is not None:
            batch.fail(error)
        else:
            batch.complete(base_offset, log_append_time_ms)


def _never_sent(batch: ProducerBatch) -> bool:
    return batch.attempts == 0


def _idempotence_enabled(
    enable_idempotence: bool | None, acks: int, retries: int, max_in_flight: int
) -> bool:
    """Kafka 3.x: idempotence is on unless asked off; when not asked for explicitly, settings
    it cannot work with turn it off silently; asked for explicitly, they are an error."""
    if enable_idempotence is False:
        return False
    conflicts = []
    if acks != -1:
        conflicts.append(f"acks={acks} (idempotence needs acks='all')")
    if retries <= 0:
        conflicts.append(f"retries={retries} (idempotence needs retries > 0)")
    if max_in_flight > MAX_IN_FLIGHT_BATCHES_PER_PARTITION:
        conflicts.append(
            f"max_in_flight_requests_per_connection={max_in_flight} (idempotence needs at most "
            f"{MAX_IN_FLIGHT_BATCHES_PER_PARTITION})"
        )
    if conflicts and enable_idempotence:
        raise ValueError("enable_idempotence=True conflicts with " + "; ".join(conflicts))
    return not conflicts


def _now_ms() -> float:
    return trio.current_time() * 1000


_time_ns = time.time_ns
