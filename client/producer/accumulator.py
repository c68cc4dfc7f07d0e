"""Per-partition queues of batches (Kafka's RecordAccumulator): which batches are ready, and
draining them into requests. Pure bookkeeping: no IO, and no clock (every method that needs
the time takes `now_ms`, in the producer's clock).
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable, Mapping, Sequence, Set

from client.producer.batch import DeliveryFuture, DoneCallback, ProducerBatch
from protocol.records import Record
from protocol.topic_partition import TopicPartition

__all__ = ["RecordAccumulator"]


class RecordAccumulator:
    """Per-partition queues of batches; pure bookkeeping, time passed in (no IO, no clock)."""

    def __init__(
        self,
        *,
        batch_size: int,
        linger_ms: float,
        delivery_timeout_ms: float,
        muting: bool,
        sendable: Callable[[ProducerBatch, int], bool] | None = None,
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
        # The last drain left a batch that could have gone now (max_bytes, a retry alone).
        self.drain_cut_short = False
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

    @property
    def open_batches(self) -> Mapping[tuple[str, int], ProducerBatch]:
        """The live map (topic, partition) -> batch being filled (the same object for the
        accumulator's lifetime): for a hot path that keeps it and adds to a batch with room
        itself; a record that does not fit goes through append_fields."""
        return self._open

    def append(
        self, topic: str, partition: int, record: Record, size: int, now_ms: float
    ) -> tuple[DeliveryFuture, bool]:
        """Add a record stamped with its create time; (its future, whether the sender should
        look: new or full batch)."""
        if record.timestamp_ms < 0:
            raise ValueError("the accumulator has no clock: give the record its timestamp")
        return self.append_fields(
            topic,
            partition,
            record.timestamp_ms,
            record.key,
            record.value,
            record.headers,
            size,
            now_ms,
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
        now_ms: float,
        callback: DoneCallback | None = None,
    ) -> tuple[DeliveryFuture, bool]:
        """`append` without a Record object (Kafka's RecordAccumulator.append); `now_ms` is the
        creation time of a batch opened for the record."""
        tp = (topic, partition)  # a plain tuple: this runs per record
        batch = self._open.get(tp)
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
            batch = ProducerBatch(topic, partition, now_ms, capacity)
            queue.append(batch)
            self.incomplete.add(batch)
            self._open[tp] = batch
            wake = True
        future = batch.add(timestamp_ms, key, value, headers, size, callback)
        return future, wake or batch.estimated_bytes >= batch.capacity

    def _head_ready_at(self, queue: deque[ProducerBatch], now_ms: float) -> float:
        """When the partition's head batch may be sent (<= now_ms: now)."""
        head = queue[0]
        if head.attempts > 0:
            return head.retry_at_ms
        if self._goes_without_lingering(queue):
            return now_ms
        return head.created_ms + self.linger_ms

    def _goes_without_lingering(self, queue: deque[ProducerBatch]) -> bool:
        """The head batch is full, has batches behind it, or a flush is on."""
        return len(queue) > 1 or queue[0].estimated_bytes >= self.batch_size or bool(self.flushing)

    def ready(
        self,
        leader_for: Callable[[str, int], int | None],
        now_ms: float,
        busy: Set[int] = frozenset(),
    ) -> tuple[set[int], float, list[tuple[str, int]]]:
        """(brokers with a sendable batch, ms until the next batch may become ready,
        the partitions with data but no known leader). A batch still filling whose leader is
        in `busy` (a Produce request outstanding) waits for that answer, however long it has
        lingered: the broker reads a connection's requests one at a time, so a second small
        request would only queue behind the first while its batch could still grow
        (docs/performance.md, "What mattered")."""
        nodes: set[int] = set()
        next_ms = math.inf
        leaderless: list[tuple[str, int]] = []
        sendable = self.sendable
        for tp, queue in self.batches.items():
            if not queue or tp in self.muted:
                continue
            leader = leader_for(*tp)
            if leader is None:
                leaderless.append(tp)
                continue
            if sendable is not None and not sendable(queue[0], leader):
                continue
            filling = queue[0].attempts == 0 and not self._goes_without_lingering(queue)
            if filling and leader in busy:
                continue  # the outstanding request's task looks again at its answer
            at = self._head_ready_at(queue, now_ms)
            if at <= now_ms:
                nodes.add(leader)
            else:
                next_ms = min(next_ms, at - now_ms)
        return nodes, next_ms, leaderless

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
        partition's first batch there). `drain_cut_short` says whether a batch that could have
        gone now was left for another request."""
        self.drain_cut_short = False
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
                if sendable is not None and not sendable(head, node):
                    break
                if drained and drained[-1].tp == tp and self._head_ready_at(queue, now_ms) > now_ms:
                    break  # a later, still-filling batch of the same partition: let it fill
                data = head.encoded
                if data is None:
                    data = head.encoded = encode(head)
                    if self._open.get(tp) is head:
                        del self._open[tp]  # its bytes are final: new records go elsewhere
                if drained and size + len(data) > max_bytes:
                    self.drain_cut_short = True
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
                    self.drain_cut_short = self.drain_cut_short or bool(queue)
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

    def oldest_created_ms(self) -> float:
        """When the oldest queued head batch was created (inf: nothing queued)."""
        return min((q[0].created_ms for q in self.batches.values() if q), default=math.inf)


def _never_sent(batch: ProducerBatch) -> bool:
    return batch.attempts == 0
