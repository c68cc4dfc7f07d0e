"""The idempotent producer's state (KIP-98; Kafka's TransactionManager without transactions):
producer id and epoch, per-partition sequence numbers, the rules that keep a partition's
batches in order across retries, and the fatal error that stops the producer. Pure: no IO,
no clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final

from client.errors import ProducerFatalError
from client.producer.batch import ProducerBatch, increment_sequence
from protocol.records import NO_PRODUCER_EPOCH, NO_PRODUCER_ID, NO_SEQUENCE
from protocol.topic_partition import TopicPartition

__all__ = [
    "MAX_IN_FLIGHT_BATCHES_PER_PARTITION",
    "IdempotenceState",
    "PartitionSequences",
    "idempotence_enabled",
]

# A partition leader keeps the last 5 batches per producer to answer resends.
MAX_IN_FLIGHT_BATCHES_PER_PARTITION: Final = 5


def idempotence_enabled(
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
        # Set once: the producer stopped (Kafka's fatal error state); later sends raise it.
        self.fatal_error: ProducerFatalError | None = None

    def sendable(self, batch: ProducerBatch, node: int) -> bool:
        """Whether a partition's head batch may be drained now, for broker `node` (Kafka's
        shouldStopDrainBatchesForPartition, inverted)."""
        entry = self.partitions.get(batch.tp)
        if entry is None:
            return True
        if batch.base_sequence != NO_SEQUENCE and batch.attempts > 0:
            # Being retried: only the lowest unacknowledged batch goes until it succeeds
            # (nextBatchBySequence).
            return bool(entry.unacked) and entry.unacked[0] is batch
        # New, or encoded but never sent (it goes as a new batch would). Not while an earlier
        # batch is on its way to another broker (the old leader): the new leader may hold that
        # batch already and take later ones, and once more than the 5 batches a leader
        # remembers are past it, its own retry could only be refused as out of order (a chaos
        # soak met this). Its answer or timeout comes first; then the retry leads.
        if any(b.in_flight_to is not None and b.in_flight_to != node for b in entry.unacked):
            return False
        if batch.base_sequence != NO_SEQUENCE:
            return True
        limit = MAX_IN_FLIGHT_BATCHES_PER_PARTITION if entry.acknowledged else 1
        return len(entry.unacked) < limit

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
