"""What a compacted partition promises, for the invariants: the latest record of every key.

Replicas clean independently, so their batches differ; what must agree is, for every key whose
latest record lies below both replicas' HWs, that latest record (a tombstone and no record at
all count the same). An acknowledged record must stay, or a later record of its key (or, once
a tombstone was written for that key, nothing).
"""

from __future__ import annotations

import weakref
from collections.abc import Collection

from protocol.records import decode_batches
from protocol.topic_partition import TopicPartition
from tests.simulation.disk import MirroredLog
from tests.simulation.world import Ack

__all__ = ["Latest", "disagreement", "holds", "latest_records"]

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


def disagreement(a: Latest, b: Latest, below: int) -> str | None:
    """Why two replicas' latest records (each over its whole log) disagree below `below` (the
    smaller HW), or None. A key whose latest record lies at or above `below` on either replica
    is not comparable yet (a replica's HW can lag the records it holds)."""
    for k in sorted(a.keys() | b.keys()):
        ra, rb = a.get(k), b.get(k)
        if (ra is not None and ra[0] >= below) or (rb is not None and rb[0] >= below):
            continue
        live_a = ra if ra is not None and ra[1] is not None else None
        live_b = rb if rb is not None and rb[1] is not None else None
        if live_a != live_b:
            return f"key {k!r}: {ra} vs {rb}"
    return None


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
