"""A partition's batch being filled (Kafka's ProducerBatch) and the futures of its records.

Records are kept in their msgpack form, so encoding a batch is one pack. A record's
DeliveryFuture is a 3-slot view of its batch's shared result (Kafka's ProduceRequestResult),
resolved for all the batch's records at once. A batch a leader refuses as too large is split
into smaller ones that keep its sequence numbers (KIP-126).
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import trio

from client.errors import HighwaterClientError
from client.settings import default_int
from protocol.compression import Compression
from protocol.records import BATCH_HEADER_BYTES, NO_SEQUENCE, Record, build_batch_from_entries
from protocol.topic_partition import TopicPartition

__all__ = [
    "RECORD_OVERHEAD_BYTES",
    "BatchResult",
    "DeliveryFuture",
    "DoneCallback",
    "ProducerBatch",
    "RecordMetadata",
    "estimate_record_bytes",
    "increment_sequence",
]

_BATCH_SIZE: Final = default_int("producer", "batch.size")

RECORD_OVERHEAD_BYTES: Final = 16  # msgpack array, deltas and bin headers of one record
_MAX_SEQUENCE: Final = 0x7FFFFFFF  # sequences wrap from 2**31-1 to 0

DoneCallback = Callable[["DeliveryFuture"], None]


def estimate_record_bytes(
    key: bytes | None, value: bytes | None, headers: Sequence[tuple[str, bytes | None]]
) -> int:
    """Uncompressed size of a record in a batch (close to msgpack's; used for batch_size)."""
    size = RECORD_OVERHEAD_BYTES + len(key or b"") + len(value or b"")
    for name, header_value in headers:
        size += 4 + len(name) + len(header_value or b"")
    return size


def increment_sequence(sequence: int, increment: int) -> int:
    """`sequence + increment` as Kafka counts sequences: from 2**31-1 on to 0 (also backwards)."""
    return (sequence + increment) & _MAX_SEQUENCE


@dataclass(frozen=True, slots=True)
class RecordMetadata:
    topic: str
    partition: int
    offset: int  # -1 with acks=0 (the broker does not answer)
    timestamp: int  # the record's create time, or the broker's log append time


class BatchResult:
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
        self.callbacks: list[tuple[DoneCallback, DeliveryFuture]] = []
        # Set when the batch was split (KIP-126): (index of its first record here, the result
        # of the smaller batch holding it), in order. Each record completes with its piece, as
        # in Kafka; this result is done when all the pieces are.
        self.parts: list[tuple[int, BatchResult]] | None = None
        self.whole: BatchResult | None = None  # the result this one is a piece of

    def part_of(self, index: int) -> tuple[BatchResult, int]:
        """The result that holds record `index` of this batch, and the record's index there
        (through splits of splits)."""
        result = self
        while result.parts is not None:
            first, part = next((f, r) for f, r in reversed(result.parts) if f <= index)
            result, index = part, index - first
        return result, index

    def split_into(self, parts: list[tuple[int, BatchResult]]) -> None:
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

    def __init__(self, result: BatchResult, index: int, timestamp_ms: int) -> None:
        self._result = result
        self._index = index
        self.timestamp_ms = timestamp_ms

    @property
    def topic(self) -> str:
        return self._result.topic

    @property
    def partition(self) -> int:
        return self._result.partition

    def _own(self) -> tuple[BatchResult, int]:
        """The result this record completes with, and its index there (its batch's, or after
        a split, its piece's)."""
        result = self._result
        if result.parts is None:
            return result, self._index
        return result.part_of(self._index)

    def done(self) -> bool:
        return self._own()[0].done

    def exception(self) -> HighwaterClientError | None:
        # _own inlined: a callback asks this of every record (Kafka's Callback gets it so)
        result = self._result
        if result.parts is not None:
            result = result.part_of(self._index)[0]
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

    def add_done_callback(self, fn: DoneCallback) -> None:
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
        "in_flight_to",
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
        self, topic: str, partition: int, created_ms: float, capacity: int = _BATCH_SIZE
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
        self.result = BatchResult(topic, partition)
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
        self.in_flight_to: int | None = None  # the broker of the attempt awaiting its answer
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
        callback: DoneCallback | None = None,
    ) -> DeliveryFuture:
        """Append a record of estimated `size` bytes; `callback` runs when it completes.
        (Producer.send_nowait inlines this for a batch already holding records:
        tests/unit/client/test_producer_append_paths.py pins the two together.)"""
        index = self.record_count
        if index == 0:
            self.base_timestamp = self.max_timestamp = timestamp_ms
        elif timestamp_ms > self.max_timestamp:
            self.max_timestamp = timestamp_ms
        self.entries.append((timestamp_ms - self.base_timestamp, index, key, value, headers))
        self.record_count = index + 1
        self.estimated_bytes += size
        future = DeliveryFuture(self.result, index, timestamp_ms)
        if callback is not None:
            self.result.callbacks.append((callback, future))
        return future

    @property
    def records(self) -> list[Record]:
        """The batch's records (for inspection; the send path never builds these)."""
        return [
            Record(value, key, self.base_timestamp + delta, tuple(headers))
            for delta, _, key, value, headers in self.entries
        ]

    def encode(self, compression: Compression, producer_id: int, producer_epoch: int) -> bytes:
        """The batch's bytes as produced, with its base_sequence (NO_SEQUENCE: none)."""
        return build_batch_from_entries(
            self.entries,
            base_timestamp=self.base_timestamp,
            max_timestamp=self.max_timestamp,
            compression=compression,
            producer_id=producer_id,
            producer_epoch=producer_epoch,
            base_sequence=self.base_sequence,
        )

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

    async def wait(self) -> None:
        """Until every record of the batch is done (after a split, every piece)."""
        result = self.result
        while not result.done:
            await result.event.wait()  # also set when the batch is split

    def split(self, max_bytes: int) -> list[ProducerBatch]:
        """This batch's records as consecutive batches of at most `max_bytes` (estimated; one
        record each at least), whose results complete this one's (KIP-126); none if it would
        stay one batch. Sequence numbers carry over: the pieces take this batch's range."""
        pieces: list[ProducerBatch] = []
        piece: ProducerBatch | None = None
        parts: list[tuple[int, BatchResult]] = []
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
