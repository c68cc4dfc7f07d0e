"""The public producer (Kafka's KafkaProducer): `send()` partitions a record, appends it to
its partition's open batch and returns a DeliveryFuture at once, waiting (at most
max_block_ms) only for the topic's metadata and for buffer memory. The per-record path has no
await; the Sender task ships the batches. docs/architecture.md (client/) gives the design.
"""

from __future__ import annotations

import contextlib
import functools
import math
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from types import TracebackType
from typing import Final

import trio

from client.clock import now_ms
from client.errors import (
    ClientClosedError,
    HighwaterClientError,
    HighwaterTimeoutError,
    ProducerFatalError,
)
from client.lifecycle import close_then_exit, open_background
from client.metadata import ClusterMetadata
from client.partitioner import StickyPartitioner, partition_for_key
from client.producer.accumulator import RecordAccumulator
from client.producer.batch import (
    RECORD_OVERHEAD_BYTES,
    DeliveryFuture,
    ProducerBatch,
    estimate_record_bytes,
)
from client.producer.config import PRODUCER_DEFAULTS as _D
from client.producer.config import ProducerConfig
from client.producer.idempotence import IdempotenceState
from client.producer.retry_notices import RetryNotice
from client.producer.sender import CloseResult, Sender
from client.producer.topic_wait import TopicWait
from client.security import ClientSecurity
from protocol.compression import Compression
from protocol.errors import ErrorCode
from protocol.records import BATCH_HEADER_BYTES, NO_PRODUCER_EPOCH, NO_PRODUCER_ID

__all__ = ["Producer"]

# The most a backlogged idempotent partition's batch grows to: 5 of them in flight keep a
# replicated partition's pipeline full, and each stays well under message.max.bytes (1 MiB).
_MAX_BACKLOG_BATCH_BYTES: Final = 256 * 1024


