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
broker. Retriable errors (and connection errors/timeouts) put the batch back at the head of its
partition after retry_backoff_ms and ask for a metadata refresh, until `retries` or
delivery_timeout_ms run out; anything else fails the batch's futures with the Kafka error name.

Ordering: with more than one request in flight a retried batch can land after a later one, as in
Kafka without idempotence; max_in_flight_requests_per_connection=1 keeps order (the partition is
muted while its batch is in flight). Idempotence comes later: `ProducerBatch.base_sequence`
and `Producer._producer_id/_producer_epoch` are where it plugs in; encoded bytes are kept across
retries so a retry resends the identical batch.
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
    error_for_code,
)
from client.metadata import ClusterMetadata
from client.network import BrokerConnectionError
from client.partitioner import StickyPartitioner, partition_for_key
from protocol.compression import Compression
from protocol.errors import ErrorCode
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

__all__ = [
    "DeliveryFuture",
    "Producer",
    "ProducerBatch",
    "RecordAccumulator",
    "RecordMetadata",
    "estimate_record_bytes",
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
_RECORD_OVERHEAD_BYTES: Final = 16  # msgpack array, deltas and bin headers of one record
_NETWORK_TIMEOUT_MARGIN_MS: Final = 1_000  # the broker answers its own timeout first

TopicPartition = tuple[str, int]


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
        "topic",
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

    def done(self) -> bool:
        return self._result.done

    def exception(self) -> HighwaterClientError | None:
        result = self._result
        if not result.done:
            raise RuntimeError("delivery not complete yet")
        return result.error

    def result(self) -> RecordMetadata:
        """The metadata of a completed delivery; raises its error, or RuntimeError if pending."""
        error = self.exception()
        if error is not None:
            raise error
        result = self._result
        offset = -1 if result.base_offset < 0 else result.base_offset + self._index
        timestamp = (
            result.log_append_time_ms if result.log_append_time_ms >= 0 else self.timestamp_ms
        )
        return RecordMetadata(result.topic, result.partition, offset, timestamp)

    async def wait(self) -> RecordMetadata:
        await self._result.event.wait()
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self.wait().__await__()

    def add_done_callback(self, fn: Callable[[DeliveryFuture], None]) -> None:
        result = self._result
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
        "created_ms",
        "encoded",
        "entries",
        "estimated_bytes",
        "last_error",
        "max_timestamp",
        "partition",
        "record_count",
        "result",
        "retry_at_ms",
        "topic",
    )

    def __init__(self, topic: str, partition: int, created_ms: float) -> None:
        self.topic = topic
        self.partition = partition
        self.created_ms = created_ms
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
        self.base_sequence = NO_SEQUENCE  # the idempotent producer sets this (later issue)
        self.last_error: HighwaterClientError | None = None

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

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
        result = self.result
        if result.done:
            return
        result.done = True
        result.event.set()
        self.entries = []  # the encoded bytes (if any) are all a retry would need
        callbacks, result.callbacks = result.callbacks, []
        for fn, future in callbacks:
            fn(future)


