"""The async producer: Kafka's RecordAccumulator + Sender, in trio.

`send()` picks a partition (explicit, murmur2 of the key, or sticky for keyless records), appends
the record to that partition's open batch and returns a `DeliveryFuture` at once; it only waits
for topic metadata (first send to a topic) and for buffer memory, each bounded by max_block_ms.

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
import math
import time
from collections import deque
from collections.abc import Callable, Generator, Iterable, Sequence
from dataclasses import dataclass, field
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
    build_batch,
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
    ProduceRequestResult): one event per batch, not per record."""

    __slots__ = ("base_offset", "error", "event", "log_append_time_ms")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.base_offset = -1
        self.log_append_time_ms = -1
        self.error: HighwaterClientError | None = None


class DeliveryFuture:
    """The delivery result of one record: `await fut` gives RecordMetadata or raises
    HighwaterClientError. `add_done_callback(fn)` calls fn(fut) in the producer's trio thread."""

    __slots__ = ("_callbacks", "_index", "_result", "partition", "timestamp_ms", "topic")

    def __init__(
        self, result: _BatchResult, topic: str, partition: int, index: int, timestamp_ms: int
    ) -> None:
        self._result = result
        self._index = index
        self._callbacks: list[Callable[[DeliveryFuture], None]] | None = None
        self.topic = topic
        self.partition = partition
        self.timestamp_ms = timestamp_ms

    def done(self) -> bool:
        return self._result.event.is_set()

    def exception(self) -> HighwaterClientError | None:
        if not self.done():
            raise RuntimeError("delivery not complete yet")
        return self._result.error

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
        return RecordMetadata(self.topic, self.partition, offset, timestamp)

    async def wait(self) -> RecordMetadata:
        await self._result.event.wait()
        return self.result()

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        return self.wait().__await__()

    def add_done_callback(self, fn: Callable[[DeliveryFuture], None]) -> None:
        if self.done():
            fn(self)
        else:
            if self._callbacks is None:
                self._callbacks = []
            self._callbacks.append(fn)

    def _run_callbacks(self) -> None:
        callbacks, self._callbacks = self._callbacks, None
        for fn in callbacks or ():
            fn(self)


