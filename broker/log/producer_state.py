"""Producer state of one partition for the idempotent producer (KIP-98), as Kafka's
ProducerStateManager without transactions: per producer id its epoch and its last
MAX_CACHED_BATCHES batches, so a resend is recognised (original offsets, nothing appended), a
sequence gap is OUT_OF_ORDER_SEQUENCE_NUMBER and an older epoch INVALID_PRODUCER_EPOCH.

A pure function of the batches applied in log order: the leader checks with
`check_leader_append` (no change), appends, then `update`s; followers and recovery `update`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, NamedTuple

from protocol.errors import InvalidProducerEpochError, InvalidRecordError, OutOfOrderSequenceError
from protocol.records import NO_PRODUCER_ID, NO_SEQUENCE, BatchHeader

__all__ = [
    "MAX_CACHED_BATCHES",
    "MAX_SEQUENCE",
    "BatchMetadata",
    "DuplicateBatch",
    "ProducerStateEntry",
    "ProducerStateManager",
    "has_producer_id",
]

MAX_CACHED_BATCHES: Final = 5  # Kafka's window: a producer has at most 5 requests in flight
MAX_SEQUENCE: Final = 2**31 - 1  # sequences wrap from here to 0


def has_producer_id(header: BatchHeader) -> bool:
    """Whether the batch comes from an idempotent producer (Kafka's `hasProducerId`)."""
    return header.producer_id > NO_PRODUCER_ID


def _in_sequence(last_seq: int, next_seq: int) -> bool:
    # last_seq NO_SEQUENCE (-1, a producer without batches) makes 0 the only next sequence.
    return next_seq == last_seq + 1 or (last_seq == MAX_SEQUENCE and next_seq == 0)


@dataclass(frozen=True, slots=True)
class BatchMetadata:
    """One appended batch of a producer."""

    first_seq: int
    last_seq: int
    first_offset: int
    last_offset: int
    max_timestamp: int

    @classmethod
    def of(cls, header: BatchHeader) -> BatchMetadata:
        """The metadata of an appended batch (its base_offset is the real offset)."""
        return cls(
            header.base_sequence,
            header.last_sequence,
            header.base_offset,
            header.last_offset,
            header.max_timestamp,
        )


@dataclass(slots=True)
class ProducerStateEntry:
    """What the partition knows of one producer id: its epoch and its newest batches."""

    producer_id: int
    producer_epoch: int
    batches: deque[BatchMetadata] = field(default_factory=deque)  # newest last
    last_timestamp: int = -1  # max_timestamp of the newest batch (for expiry)

    @property
    def last_seq(self) -> int:
        return self.batches[-1].last_seq if self.batches else NO_SEQUENCE

    @property
    def last_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, first_seq: int, last_seq: int) -> BatchMetadata | None:
        """The cached batch with exactly this sequence range, if any (epoch not compared)."""
        for batch in self.batches:
            if batch.first_seq == first_seq and batch.last_seq == last_seq:
                return batch
        return None

    def add_batch(self, batch: BatchMetadata) -> None:
        self.batches.append(batch)
        while len(self.batches) > MAX_CACHED_BATCHES:
            self.batches.popleft()
        self.last_timestamp = batch.max_timestamp

    def copy(self) -> ProducerStateEntry:
        # BatchMetadata is frozen: a new deque is a full copy.
        return ProducerStateEntry(
            self.producer_id, self.producer_epoch, deque(self.batches), self.last_timestamp
        )


class DuplicateBatch(NamedTuple):
    """The original placement of a batch the producer resent: answered, not appended again."""

    first_offset: int
    last_offset: int
    max_timestamp: int


class _Pending(NamedTuple):
    """A producer's epoch and last sequence after the earlier batches of the same request."""

    producer_epoch: int
    last_seq: int