class RecordAccumulator:
    """Per-partition queues of batches; pure bookkeeping, time passed in (no IO, no clock)."""

    def __init__(
        self, *, batch_size: int, linger_ms: float, delivery_timeout_ms: float, muting: bool
    ) -> None:
        self.batch_size = batch_size
        self.linger_ms = linger_ms
        self.delivery_timeout_ms = delivery_timeout_ms
        self.muting = muting  # one batch in flight per partition (max in flight 1: keeps order)
        self.batches: dict[TopicPartition, deque[ProducerBatch]] = {}
        self.muted: set[TopicPartition] = set()
        self.incomplete: set[ProducerBatch] = set()  # queued or in flight
        self.flushing = 0
        self._drain_index: dict[int, int] = {}
        # The batch being filled per partition (the tail of its queue, while open).
        self._open: dict[TopicPartition, ProducerBatch] = {}

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
        tp = (topic, partition)
        batch = self._open.get(tp)
        if batch is not None and batch.estimated_bytes + size <= self.batch_size:
            # The common case, ProducerBatch.add inlined (an open batch is never encoded).
            index = batch.record_count
            if timestamp_ms > batch.max_timestamp:
                batch.max_timestamp = timestamp_ms
            batch.entries.append((timestamp_ms - batch.base_timestamp, index, key, value, headers))
            batch.record_count = index + 1
            estimated = batch.estimated_bytes = batch.estimated_bytes + size
            return DeliveryFuture(batch.result, index, timestamp_ms), (estimated >= self.batch_size)
        wake = False
        if batch is None or batch.estimated_bytes + size > self.batch_size:
            batch = ProducerBatch(topic, partition, now_ms() if callable(now_ms) else now_ms)
            queue = self.batches.get(tp)
            if queue is None:
                queue = self.batches[tp] = deque()
            queue.append(batch)
            self.incomplete.add(batch)
            self._open[tp] = batch
            wake = True
        future = batch.add(timestamp_ms, key, value, headers, size)
        if batch.estimated_bytes >= self.batch_size:
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
        for tp, queue in self.batches.items():
            if not queue or tp in self.muted:
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
        max_bytes (at least one batch). Starts at a rotating partition so none starves."""
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
        for tp in tps[start:] + tps[:start]:
            queue = self.batches[tp]
            while queue:
                head = queue[0]
                if head.attempts > 0 and head.retry_at_ms > now_ms:
                    break
                if drained and drained[-1].tp == tp and self._head_ready_at(queue, now_ms) > now_ms:
                    break  # a later, still-filling batch of the same partition: let it fill
                data = head.encoded if head.encoded is not None else encode(head)
                if drained and size + len(data) > max_bytes:
                    return drained
                head.encoded = data
                if self._open.get(tp) is head:
                    del self._open[tp]
                queue.popleft()
                drained.append(head)
                size += len(data)
                if self.muting:
                    self.muted.add(tp)
                    break
        return drained

    def reenqueue(self, batch: ProducerBatch, now_ms: float, backoff_ms: float) -> None:
        batch.retry_at_ms = now_ms + backoff_ms
        self.batches.setdefault(batch.tp, deque()).appendleft(batch)

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
    """`async with Producer("h:p,h:p", acks=1) as producer: fut = await producer.send(...)`."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        acks: int | str = 1,
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
        self._accumulator = RecordAccumulator(
            batch_size=batch_size,
            linger_ms=linger_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            muting=max_in_flight_requests_per_connection == 1,
        )
        self._partitioner = partitioner or StickyPartitioner(batch_size)
        # send's fast path reads a plain StickyPartitioner's state (not a subclass's)
        self._plain_sticky = type(self._partitioner) is StickyPartitioner
        self._sticky = self._partitioner._sticky
        self._sticky_bytes = self._partitioner._batch_size
        # The idempotent producer (later issue) sets these from InitProducerId.
        self._producer_id = NO_PRODUCER_ID
        self._producer_epoch = NO_PRODUCER_EPOCH

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
            raise ClientClosedError("producer is closed or not started (use `async with`)")
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
        if batch is not None and batch.estimated_bytes + size <= self._batch_size:
            index = batch.record_count
            if timestamp_ms > batch.max_timestamp:
                batch.max_timestamp = timestamp_ms
            batch.entries.append((timestamp_ms - batch.base_timestamp, index, key, value, headers))
            batch.record_count = index + 1
            estimated = batch.estimated_bytes = batch.estimated_bytes + size
            future = DeliveryFuture(batch.result, index, timestamp_ms)
            wake = estimated >= self._batch_size
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
                raise ClientClosedError("producer is closed or not started (use `async with`)")
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
        return build_batch_from_entries(
            batch.entries,
            base_timestamp=batch.base_timestamp,
            max_timestamp=batch.max_timestamp,
            compression=self.compression,
            producer_id=self._producer_id,
            producer_epoch=self._producer_epoch,
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
                    self._finish(batch, error=self._expiry_error(batch, now))
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
                for node in nodes:
                    if self._in_flight.get(node, 0) >= self.max_in_flight:
                        continue
                    batches = accumulator.drain(
                        node, metadata.leader_for, self.max_request_size, now, self._encode
                    )
                    if batches:
                        self._in_flight[node] = self._in_flight.get(node, 0) + 1
                        self._nursery.start_soon(self._send_produce, node, batches)
                if self._closed:
                    return
                if accumulator.has_queued():
                    oldest = min(b[0].created_ms for b in accumulator.batches.values() if b)
                    next_ms = min(next_ms, oldest + self.delivery_timeout_ms - now)
                if unknown_leader:
                    next_ms = min(next_ms, self.retry_backoff_ms)
                with trio.move_on_after(max(next_ms, 1) / 1000):
                    await self._wakeup.wait()
        finally:
            self._sender_done.set()

    async def _refresh_metadata(self) -> None:
        try:
            await self.metadata.maybe_refresh()
        finally:
            self._refreshing = False
            self._wake()

    async def _send_produce(self, node: int, batches: list[ProducerBatch]) -> None:
        try:
            by_topic: dict[str, dict[int, list[bytes]]] = {}
            for batch in batches:
                assert batch.encoded is not None
                batch.attempts += 1
                by_topic.setdefault(batch.topic, {}).setdefault(batch.partition, []).append(
                    batch.encoded
                )
            request = ProduceRequest(
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
            if answer.error_code != ErrorCode.NONE:
                self._retry_or_fail(
                    batch,
                    answer.error_code,
                    f"{batch.topic}-{batch.partition}",
                    answer.error_message,
                )
                continue
            # Several batches of one partition were appended back to back.
            base = next_offset.get(batch.tp, answer.base_offset)
            next_offset[batch.tp] = base + batch.record_count
            self._finish(batch, base_offset=base, log_append_time_ms=answer.log_append_time_ms)

    def _retry_or_fail(
        self, batch: ProducerBatch, code: int, context: str, broker_message: str | None = None
    ) -> None:
        error = error_for_code(code, context, broker_message)
        batch.last_error = error
        now = _now_ms()
        if code in METADATA_ERRORS:
            self.metadata.request_update()
        if (
            error.retriable
            and batch.attempts <= self.retries
            and not self._closed
            and now - batch.created_ms < self.delivery_timeout_ms
        ):
            self._accumulator.reenqueue(batch, now, self.retry_backoff_ms)
            return
        if error.retriable and now - batch.created_ms >= self.delivery_timeout_ms:
            error = self._expiry_error(batch, now)
        self._finish(batch, error=error)

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


def _now_ms() -> float:
    return trio.current_time() * 1000


_time_ns = time.time_ns