@dataclass(eq=False, slots=True)
class ProducerBatch:
    topic: str
    partition: int
    created_ms: float
    records: list[Record] = field(default_factory=list)
    futures: list[DeliveryFuture] = field(default_factory=list)
    estimated_bytes: int = BATCH_HEADER_BYTES
    result: _BatchResult = field(default_factory=_BatchResult)
    attempts: int = 0
    retry_at_ms: float = 0.0
    encoded: bytes | None = None  # built once at first drain; retries resend the same bytes
    base_sequence: int = NO_SEQUENCE  # the idempotent producer sets this (later issue)
    last_error: HighwaterClientError | None = None

    @property
    def tp(self) -> TopicPartition:
        return (self.topic, self.partition)

    def complete(self, base_offset: int, log_append_time_ms: int) -> None:
        self.result.base_offset = base_offset
        self.result.log_append_time_ms = log_append_time_ms
        self._done()

    def fail(self, error: HighwaterClientError) -> None:
        self.result.error = error
        self._done()

    def _done(self) -> None:
        if self.result.event.is_set():
            return
        self.result.event.set()
        for future in self.futures:
            if future._callbacks:
                future._run_callbacks()


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
        tp = (topic, partition)
        queue = self.batches.get(tp)
        if queue is None:
            queue = self.batches[tp] = deque()
        batch = queue[-1] if queue else None
        wake = False
        if (
            batch is None
            or batch.encoded is not None
            or batch.estimated_bytes + size > self.batch_size
        ):
            batch = ProducerBatch(topic, partition, now_ms() if callable(now_ms) else now_ms)
            queue.append(batch)
            self.incomplete.add(batch)
            wake = True
        future = DeliveryFuture(
            batch.result, topic, partition, len(batch.records), record.timestamp_ms
        )
        batch.records.append(record)
        batch.futures.append(future)
        batch.estimated_bytes += size
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
                expired.append(queue.popleft())
        return expired

    def abort_all(self) -> list[ProducerBatch]:
        aborted = [b for q in self.batches.values() for b in q]
        for queue in self.batches.values():
            queue.clear()
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
        # The idempotent producer (later issue) sets these from InitProducerId.
        self._producer_id = NO_PRODUCER_ID
        self._producer_epoch = NO_PRODUCER_EPOCH

        self._buffer_used = 0
        self._memory_freed = trio.Event()
        self._wakeup = trio.Event()
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
                task_status.started()
                await self._run_sender()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._exit_stack is not None
        try:
            await self.aclose(timeout_ms=None if exc is None else 0)
        finally:
            result = await self._exit_stack.__aexit__(exc_type, exc, tb)
        return result

    async def aclose(self, timeout_ms: float | None = None) -> None:
        """Send what is buffered (waiting at most timeout_ms; None: until delivered or expired),
        fail what is left with ClientClosedError, stop the sender, close connections."""
        if self._closed:
            return
        self._closing = True
        self._wake()
        if timeout_ms is None or timeout_ms > 0:
            with trio.move_on_after(math.inf if timeout_ms is None else timeout_ms / 1000):
                await self._flush_all()
        self._closed = True
        for batch in list(self._accumulator.incomplete):
            self._finish(batch, error=ClientClosedError("producer closed before delivery"))
        self._wake()
        self._background_scope.cancel()
        await self.metadata.aclose()

    # ----- sending ---------------------------------------------------------------------------

    async def send(
        self,
        topic: str,
        value: bytes | None,
        key: bytes | None = None,
        partition: int | None = None,
        headers: Iterable[tuple[str, bytes | None]] = (),
        timestamp_ms: int | None = None,
    ) -> DeliveryFuture:
        """Queue one record; the returned future completes when the broker acknowledges it.

        Waits (at most max_block_ms) only for the topic's metadata and for buffer memory.
        """
        if self._nursery is None or self._closing:
            raise ClientClosedError("producer is closed or not started (use `async with`)")
        metadata = self.metadata
        num_partitions = metadata.partition_count(topic)
        if not num_partitions:
            num_partitions = len(await metadata.wait_for_topic(topic, self.max_block_ms))
        if partition is None:
            if key is not None:
                partition = partition_for_key(key, num_partitions)
        elif not 0 <= partition < num_partitions:
            raise HighwaterClientError(
                f"UNKNOWN_TOPIC_OR_PARTITION: partition {partition} of {topic!r} "
                f"(it has {num_partitions})",
                ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
            )
        header_tuple = tuple(headers)
        size = estimate_record_bytes(key, value, header_tuple)
        if partition is None:
            partition = self._partitioner.partition(
                topic, num_partitions, lambda: metadata.available_partitions(topic)
            )
            self._partitioner.record_appended(topic, partition, size)
        if size + BATCH_HEADER_BYTES > self.max_request_size or size > self.buffer_memory:
            raise HighwaterClientError(
                f"MESSAGE_TOO_LARGE: a record of about {size} bytes is larger than "
                f"max_request_size {self.max_request_size} or buffer_memory",
                ErrorCode.MESSAGE_TOO_LARGE,
            )
        if self._buffer_used + size > self.buffer_memory:
            await self._wait_for_memory(size)
        if timestamp_ms is None:
            timestamp_ms = time.time_ns() // 1_000_000
        record = Record(value, key, timestamp_ms, header_tuple)
        future, wake = self._accumulator.append(topic, partition, record, size, _now_ms)
        self._buffer_used += size
        if wake:
            self._wake()
        return future

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
        return build_batch(
            batch.records,
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
            next_offset[batch.tp] = base + len(batch.records)
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
            f"expiring {len(batch.records)} record(s) for {batch.topic}-{batch.partition}: "
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