class ProducerStateManager:
    """Producer ids of one partition and their newest batches, up to `map_end_offset`."""

    def __init__(self) -> None:
        self._producers: dict[int, ProducerStateEntry] = {}
        self.map_end_offset = 0  # next offset after the last batch applied

    @property
    def producers(self) -> Mapping[int, ProducerStateEntry]:
        """A read-only view of the entries by producer id (do not mutate the entries)."""
        return MappingProxyType(self._producers)

    def check_leader_append(self, headers: Sequence[BatchHeader]) -> DuplicateBatch | None:
        """Validate the batches of one leader append, in request order, before offsets are
        assigned. Changes nothing.

        Returns the original placement of the first batch that duplicates a cached batch (same
        epoch and sequence range), in which case nothing of the request is appended, as Kafka
        does. Raises InvalidProducerEpochError (47) for an epoch older than the producer's,
        OutOfOrderSequenceError (45) for a sequence that does not follow (or a new epoch not
        starting at 0), InvalidRecordError (87) for a producer id with a negative epoch or
        sequence. A producer this partition does not know is accepted at any sequence; later
        batches of the same producer in the request must follow it.
        """
        pending: dict[int, _Pending] = {}
        for header in headers:
            if not has_producer_id(header):
                continue
            entry = self._producers.get(header.producer_id)
            # As Kafka: duplicates are looked up in the applied state only.
            duplicate = _find_duplicate(entry, header)
            if duplicate is not None:
                return duplicate
            current = pending.get(header.producer_id)
            if current is None and entry is not None:
                current = _Pending(entry.producer_epoch, entry.last_seq)
            _check_batch(header, current)
            pending[header.producer_id] = _Pending(header.producer_epoch, header.last_sequence)
        return None

    def update(self, header: BatchHeader) -> None:
        """Apply one appended batch (leader after append, follower, log replay). Never refuses:
        the log is the truth. A batch in a different epoch than the producer's entry replaces
        the entry (as Kafka, which only warns when a replicated epoch goes backwards)."""
        self.map_end_offset = header.next_offset
        if not has_producer_id(header):
            return
        entry = self._producers.get(header.producer_id)
        if entry is None or entry.producer_epoch != header.producer_epoch:
            entry = ProducerStateEntry(header.producer_id, header.producer_epoch)
            self._producers[header.producer_id] = entry
        entry.add_batch(BatchMetadata.of(header))

    def remove_expired(self, now_ms: int, expiration_ms: int) -> list[int]:
        """Forget producers idle for `expiration_ms` (Kafka's producer.id.expiration.ms,
        measured from the newest batch's max timestamp); their ids, ascending."""
        cutoff = now_ms - expiration_ms
        expired = sorted(p for p, e in self._producers.items() if e.last_timestamp <= cutoff)
        for producer_id in expired:
            del self._producers[producer_id]
        return expired

    def truncate_to(self, offset: int) -> None:
        """Forget batches at or above `offset` and producers left without any.

        Only forgets: it cannot restore batches that an entry had dropped (older than the
        window, or of an earlier epoch), so a producer may become unknown and be accepted at any
        sequence. It never makes a valid retry fail. The exact rebuild is `reset` from the
        newest snapshot at or below `offset`, then `update` for each batch from there.
        """
        for producer_id, entry in list(self._producers.items()):
            kept = deque(b for b in entry.batches if b.last_offset < offset)
            if not kept:
                del self._producers[producer_id]
            elif len(kept) < len(entry.batches):
                entry.batches = kept
                entry.last_timestamp = kept[-1].max_timestamp
        self.map_end_offset = min(self.map_end_offset, offset)

    def reset(self, entries: Iterable[ProducerStateEntry], map_end_offset: int) -> None:
        """Replace the whole state (from a snapshot at `map_end_offset`); entries are copied,
        each trimmed to its newest MAX_CACHED_BATCHES. ValueError on a repeated producer id."""
        producers: dict[int, ProducerStateEntry] = {}
        for entry in entries:
            if entry.producer_id in producers:
                raise ValueError(f"producer id {entry.producer_id} appears twice")
            copy = entry.copy()
            while len(copy.batches) > MAX_CACHED_BATCHES:
                copy.batches.popleft()
            producers[entry.producer_id] = copy
        self._producers = producers
        self.map_end_offset = map_end_offset

    def last_offsets(self) -> dict[int, int]:
        """Producer id -> the last offset of its newest batch (the batch the log cleaner
        keeps whole, as Kafka's cleaner keeps each active producer's last batch)."""
        return {p: e.batches[-1].last_offset for p, e in self._producers.items() if e.batches}

    def snapshot_entries(self) -> list[ProducerStateEntry]:
        """Copies of all entries, by producer id (what a snapshot file holds)."""
        return [self._producers[p].copy() for p in sorted(self._producers)]


def _find_duplicate(entry: ProducerStateEntry | None, header: BatchHeader) -> DuplicateBatch | None:
    if entry is None or entry.producer_epoch != header.producer_epoch:
        return None
    batch = entry.find_duplicate(header.base_sequence, header.last_sequence)
    if batch is None:
        return None
    return DuplicateBatch(batch.first_offset, batch.last_offset, batch.max_timestamp)


def _check_batch(header: BatchHeader, current: _Pending | None) -> None:
    """Raise if `header` cannot follow `current` (None: a producer id not known here)."""
    pid, epoch, first_seq = header.producer_id, header.producer_epoch, header.base_sequence
    if epoch < 0 or first_seq < 0:
        raise InvalidRecordError(
            f"producer {pid}: batch has a producer id but epoch {epoch} and sequence {first_seq}"
        )
    if current is None:
        return
    if epoch < current.producer_epoch:
        raise InvalidProducerEpochError(
            f"producer {pid}: epoch {epoch} is older than the current epoch "
            f"{current.producer_epoch}"
        )
    if epoch > current.producer_epoch:
        if first_seq != 0:
            raise OutOfOrderSequenceError(
                f"producer {pid}: new epoch {epoch} must start at sequence 0, got {first_seq}"
            )
        return
    if not _in_sequence(current.last_seq, first_seq):
        raise OutOfOrderSequenceError(
            f"producer {pid} epoch {epoch}: sequence {first_seq} does not follow the last "
            f"sequence {current.last_seq}"
        )
