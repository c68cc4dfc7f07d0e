"""What a compacted partition promises, for the invariants: the latest record of every key.

Replicas clean independently, so their batches differ; what must agree is, for every key whose
latest record lies below both replicas' HWs, that latest record (a tombstone and no record at
all count the same). An acknowledged record must stay, or a later record of its key (or, once
a tombstone was written for that key, nothing).

Except what Kafka's LogCleaner removes, which a replica fetching a cleaned range never gets:
a record a later one of its key supersedes (at once: the cleaner keeps a key's latest offset
only), and a tombstone older than delete.retention.ms. So a follower behind a cleaned leader
holds no record of a key until it reaches the key's latest one, while another replica still
holds an older value (seed 2067 with disk faults); and a replica behind a tombstone for
longer than delete.retention.ms keeps the older value for good (the bound TopicConfig's
delete.retention.ms documents for every reader). `History` keeps the committed keyed records
as leaders held them below their HWs (a cleaner stops at the HW, so each is seen before it
can be removed); `explained` says whether a replica's latest record of a key is what that
history and those removals leave; only a difference both sides explain is excused.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field

from protocol.records import decode_batches
from protocol.topic_partition import TopicPartition
from tests.simulation.disk import MirroredLog
from tests.simulation.world import Ack

__all__ = ["Committed", "History", "Latest", "disagreement", "explained", "holds", "latest_records"]

Latest = dict[bytes, tuple[int, bytes | None]]  # key -> (offset, value) of its latest record

# Per log object, while it lives: keyed by id() instead, a log opened later at a reused
# address with the same version would be handed a dead log's records.
_cache: weakref.WeakKeyDictionary[MirroredLog, tuple[tuple[int, int], Latest]] = (
    weakref.WeakKeyDictionary()
)


def latest_records(log: MirroredLog, below: int) -> Latest:
    """Each key's latest record at an offset below `below` (decoded from the files; cached
    while the log does not change)."""
    key = (log.version, below)
    cached = _cache.get(log)
    if cached is not None and cached[0] == key:
        return cached[1]
    latest: Latest = {}
    offset = log.log_start_offset
    while offset < min(below, log.log_end_offset):
        data = log.read(offset, 1 << 20).read()
        batches = list(decode_batches(data))
        if not batches:
            break
        for batch in batches:
            for record in batch.records:
                if record.offset < below and record.key is not None:
                    latest[record.key] = (record.offset, record.value)
            offset = batch.header.next_offset
    _cache[log] = (key, latest)
    return latest


def disagreement(
    a: Latest, b: Latest, below: int, excused: Callable[[bytes], bool] | None = None
) -> str | None:
    """Why two replicas' latest records (each over its whole log) disagree below `below` (the
    smaller HW), or None. A key whose latest record lies at or above `below` on either replica
    is not comparable yet (a replica's HW can lag the records it holds); nor is one `excused`
    says a cleaner's removals explain on both (see `History.excuse`)."""
    for k in sorted(a.keys() | b.keys()):
        ra, rb = a.get(k), b.get(k)
        if (ra is not None and ra[0] >= below) or (rb is not None and rb[0] >= below):
            continue
        live_a = ra if ra is not None and ra[1] is not None else None
        live_b = rb if rb is not None and rb[1] is not None else None
        if live_a != live_b and (excused is None or not excused(k)):
            return f"key {k!r}: {ra} vs {rb}"
    return None


@dataclass(frozen=True, slots=True)
class Committed:
    """A committed keyed record: where, when (its timestamp), and whether a tombstone."""

    offset: int
    timestamp_ms: int
    tombstone: bool


def explained(
    latest: tuple[int, bytes | None] | None,
    high_watermark: int,
    committed: Sequence[Committed],
    removable_before_ms: int,
) -> bool:
    """A replica's latest record of a key (None: it holds none) is what the key's committed
    records below the replica's HW leave after a cleaner's removals, on it or on the leader
    it fetched them from: nothing newer, or newer records it lacks whose last one a cleaner
    may have removed, with the ones before it: superseded by a later committed record (even
    one the replica has not fetched yet), or a tombstone dated before `removable_before_ms`
    (now - delete.retention.ms). Its latest value, or a tombstone still within
    delete.retention.ms, missing: not explained."""
    newer = [
        i
        for i, c in enumerate(committed)
        if c.offset < high_watermark and (latest is None or c.offset > latest[0])
    ]
    if not newer:
        return True
    last = newer[-1]
    if last + 1 < len(committed):
        return True  # superseded: Kafka's cleaner keeps only a key's latest offset
    return committed[last].tombstone and committed[last].timestamp_ms < removable_before_ms


@dataclass
class History:
    """Each compacted partition's committed keyed records, read from its leader below the
    leader's HW after every step (module docstring)."""

    records: dict[TopicPartition, dict[bytes, list[Committed]]] = field(default_factory=dict)
    _read_to: dict[TopicPartition, int] = field(default_factory=dict)

    def observe(self, tp: TopicPartition, log: MirroredLog, high_watermark: int) -> None:
        offset = max(self._read_to.get(tp, 0), log.log_start_offset)
        if offset >= high_watermark:
            return
        self._read_to[tp] = high_watermark
        keys = self.records.setdefault(tp, {})
        while offset < min(high_watermark, log.log_end_offset):
            batches = list(decode_batches(log.read(offset, 1 << 20).read()))
            if not batches:
                break
            for batch in batches:
                for record in batch.records:
                    if offset <= record.offset < high_watermark and record.key is not None:
                        committed = Committed(
                            record.offset, record.timestamp_ms, record.value is None
                        )
                        keys.setdefault(record.key, []).append(committed)
                offset = batch.header.next_offset

    def excuse(
        self,
        tp: TopicPartition,
        removable_before_ms: int,
        a: tuple[Latest, int],
        b: tuple[Latest, int],
    ) -> Callable[[bytes], bool]:
        """For `disagreement`: a key both replicas' (latest records, HW) are `explained` on."""
        keys: Mapping[bytes, list[Committed]] = self.records.get(tp, {})

        def excused(key: bytes) -> bool:
            committed = keys.get(key, [])
            return all(
                explained(latest.get(key), hw, committed, removable_before_ms)
                for latest, hw in (a, b)
            )

        return excused


def holds(
    log: MirroredLog,
    ack: Ack,
    tombstoned: Collection[tuple[TopicPartition, bytes]],
) -> bool:
    """The log still has each acked record or a later one of its key; or, for a key that got
    a tombstone, possibly nothing."""
    latest = latest_records(log, log.log_end_offset)
    for i, key in enumerate(ack.keys):
        if key is None:
            continue
        found = latest.get(key)
        if found is None:
            if (ack.tp, key) not in tombstoned:
                return False
        elif found[0] < ack.base_offset + i:
            return False
    return True
