"""The producer's sender task (Kafka's Sender): drains ready batches into Produce requests (at
most max_in_flight outstanding per broker), sends them, and hands each answer to
BatchOutcomes (outcomes.py); also expiry, metadata refreshes and InitProducerId.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from client.client_metrics import ProducerMetrics
from client.clock import now_ms
from client.errors import AuthenticationFailedError, ClientClosedError, ProducerFatalError
from client.metadata import ClusterMetadata
from client.network import BrokerConnectionError
from client.producer.accumulator import RecordAccumulator
from client.producer.batch import ProducerBatch
from client.producer.idempotence import IdempotenceState
from client.producer.outcomes import BatchOutcomes
from client.producer.producer_id import NETWORK_TIMEOUT_MARGIN_MS, init_producer_id
from client.producer.retry_notices import RetryNotice, RetryNotices, leader_error
from protocol.compression import Compression
from protocol.errors import ErrorCode
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID
from protocol.topic_partition import TopicPartition

__all__ = ["CloseResult", "Sender"]


@dataclass(frozen=True, slots=True)
class CloseResult:
    """What closing did to the records still pending: each failed with ClientClosedError, as
    Kafka's forced close fails them; `in_doubt` (the error's too) tells them apart."""

    aborted: int = 0  # never sent, or refused by every attempt: certainly not in the topic
    in_doubt: int = 0  # a request carrying them went unanswered: they may be in the topic


_Send = tuple[int, list[ProducerBatch], ProduceRequest]  # to a broker: its batches, the request


class Sender:
    """Drains the accumulator into Produce requests and gives each answer to `outcomes`
    (BatchOutcomes), as Kafka's Sender.

    `on_batch_done(batch)` runs as a batch leaves the producer, before its futures complete
    (the producer frees its buffer memory); `on_stop()` when the idempotent producer stops;
    `on_retry(notice)` as a partition's records wait for a retry, at most once per partition
    every RETRY_NOTICE_INTERVAL_MS."""

    def __init__(
        self,
        metadata: ClusterMetadata,
        accumulator: RecordAccumulator,
        idempotence: IdempotenceState | None,
        *,
        acks: int,
        compression: Compression,
        retries: int,
        retry_backoff_ms: float,
        delivery_timeout_ms: float,
        request_timeout_ms: int,
        max_block_ms: float,
        max_request_size: int,
        max_in_flight: int,
        batch_size: int,
        on_batch_done: Callable[[ProducerBatch], None],
        on_stop: Callable[[], None],
        on_retry: Callable[[RetryNotice], None] | None = None,
    ) -> None:
        self._metadata = metadata
        self._accumulator = accumulator
        self._idempotence = idempotence
        self._acks = acks
        self._compression = compression
        self._retry_backoff_ms = retry_backoff_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self._max_block_ms = max_block_ms
        self._max_request_size = max_request_size
        self._max_in_flight = max_in_flight
        self._wakeup = trio.Event()
        self._next_look_ms = 0.0  # when the sender task, waiting, looks again unless woken
        self._in_flight: dict[int, int] = {}  # requests outstanding per broker
        self._unsent = 0  # requests drained and not yet on the wire (or failed)
        self._refreshing = False  # a metadata refresh task is running
        self._initializing = False  # an InitProducerId task is running
        self._nursery: trio.Nursery | None = None
        self._close_result: CloseResult | None = None
        self.metrics = ProducerMetrics()  # what Producer.metrics() reports
        self.outcomes = BatchOutcomes(
            metadata,
            accumulator,
            idempotence,
            self.metrics,
            RetryNotices(on_retry),
            retries=retries,
            retry_backoff_ms=retry_backoff_ms,
            delivery_timeout_ms=delivery_timeout_ms,
            batch_size=batch_size,
            on_batch_done=on_batch_done,
            on_stop=on_stop,
            wake=self.wake,
        )

    @property
    def closed(self) -> bool:
        return self.outcomes.closed

    def wake(self) -> None:
        """Have the sender look at the accumulator now (a batch opened, filled or flushed)."""
        self._wakeup.set()

    def close(self) -> CloseResult:
        """Stop: every batch not completed yet fails (ClientClosedError); the run loop returns.
        The queues are emptied first, so the loop, woken once more, finds nothing to drain.
        A batch in flight, or one an earlier attempt may have appended, is in doubt. Closing
        again returns the first close's result."""
        if self._close_result is not None:
            return self._close_result
        self.outcomes.closed = True
        queued = set(self._accumulator.abort_all())
        aborted = in_doubt = 0
        for batch in list(self._accumulator.incomplete):
            if batch.maybe_appended or batch not in queued:
                in_doubt += batch.record_count
                error = ClientClosedError(
                    "producer closed forcefully with the record's request unanswered: it may "
                    "be in the topic",
                    in_doubt=True,
                )
            else:
                aborted += batch.record_count
                error = ClientClosedError(
                    "producer closed forcefully before the record was delivered: it is not in "
                    "the topic"
                )
            self.outcomes.finish(batch, error=error)
        self._close_result = CloseResult(aborted, in_doubt)
        self.wake()
        return self._close_result

    async def run(self, nursery: trio.Nursery) -> None:
        """The sender loop, until closed; request tasks start in `nursery`."""
        self._nursery = nursery
        while True:
            if self.outcomes.closed:
                return
            self._wakeup = trio.Event()
            sends, next_ms = self._sweep()
            for node, batches, request in sends:
                nursery.start_soon(self._send_produce, node, batches, request)
            if next_ms == 0:  # a drain was cut short: look again before waiting
                await trio.lowlevel.checkpoint()
                continue
            self._next_look_ms = now_ms() + next_ms
            with trio.move_on_at(self._next_look_ms / 1000):
                await self._wakeup.wait()

    def _sweep(self) -> tuple[list[_Send], float]:
        """One look at the accumulator (Kafka's Sender.sendProducerData): expire batches, note
        leaderless partitions, start a metadata refresh or InitProducerId when due, and drain
        what is ready into requests (counted in flight). Also: how long until the next look
        is due (ms, at least 1), or 0 when a drain was cut short (a retry goes alone,
        max_request_size) and the next look is due now."""
        accumulator = self._accumulator
        metadata = self._metadata
        now = now_ms()
        for batch in accumulator.expire(now):
            self.outcomes.fail(batch, self.outcomes.expiry_error(batch, now))
        accumulator.forget_size_limits(now, metadata.metadata_max_age_ms)
        busy = {node for node, count in self._in_flight.items() if count}
        nodes, next_ms, leaderless = accumulator.ready(metadata.leader_for, now, busy)
        if leaderless:
            metadata.request_update()
            for topic, partition in leaderless:
                error = leader_error(metadata, topic, partition)
                self.outcomes.notice(topic, partition, error, now)
        if (
            metadata.refresh_due(now)
            and not self._refreshing
            and (accumulator.has_queued() or metadata.update_requested)
        ):
            assert self._nursery is not None
            self._refreshing = True
            self._nursery.start_soon(self._refresh_metadata)
        if self._needs_producer_id():
            nodes = set()  # nothing goes before the producer id is known
        sends: list[_Send] = []
        cut_short = False
        for node in nodes:
            if self._in_flight.get(node, 0) >= self._max_in_flight:
                continue
            batches = accumulator.drain(
                node, metadata.leader_for, self._max_request_size, now, self.encode
            )
            cut_short = cut_short or accumulator.drain_cut_short
            if batches:
                request = self.produce_request(batches)
                for batch in batches:
                    batch.in_flight_to = node
                self._in_flight[node] = self._in_flight.get(node, 0) + 1
                self._unsent += 1
                sends.append((node, batches, request))
        expires_in = accumulator.oldest_created_ms() + self._delivery_timeout_ms - now
        next_ms = min(next_ms, expires_in)
        if leaderless:
            next_ms = min(next_ms, self._retry_backoff_ms)
        return sends, 0.0 if cut_short else max(next_ms, 1.0)

    def encode(self, batch: ProducerBatch) -> bytes:
        """A batch's bytes at its first drain (with idempotence, its sequence numbers now)."""
        idempotence = self._idempotence
        if idempotence is None:
            return batch.encode(self._compression, NO_PRODUCER_ID, NO_PRODUCER_EPOCH)
        idempotence.assign(batch)
        return batch.encode(self._compression, idempotence.producer_id, idempotence.producer_epoch)

    # ----- the producer id -----------------------------------------------------------------

    def _needs_producer_id(self) -> bool:
        """Idempotence without a producer id yet: start InitProducerId if records wait."""
        idempotence = self._idempotence
        if idempotence is None or idempotence.producer_id != NO_PRODUCER_ID:
            return False
        if (
            not self._initializing
            and idempotence.fatal_error is None
            and self._accumulator.has_queued()
        ):
            assert self._nursery is not None
            self._initializing = True
            self._nursery.start_soon(self._init_producer_id)
        return True

    async def _init_producer_id(self) -> None:
        """InitProducerId (producer_id.py); without an id, the records queued fail with its
        timeout (a later send tries again), or the producer stops on a fatal error."""
        assert self._idempotence is not None
        try:
            error = await init_producer_id(
                self._metadata,
                self._idempotence,
                max_block_ms=self._max_block_ms,
                retry_backoff_ms=self._retry_backoff_ms,
                request_timeout_ms=self._request_timeout_ms,
            )
            if isinstance(error, ProducerFatalError):
                self.outcomes.stop(error)
            elif error is not None:
                for batch in self._accumulator.abort_all():
                    self.outcomes.finish(batch, error=error)
        finally:
            self._initializing = False
            self.wake()

    async def _refresh_metadata(self) -> None:
        try:
            await self._metadata.maybe_refresh()
        finally:
            self._refreshing = False
            self.wake()

    # ----- requests and answers ------------------------------------------------------------

    def produce_request(self, batches: list[ProducerBatch]) -> ProduceRequest:
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
            acks=self._acks,
            timeout_ms=self._request_timeout_ms,
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
        """Send `request` and handle its answer; then, as Kafka's Sender does in one loop,
        send what that answer let go to `node` (a batch that filled while the request was
        out) from this task: handing it to the sender task and on to a new request task
        cost two trips through trio's scheduler, about 0.3 ms each in `perf end-to-end`
        (docs/performance.md, "The clients' side of a round")."""
        while True:
            await self._exchange(node, batches, request)
            if self.outcomes.closed or self._unsent:
                # A request drained before is not on the wire yet: one drained now and sent
                # from here could pass it (trio runs tasks in no set order). The sender
                # task's wake-up does this look instead.
                self.wake()
                return
            sends, next_ms = self._sweep()
            if now_ms() + next_ms < self._next_look_ms:
                # This look found something due (a linger, a backoff) before the sender
                # task's: otherwise waking it only repeats this look (about 0.1 ms).
                self.wake()
            follow_on = None
            for send in sends:
                if send[0] == node and follow_on is None:
                    follow_on = send
                else:
                    assert self._nursery is not None
                    self._nursery.start_soon(self._send_produce, *send)
            if follow_on is None:
                return
            _, batches, request = follow_on

    async def _exchange(
        self, node: int, batches: list[ProducerBatch], request: ProduceRequest
    ) -> None:
        """One Produce request and its answer; `node` is not busy with it after. The caller
        looks at the accumulator next (or wakes the sender task to)."""
        unsent = True

        def sent() -> None:
            nonlocal unsent
            unsent = False
            self._unsent -= 1

        try:
            try:
                started = time.monotonic()
                response = await self._metadata.request(
                    node,
                    request,
                    timeout_ms=self._request_timeout_ms + NETWORK_TIMEOUT_MARGIN_MS,
                    expect_response=self._acks != 0,
                    on_sent=sent,
                )
                self.metrics.request_done(time.monotonic() - started)
            except AuthenticationFailedError as exc:
                # A refused login (KIP-152; e.g. the user was deleted): retrying unchanged
                # cannot help, so the batches fail now, not at delivery.timeout.ms.
                for batch in batches:
                    self.outcomes.retry_or_fail(batch, exc.code, f"broker {node}: {exc}")
                return
            except BrokerConnectionError as exc:
                timed_out = "timed out" in str(exc)
                self._metadata.request_update(suspect=node if timed_out else None)
                code = ErrorCode.REQUEST_TIMED_OUT if timed_out else ErrorCode.NETWORK_EXCEPTION
                for batch in batches:
                    self.outcomes.retry_or_fail(batch, code, f"broker {node}: {exc}")
                return
            if self._acks == 0:
                for batch in batches:
                    self.outcomes.finish(batch, base_offset=-1)
                return
            self.outcomes.handle_response(node, batches, response)
        finally:
            if unsent:
                self._unsent -= 1
            self._in_flight[node] -= 1
            for batch in batches:
                if batch.in_flight_to == node:
                    batch.in_flight_to = None
                self._accumulator.muted.discard(batch.tp)
