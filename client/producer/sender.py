"""The producer's sender task (Kafka's Sender): drains ready batches into Produce requests (at
most max_in_flight outstanding per broker) and handles the answers: acknowledgements, retries
(in sequence order with idempotence), batches refused as too large (sent alone, then split:
KIP-126), expiry, metadata refreshes, InitProducerId, and the idempotent producer's fatal stop.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import trio

from client.client_metrics import ProducerMetrics
from client.errors import (
    ClientClosedError,
    HighwaterClientError,
    HighwaterTimeoutError,
    OutOfOrderSequenceError,
    ProducerFatalError,
    error_for_code,
)
from client.metadata import ClusterMetadata
from client.network import BrokerConnectionError
from client.producer.accumulator import RecordAccumulator
from client.producer.answers import (
    KNOWN_CODES,
    MAYBE_APPENDED,
    METADATA_ERRORS,
    SUSPECT_LEADER_CODES,
    TOO_LARGE,
)
from client.producer.batch import ProducerBatch
from client.producer.idempotence import IdempotenceState
from client.producer.producer_id import NETWORK_TIMEOUT_MARGIN_MS, init_producer_id
from client.producer.retry_notices import RetryNotice, RetryNotices, leader_error
from protocol.compression import Compression
from protocol.errors import ErrorCode
from protocol.messages.produce import (
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from protocol.topic_partition import TopicPartition

__all__ = ["CloseResult", "Sender"]


@dataclass(frozen=True, slots=True)
class CloseResult:
    """What closing did to the records still pending: each failed with ClientClosedError, as
    Kafka's forced close fails them; `in_doubt` (the error's too) tells them apart."""

    aborted: int = 0  # never sent, or refused by every attempt: certainly not in the topic
    in_doubt: int = 0  # a request carrying them went unanswered: they may be in the topic


class Sender:
    """Drains the accumulator into Produce requests and completes batches (Kafka's Sender).

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
        self._retries = retries
        self._retry_backoff_ms = retry_backoff_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._request_timeout_ms = request_timeout_ms
        self._max_block_ms = max_block_ms
        self._max_request_size = max_request_size
        self._max_in_flight = max_in_flight
        self._batch_size = batch_size
        self._on_batch_done = on_batch_done
        self._on_stop = on_stop
        self._notices = RetryNotices(on_retry)
        self._wakeup = trio.Event()
        self._in_flight: dict[int, int] = {}  # requests outstanding per broker
        self._refreshing = False  # a metadata refresh task is running
        self._initializing = False  # an InitProducerId task is running
        self._nursery: trio.Nursery | None = None
        self._closed = False
        self._close_result: CloseResult | None = None
        self.metrics = ProducerMetrics()  # what Producer.metrics() reports

    @property
    def closed(self) -> bool:
        return self._closed

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
        self._closed = True
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
            self.finish(batch, error=error)
        self._close_result = CloseResult(aborted, in_doubt)
        self.wake()
        return self._close_result

    async def run(self, nursery: trio.Nursery) -> None:
        """The sender loop, until closed; request tasks start in `nursery`."""
        self._nursery = nursery
        accumulator = self._accumulator
        metadata = self._metadata
        while True:
            if self._closed:
                return
            self._wakeup = trio.Event()
            now = _now_ms()
            for batch in accumulator.expire(now):
                self.fail(batch, self._expiry_error(batch, now))
            accumulator.forget_size_limits(now, metadata.metadata_max_age_ms)
            busy = {node for node, count in self._in_flight.items() if count}
            nodes, next_ms, leaderless = accumulator.ready(metadata.leader_for, now, busy)
            if leaderless:
                metadata.request_update()
                for topic, partition in leaderless:
                    self._notice(topic, partition, leader_error(metadata, topic, partition), now)
            if (
                metadata.refresh_due(now)
                and not self._refreshing
                and (accumulator.has_queued() or metadata.update_requested)
            ):
                self._refreshing = True
                nursery.start_soon(self._refresh_metadata)
            if self._needs_producer_id():
                nodes = set()  # nothing goes before the producer id is known
            drained = False
            for node in nodes:
                if self._in_flight.get(node, 0) >= self._max_in_flight:
                    continue
                batches = accumulator.drain(
                    node, metadata.leader_for, self._max_request_size, now, self.encode
                )
                if batches:
                    drained = True
                    request = self.produce_request(batches)
                    for batch in batches:
                        batch.in_flight_to = node
                    self._in_flight[node] = self._in_flight.get(node, 0) + 1
                    nursery.start_soon(self._send_produce, node, batches, request)
            if drained and self._idempotence is not None:
                # A retry goes alone and max_request_size may cut a drain short: look
                # again before waiting.
                await trio.lowlevel.checkpoint()
                continue
            expires_in = accumulator.oldest_created_ms() + self._delivery_timeout_ms - now
            next_ms = min(next_ms, expires_in)
            if leaderless:
                next_ms = min(next_ms, self._retry_backoff_ms)
            with trio.move_on_after(max(next_ms, 1) / 1000):
                await self._wakeup.wait()

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
                self.stop(error)
            elif error is not None:
                for batch in self._accumulator.abort_all():
                    self.finish(batch, error=error)
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
        try:
            try:
                started = time.monotonic()
                response = await self._metadata.request(
                    node,
                    request,
                    timeout_ms=self._request_timeout_ms + NETWORK_TIMEOUT_MARGIN_MS,
                    expect_response=self._acks != 0,
                )
                self.metrics.request_done(time.monotonic() - started)
            except BrokerConnectionError as exc:
                timed_out = "timed out" in str(exc)
                self._metadata.request_update(suspect=node if timed_out else None)
                code = ErrorCode.REQUEST_TIMED_OUT if timed_out else ErrorCode.NETWORK_EXCEPTION
                for batch in batches:
                    self.retry_or_fail(batch, code, f"broker {node}: {exc}")
                return
            if self._acks == 0:
                for batch in batches:
                    self.finish(batch, base_offset=-1)
                return
            self._handle_response(node, batches, response)
        finally:
            self._in_flight[node] -= 1
            for batch in batches:
                if batch.in_flight_to == node:
                    batch.in_flight_to = None
                self._accumulator.muted.discard(batch.tp)
            self.wake()

    def _handle_response(
        self, node: int, batches: list[ProducerBatch], response: ProduceResponse
    ) -> None:
        answers = {(t.name, p.index): p for t in response.responses for p in t.partition_responses}
        next_offset: dict[TopicPartition, int] = {}
        for batch in batches:
            answer = answers.get(batch.tp)
            if answer is None:
                self.retry_or_fail(
                    batch,
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    f"broker {node} did not answer {batch.tp}",
                )
                continue
            code = answer.error_code
            if code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER and self._idempotence is not None:
                code = ErrorCode.NONE  # as Kafka: already in the log, its offset forgotten
            if code != ErrorCode.NONE:
                if code in SUSPECT_LEADER_CODES:
                    # REQUEST_TIMED_OUT: its followers may no longer follow; a sequence gap:
                    # it may be a deposed leader (retry_or_fail).
                    self._metadata.request_update(suspect=node)
                self.retry_or_fail(
                    batch, code, f"{batch.topic}-{batch.partition}", answer.error_message
                )
                continue
            # Several batches of one partition were appended back to back.
            base = next_offset.get(batch.tp, answer.base_offset)
            next_offset[batch.tp] = base + batch.record_count
            self.acknowledged(batch, base, answer.log_append_time_ms)

    def acknowledged(self, batch: ProducerBatch, base_offset: int, log_append_time_ms: int) -> None:
        """The leader appended `batch` at `base_offset`."""
        idempotence = self._idempotence
        if idempotence is None or batch not in self._accumulator.incomplete:
            self.finish(batch, base_offset=base_offset, log_append_time_ms=log_append_time_ms)
            return
        idempotence.acknowledge(batch)
        self.finish(batch, base_offset=base_offset, log_append_time_ms=log_append_time_ms)
        if batch.sent_sequence != batch.base_sequence:
            # Appended under the numbers it had when sent, which an earlier refused batch then
            # gave back: the leader's sequence and ours now differ for this partition.
            self.stop(
                OutOfOrderSequenceError(
                    f"OUT_OF_ORDER_SEQUENCE_NUMBER: {batch.topic}-{batch.partition}: a batch "
                    f"was appended with sequence {batch.sent_sequence} after an earlier batch "
                    f"was refused; the leader's sequence no longer matches the producer's"
                )
            )

    def retry_or_fail(
        self, batch: ProducerBatch, code: int, context: str, broker_message: str | None = None
    ) -> None:
        """An attempt of `batch` failed with `code`: queue it for a retry, split it, or fail it."""
        if batch not in self._accumulator.incomplete:
            return  # failed meanwhile: the producer stopped
        error = error_for_code(code, context, broker_message)
        batch.last_error = error
        now = _now_ms()
        if code in METADATA_ERRORS:
            self._metadata.request_update()
        if code in MAYBE_APPENDED or code not in KNOWN_CODES:
            batch.maybe_appended = True
        retriable = error.retriable
        if code in TOO_LARGE:
            self._accumulator.learn_size_limit(batch.tp, now)
            # With other batches of its partition, the refusal may be for another one, or
            # for all together (more than a segment): alone, this batch may go.
            retriable = retriable or batch.sent_together
        idempotence = self._idempotence
        if idempotence is not None and isinstance(error, ProducerFatalError):
            # A gap before the batch the leader expects next is fatal; before a later one,
            # it only means an earlier batch failed first: retry in order. After an
            # acknowledged batch (acks=all: on every in-sync replica) the broker lacks what any
            # replica that may lead holds: it is a deposed leader that has not heard yet (the
            # chaos soak met one, docs/reliability.md): retry once the metadata names the
            # leader, until delivery.timeout.ms. Kafka's producer bumps its epoch (KIP-360).
            retriable = code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER and (
                not idempotence.is_next(batch)
                or batch.sent_behind
                or batch.sent_sequence != batch.base_sequence
                or idempotence.partitions[batch.tp].acknowledged
            )
            if not retriable:
                self.stop(error, batch)
                return
        if (
            retriable
            and batch.attempts <= self._retries
            and not self._closed
            and now - batch.created_ms < self._delivery_timeout_ms
        ):
            goes_before = None if idempotence is None else idempotence.retry_goes_before(batch)
            self._accumulator.reenqueue(batch, now, self._retry_backoff_ms, goes_before)
            self._notice(batch.topic, batch.partition, error.name, now)
            self.metrics.record_retries += batch.record_count
            return
        if retriable and now - batch.created_ms >= self._delivery_timeout_ms:
            error = self._expiry_error(batch, now)
        elif (
            code in TOO_LARGE
            and not batch.maybe_appended
            and not self._closed
            and self._split(batch, now)
        ):
            return
        self.fail(batch, error)

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

    # ----- telling the caller of retries -----------------------------------------------------

    def _notice(self, topic: str, partition: int, error: str, now: float) -> None:
        self._notices.notice(topic, partition, error, now, self._accumulator.incomplete)

    # ----- completing batches --------------------------------------------------------------

    def fail(self, batch: ProducerBatch, error: HighwaterClientError) -> None:
        """Fail one batch. With idempotence, a batch that may be in the log leaves its
        partition's sequence unresolved: the producer stops; one certainly not in the log gives
        its sequence numbers back."""
        idempotence = self._idempotence
        if idempotence is None or batch.base_sequence == NO_SEQUENCE:
            self.finish(batch, error=error)
        elif batch.maybe_appended and not self._closed:
            self.stop(
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
            self.finish(batch, error=error)

    def stop(
        self,
        fatal: ProducerFatalError,
        batch: ProducerBatch | None = None,
        batch_error: HighwaterClientError | None = None,
    ) -> None:
        """The idempotent producer's fatal state: `batch` fails (with `batch_error`, default
        `fatal`), every other pending record with `fatal`, and later sends raise it."""
        idempotence = self._idempotence
        assert idempotence is not None
        if idempotence.fatal_error is not None:
            return
        idempotence.fatal_error = fatal
        self._on_stop()
        if batch is not None:
            self.finish(batch, error=batch_error or fatal)
        others = type(fatal)(
            f"{fatal.name}: not delivered (if it was already sent: outcome unknown), the "
            f"producer stopped: {fatal}",
            fatal.code,
        )
        self._accumulator.abort_all()
        for pending in list(self._accumulator.incomplete):
            self.finish(pending, error=others)
        self.wake()

    def _expiry_error(self, batch: ProducerBatch, now: float) -> HighwaterTimeoutError:
        last = f"; last error {batch.last_error}" if batch.last_error else ""
        return HighwaterTimeoutError(
            f"expiring {batch.record_count} record(s) for {batch.topic}-{batch.partition}: "
            f"{now - batch.created_ms:.0f} ms has passed since batch creation{last}"
        )

    def finish(
        self,
        batch: ProducerBatch,
        *,
        base_offset: int = -1,
        log_append_time_ms: int = -1,
        error: HighwaterClientError | None = None,
    ) -> None:
        """Complete or fail `batch` (once): its records' futures and callbacks resolve."""
        accumulator = self._accumulator
        if batch not in accumulator.incomplete:
            return
        accumulator.incomplete.discard(batch)
        self._on_batch_done(batch)
        if error is not None:
            self.metrics.record_errors += batch.record_count
            batch.fail(error)
        else:
            size = len(batch.encoded) if batch.encoded is not None else batch.estimated_bytes
            self.metrics.batch_done(batch.record_count, size)
            batch.complete(base_offset, log_append_time_ms)


def _now_ms() -> float:
    return trio.current_time() * 1000