class Producer:
    """`async with Producer("h:p,h:p") as producer: fut = await producer.send(...)`.

    The keyword arguments are Kafka's producer settings (client/settings.py, listed in
    docs/client-settings.md; `self.config` holds them, checked), with their defaults:
    acks="all" and idempotence on (`enable_idempotence=None`: on unless
    acks, retries or max_in_flight_requests_per_connection conflict; True: ValueError then;
    False: off). docs/architecture.md (client/) says what idempotence guarantees and when it
    stops the producer (a ProducerFatalError).

    `on_retry(notice)` learns of records waiting for a retry (a RetryNotice: no leader, a
    leader's refusal, a failed request), at most once per partition every 5 s; it runs in the
    producer's task and must not block or raise.
    """

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        acks: int | str = _D.acks,
        enable_idempotence: bool | None = None,
        linger_ms: float = _D.linger_ms,
        batch_size: int = _D.batch_size,
        compression: str | Compression = _D.compression,
        retries: int = _D.retries,
        retry_backoff_ms: float = _D.retry_backoff_ms,
        delivery_timeout_ms: float = _D.delivery_timeout_ms,
        request_timeout_ms: int = _D.request_timeout_ms,
        max_block_ms: float = _D.max_block_ms,
        buffer_memory: int = _D.buffer_memory,
        max_request_size: int = _D.max_request_size,
        max_in_flight_requests_per_connection: int = _D.max_in_flight_requests_per_connection,
        metadata_max_age_ms: int = _D.metadata_max_age_ms,
        client_id: str = _D.client_id,
        security: ClientSecurity | Mapping[str, str] | None = None,
        partitioner: StickyPartitioner | None = None,
        on_retry: Callable[[RetryNotice], None] | None = None,
    ) -> None:
        self.config = config = ProducerConfig.build(
            acks=acks,
            enable_idempotence=enable_idempotence,
            compression=compression,
            linger_ms=linger_ms,
            batch_size=batch_size,
            retries=retries,
            retry_backoff_ms=retry_backoff_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            max_block_ms=max_block_ms,
            buffer_memory=buffer_memory,
            max_request_size=max_request_size,
            max_in_flight_requests_per_connection=max_in_flight_requests_per_connection,
            metadata_max_age_ms=metadata_max_age_ms,
            client_id=client_id,
        )
        self.enable_idempotence = config.enable_idempotence
        self.acks = config.acks
        self._compression = compression = config.compression
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
            security=security,
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
        self._sender = Sender(
            self.metadata,
            self._accumulator,
            self._idempotence,
            acks=self.acks,
            compression=compression,
            retries=retries,
            retry_backoff_ms=retry_backoff_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            request_timeout_ms=request_timeout_ms,
            max_block_ms=max_block_ms,
            max_request_size=max_request_size,
            max_in_flight=max_in_flight_requests_per_connection,
            batch_size=batch_size,
            on_batch_done=self._batch_done,
            on_stop=self._stop_accepting,
            on_retry=on_retry,
        )
        self._partitioner = partitioner or StickyPartitioner(batch_size)
        # send's fast path reads a plain StickyPartitioner's state (not a subclass's)
        self._plain_sticky = type(self._partitioner) is StickyPartitioner
        self._sticky = self._partitioner.sticky_partitions
        self._sticky_bytes = self._partitioner.batch_size

        self._buffer_used = 0
        self._memory_freed = trio.Event()
        self._yield_due = False  # send_nowait opened or filled a batch: send yields once
        self._available: dict[str, Callable[[], tuple[int, ...]]] = {}
        self._topic_partitions = self.metadata.partitions_by_topic
        self._open_batches = self._accumulator.open_batches
        self._max_record_bytes = min(max_request_size - BATCH_HEADER_BYTES, buffer_memory)
        self._accepting = False  # between __aenter__ and close: send may queue records
        self._exit_stack: contextlib.AsyncExitStack | None = None
        self._closing = False
        self._background_scope = trio.CancelScope()
        self._nursery: trio.Nursery | None = None  # the sender's, for background tasks
        self._topic_wait = TopicWait(
            self.metadata, max_block_ms=max_block_ms, retry_backoff_ms=retry_backoff_ms
        )

    @property
    def compression(self) -> Compression:
        """The codec every batch is compressed with (fixed for the producer's lifetime)."""
        return self._compression

    def metrics(self) -> dict[str, float]:
        """Kafka's producer metrics by name: record-send-total/-rate, record-error-rate,
        record-retry-rate, batch-size-avg/-max, request-latency-avg/-max (ms), ...
        (client/client_metrics.py)."""
        return self._sender.metrics.snapshot()

    @property
    def producer_id(self) -> int:
        """The id from InitProducerId (-1 before it, or without idempotence)."""
        return NO_PRODUCER_ID if self._idempotence is None else self._idempotence.producer_id

    @property
    def producer_epoch(self) -> int:
        return NO_PRODUCER_EPOCH if self._idempotence is None else self._idempotence.producer_epoch

    @property
    def _fatal_error(self) -> ProducerFatalError | None:
        """The error that stopped the (idempotent) producer, if it stopped."""
        return None if self._idempotence is None else self._idempotence.fatal_error

    # ----- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> Producer:
        if self._exit_stack is not None:
            raise RuntimeError("a Producer can be entered once")
        self._exit_stack = await open_background(self._run_background)
        return self

    async def _run_background(self, task_status: trio.TaskStatus[None]) -> None:
        """The sender and its request tasks, under a cancel scope of their own: closing
        cancels them, never the body of the caller's `async with`."""
        with self._background_scope:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._accepting = not self._closing
                task_status.started()
                await self._sender.run(nursery)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        assert self._exit_stack is not None
        close = functools.partial(self.aclose, timeout_ms=None if exc is None else 0)
        return await close_then_exit(self._exit_stack, close, exc_type, exc, tb)

    async def aclose(self, timeout_ms: float | None = None) -> CloseResult:
        """Send what is buffered (waiting at most timeout_ms; None: until delivered or expired),
        fail what is left with ClientClosedError, stop the sender, close connections.

        Returns how many records close failed (Kafka's close(timeout) fails them "forcefully"):
        `aborted` ones are not in the topic, `in_doubt` ones (in flight) may be; each record's
        error says which (`ClientClosedError.in_doubt`). Closing again returns the same."""
        if self._sender.closed:
            return self._sender.close()
        self._closing = True
        self._accepting = False
        self._sender.wake()
        try:
            if timeout_ms is None or timeout_ms > 0:
                with trio.move_on_after(math.inf if timeout_ms is None else timeout_ms / 1000):
                    await self._flush_all()
        finally:
            # Also when the wait above is cancelled from outside: nothing stays pending.
            result = self._sender.close()
            self._background_scope.cancel()
            await self.metadata.aclose()  # drops the connections before its checkpoint
        return result

    def _stop_accepting(self) -> None:
        """The sender stopped the producer after a fatal error: sends raise it from now on."""
        self._accepting = False

    def _batch_done(self, batch: ProducerBatch) -> None:
        """A batch left the producer (delivered or failed): its records' memory is free."""
        self._buffer_used -= batch.estimated_bytes - BATCH_HEADER_BYTES
        self._memory_freed.set()
        self._memory_freed = trio.Event()

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
        size = RECORD_OVERHEAD_BYTES + (len(key) if key else 0) + (len(value) if value else 0)
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
        batch = self._open_batches.get((topic, partition))
        if batch is not None and batch.estimated_bytes + size <= batch.capacity:
            # ProducerBatch.add inlined (the one copy) for a batch holding records already:
            # tests/unit/client/test_producer_append_paths.py pins it to the plain path.
            index = batch.record_count
            if timestamp_ms > batch.max_timestamp:
                batch.max_timestamp = timestamp_ms
            batch.entries.append((timestamp_ms - batch.base_timestamp, index, key, value, headers))
            batch.record_count = index + 1
            estimated = batch.estimated_bytes = batch.estimated_bytes + size
            future = DeliveryFuture(batch.result, index, timestamp_ms)
            if callback is not None:
                batch.result.callbacks.append((callback, future))
            wake = estimated >= batch.capacity
        else:
            future, wake = self._accumulator.append_fields(
                topic, partition, timestamp_ms, key, value, headers, size, now_ms(), callback
            )
        self._buffer_used = buffer_used
        if wake:
            self._sender.wake()
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
                await self._wait_for_topic(topic)
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
        return await self._wait_for_topic(topic)

    async def _wait_for_topic(self, topic: str) -> tuple[int, ...]:
        nursery = None if self._closing else self._nursery
        return await self._topic_wait.partitions(topic, nursery)

    async def _flush_all(self) -> None:
        accumulator = self._accumulator
        accumulator.flushing += 1
        self._sender.wake()
        try:
            for batch in list(accumulator.incomplete):
                await batch.wait()
        finally:
            accumulator.flushing -= 1

    async def _wait_for_memory(self, size: int) -> None:
        deadline = trio.current_time() + self.max_block_ms / 1000
        while self._buffer_used + size > self.buffer_memory:
            if self._closing:
                raise ClientClosedError("producer closed while waiting for buffer memory")
            self._sender.wake()
            with trio.move_on_at(deadline):
                await self._memory_freed.wait()
            if trio.current_time() >= deadline and self._buffer_used + size > self.buffer_memory:
                raise HighwaterTimeoutError(
                    f"no buffer memory for {size} bytes within max_block_ms {self.max_block_ms}"
                )


_time_ns = time.time_ns
