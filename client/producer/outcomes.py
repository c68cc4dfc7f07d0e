"""What becomes of a batch after an attempt (Kafka's Sender.completeBatch, failBatch and
canRetry): acknowledged, queued for a retry, split (KIP-126) or failed; and the idempotent
producer's fatal stop. Synchronous: the sender's tasks call it with each answer."""

from __future__ import annotations

from collections.abc import Callable

from client.client_metrics import ProducerMetrics
from client.clock import now_ms
from client.errors import (
    HighwaterClientError,
    HighwaterTimeoutError,
    OutOfOrderSequenceError,
    ProducerFatalError,
    error_for_code,
)
from client.metadata import ClusterMetadata
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
from client.producer.retry_notices import RetryNotices
from protocol.errors import ErrorCode
from protocol.messages.produce import ProduceResponse
from protocol.records import NO_SEQUENCE
from protocol.topic_partition import TopicPartition

__all__ = ["BatchOutcomes"]


class BatchOutcomes:
    """Completes, retries, splits or fails batches. `on_batch_done(batch)` runs as a batch
    leaves the producer, before its futures complete; `on_stop()` when the idempotent producer
    stops; `wake()` has the sender look at the accumulator again. `closed` is set when the
    producer closes: nothing is retried or split after that."""

    def __init__(
        self,
        metadata: ClusterMetadata,
        accumulator: RecordAccumulator,
        idempotence: IdempotenceState | None,
        metrics: ProducerMetrics,
        notices: RetryNotices,
        *,
        retries: int,
        retry_backoff_ms: float,
        delivery_timeout_ms: float,
        batch_size: int,
        on_batch_done: Callable[[ProducerBatch], None],
        on_stop: Callable[[], None],
        wake: Callable[[], None],
    ) -> None:
        self._metadata = metadata
        self._accumulator = accumulator
        self._idempotence = idempotence
        self._metrics = metrics
        self._notices = notices
        self._retries = retries
        self._retry_backoff_ms = retry_backoff_ms
        self._delivery_timeout_ms = delivery_timeout_ms
        self._batch_size = batch_size
        self._on_batch_done = on_batch_done
        self._on_stop = on_stop
        self._wake = wake
        self.closed = False

    def handle_response(
        self, node: int, batches: list[ProducerBatch], response: ProduceResponse
    ) -> None:
        """Each batch's answer in `response` from broker `node`."""
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
        now = now_ms()
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
            and not self.closed
            and now - batch.created_ms < self._delivery_timeout_ms
        ):
            goes_before = None if idempotence is None else idempotence.retry_goes_before(batch)
            self._accumulator.reenqueue(batch, now, self._retry_backoff_ms, goes_before)
            self.notice(batch.topic, batch.partition, error.name, now)
            self._metrics.record_retries += batch.record_count
            return
        if retriable and now - batch.created_ms >= self._delivery_timeout_ms:
            error = self.expiry_error(batch, now)
        elif (
            code in TOO_LARGE
            and not batch.maybe_appended
            and not self.closed
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

    def notice(self, topic: str, partition: int, error: str, now: float) -> None:
        """Tell the caller that the partition's records wait for a retry (RetryNotices)."""
        self._notices.notice(topic, partition, error, now, self._accumulator.incomplete)

    def fail(self, batch: ProducerBatch, error: HighwaterClientError) -> None:
        """Fail one batch. With idempotence, a batch that may be in the log leaves its
        partition's sequence unresolved: the producer stops; one certainly not in the log gives
        its sequence numbers back."""
        idempotence = self._idempotence
        if idempotence is None or batch.base_sequence == NO_SEQUENCE:
            self.finish(batch, error=error)
        elif batch.maybe_appended and not self.closed:
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
        self._wake()

    def expiry_error(self, batch: ProducerBatch, now: float) -> HighwaterTimeoutError:
        """The error of a batch that waited delivery_timeout_ms."""
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
            self._metrics.record_errors += batch.record_count
            batch.fail(error)
        else:
            size = len(batch.encoded) if batch.encoded is not None else batch.estimated_bytes
            self._metrics.batch_done(batch.record_count, size)
            batch.complete(base_offset, log_append_time_ms)
