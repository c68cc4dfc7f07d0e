"""Cleaning one log (Kafka's Cleaner): keep the latest record per key, as new segments.

`clean(task)` only reads the segment files it is given and writes `.cleaned` segments next to
them, so it can run in a worker process; the log swaps them in afterwards
(`Log.replace_segments`). Offsets are kept: a batch loses the records a later offset of the
same key supersedes, keyless records and tombstones older than delete.retention.ms, and keeps
its base offset, last offset delta and producer fields (as Kafka's MemoryRecords.filterTo);
a batch that keeps every record is copied as it is. Each idempotent producer's last batch
stays even when none of its records does: its header alone, with no records (Kafka's
BatchRetention.RETAIN_EMPTY), so its producer id, epoch and sequence range survive for the
producer state (a retry is still a duplicate, the next batch still follows). Records are read
as raw msgpack entries, not Record objects: this is the one place the broker looks at every
record of a log.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from broker.config.log_config import LogConfig
from broker.log.segment import MAX_RELATIVE_OFFSET, LogSegment, segment_file_name
from protocol.compression import Compression
from protocol.records import (
    BATCH_HEADER_BYTES,
    BatchHeader,
    build_batch_from_entries,
    decode_batch_entries,
    decode_record,
    read_header,
    validate_batch,
)

__all__ = [
    "CLEANED_SUFFIX",
    "CleanedGroup",
    "CleaningResult",
    "CleaningTask",
    "SegmentRef",
    "clean",
]

CLEANED_SUFFIX: Final = ".cleaned"
_READ_CHUNK_BYTES: Final = 1 << 20


@dataclass(frozen=True, slots=True)
class SegmentRef:
    base_offset: int
    size: int  # the bytes to read: the segment's size when the cleaning was planned


@dataclass(frozen=True, slots=True)
class CleaningTask:
    directory: Path
    config: LogConfig
    segments: tuple[SegmentRef, ...]  # every segment below `end_offset`, in order
    first_dirty_offset: int  # records below were cleaned before
    end_offset: int  # a segment boundary: nothing at or above is read or changed
    now_ms: int
    # producer id -> the last offset of its last batch: that batch's header is kept.
    producer_last_offsets: Mapping[int, int] = field(default_factory=dict)
    max_map_keys: int = 1 << 20  # the key -> offset map's bound (log.cleaner.dedupe.buffer.size)


@dataclass(frozen=True, slots=True)
class CleanedGroup:
    replaces: tuple[int, ...]  # base offsets of the segments it replaces
    base_offset: int
    size: int  # of its .cleaned segment; 0: nothing survived, the old segments just go


@dataclass(frozen=True, slots=True)
class CleaningResult:
    end_offset: int  # cleaned below this: the log's next first dirty offset
    groups: tuple[CleanedGroup, ...]
    bytes_read: int = 0
    bytes_written: int = 0
    records_read: int = 0
    records_kept: int = 0


def clean(task: CleaningTask, *, parent_pid: int | None = None) -> CleaningResult:
    """`parent_pid`: when run in a child process, the broker's: an orphaned child (the broker
    was killed) stops rather than write files a new broker process may be reading."""
    check = _Orphaned(parent_pid)
    offset_map, end_offset = _build_offset_map(task, check)
    if end_offset <= task.first_dirty_offset:
        return CleaningResult(task.first_dirty_offset, ())
    refs = tuple(r for r in task.segments if r.base_offset < end_offset)
    groups: list[CleanedGroup] = []
    totals = [0, 0, 0, 0]  # bytes read, bytes written, records read, records kept
    for group in _group(refs, task.config, end_offset):
        check()
        groups.append(_clean_group(task, group, offset_map, end_offset, totals))
    return CleaningResult(end_offset, tuple(groups), *totals)


def _retained(
    entries: tuple[Any, ...],
    header: BatchHeader,
    offset_map: Mapping[bytes, int],
    delete_horizon_ms: int,
) -> list[Any]:
    """Kafka's cleaner rule for a batch's records: a record stays if it has a key, it is the
    latest for that key (the map holds the key's last offset in the dirty part; a key missing
    from it was not rewritten since), and it is not a tombstone past its retention."""
    base, base_ts = header.base_offset, header.base_timestamp
    get = offset_map.get
    try:
        return [
            e
            for e in entries
            if e[2] is not None
            and get(e[2], base + e[1]) == base + e[1]
            and (e[3] is not None or base_ts + e[0] >= delete_horizon_ms)
        ]
    except (TypeError, IndexError):  # a malformed entry: decode_record names it
        for index, entry in enumerate(entries):
            decode_record(entry, header, index)
        raise


class _Orphaned:
    def __init__(self, parent_pid: int | None) -> None:
        self._parent_pid = parent_pid

    def __call__(self) -> None:
        if self._parent_pid is not None and os.getppid() != self._parent_pid:
            raise OSError("the broker that started this cleaning is gone")


# -- the key -> latest offset map (Kafka's SkimpyOffsetMap, as a dict) ----------------------


def _build_offset_map(
    task: CleaningTask, check: Callable[[], None]
) -> tuple[dict[bytes, int], int]:
    """Latest offset per key among the dirty records; the end offset is cut back to a segment
    boundary if the map fills up (at least the first dirty segment is mapped)."""
    offset_map: dict[bytes, int] = {}
    end_offset = task.end_offset
    first_dirty = task.first_dirty_offset
    for ref in task.segments:
        if ref.base_offset >= end_offset:
            break
        check()
        for header, raw in _batches(task.directory, ref):
            if header.next_offset <= first_dirty:
                continue
            _, entries = decode_batch_entries(raw)
            base = header.base_offset
            try:
                offset_map.update(
                    {e[2]: base + e[1] for e in entries if e[2] is not None}
                    if base >= first_dirty
                    else {
                        e[2]: base + e[1]
                        for e in entries
                        if e[2] is not None and base + e[1] >= first_dirty
                    }
                )
            except (TypeError, IndexError):  # a malformed entry: decode_record names it
                for index, entry in enumerate(entries):
                    decode_record(entry, header, index)
                raise
        if len(offset_map) > task.max_map_keys and ref.base_offset > first_dirty:
            return offset_map, ref.base_offset  # full: clean up to this segment
    return offset_map, end_offset


# -- grouping and rewriting -----------------------------------------------------------------


def _group(
    refs: tuple[SegmentRef, ...], config: LogConfig, end_offset: int
) -> Iterator[tuple[SegmentRef, ...]]:
    """Consecutive segments whose cleaned output fits one segment (Kafka's
    groupSegmentsBySize, on the sizes before cleaning: an upper bound)."""
    group: list[SegmentRef] = []
    size = 0
    for i, ref in enumerate(refs):
        next_base = refs[i + 1].base_offset if i + 1 < len(refs) else end_offset
        if group and (
            size + ref.size > config.segment_bytes
            or next_base - 1 - group[0].base_offset > MAX_RELATIVE_OFFSET
        ):
            yield tuple(group)
            group, size = [], 0
        group.append(ref)
        size += ref.size
    if group:
        yield tuple(group)


def _clean_group(
    task: CleaningTask,
    group: tuple[SegmentRef, ...],
    offset_map: Mapping[bytes, int],
    end_offset: int,
    totals: list[int],
) -> CleanedGroup:
    base = group[0].base_offset
    for stale in (".log", ".index", ".timeindex"):  # from a cleaning a crash interrupted
        (task.directory / segment_file_name(base, stale + CLEANED_SUFFIX)).unlink(missing_ok=True)
    out = LogSegment(task.directory, base, task.config, task.now_ms, suffix=CLEANED_SUFFIX)
    horizon_ms = task.now_ms - task.config.delete_retention_ms
    try:
        for ref in group:
            totals[0] += ref.size
            for header, raw in _batches(task.directory, ref):
                count = header.record_count
                totals[2] += count
                _, entries = decode_batch_entries(raw)
                retained = _retained(entries, header, offset_map, horizon_ms)
                kept = len(retained)
                totals[3] += kept
                last = task.producer_last_offsets.get(header.producer_id) == header.last_offset
                if not kept and not last:
                    continue  # nothing of it stays
                if kept < count:
                    raw = _filtered(header, retained) if kept else _emptied(header)
                out.append(raw, 0, read_header(raw), None)
        out.flush()
        size = out.size
        totals[1] += size
    finally:
        out.close()
    if size == 0:
        out.delete()
    return CleanedGroup(tuple(r.base_offset for r in group), base, size)


def _filtered(header: BatchHeader, retained: list[Any]) -> bytes:
    """The batch with only `retained` records: its offsets, codec, producer fields and leader
    epoch as they were (records keep their offset deltas, so the batch has gaps)."""
    return build_batch_from_entries(
        retained,
        base_timestamp=header.base_timestamp,
        max_timestamp=header.base_timestamp + max(e[0] for e in retained),
        compression=Compression(header.compression),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        last_offset_delta=header.last_offset_delta,
    )


def _emptied(header: BatchHeader) -> bytes:
    """A producer's last batch without its records (Kafka's writeEmptyHeader): offsets,
    producer id, epoch, base sequence and leader epoch as they were, so the sequence range
    (base_sequence + last_offset_delta) is the same; both timestamps are its max timestamp,
    no codec for an empty records section."""
    return build_batch_from_entries(
        (),
        base_timestamp=header.max_timestamp,
        max_timestamp=header.max_timestamp,
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        base_offset=header.base_offset,
        partition_leader_epoch=header.partition_leader_epoch,
        last_offset_delta=header.last_offset_delta,
    )


def _batches(directory: Path, ref: SegmentRef) -> Iterator[tuple[BatchHeader, bytes]]:
    """Every whole batch in the first `ref.size` bytes of the segment, with its bytes."""
    path = directory / segment_file_name(ref.base_offset, ".log")
    fd = os.open(path, os.O_RDONLY)
    try:
        position, pending = 0, b""
        while position < ref.size:
            chunk = os.pread(fd, min(_READ_CHUNK_BYTES, ref.size - position), position)
            if not chunk:
                raise OSError(f"{path} is shorter than {ref.size} bytes")
            position += len(chunk)
            buf = pending + chunk
            used = 0
            for pos, header in _whole(buf):
                yield header, buf[pos : pos + header.size]
                used = pos + header.size
            pending = buf[used:]
        if pending:
            raise OSError(f"{path}: a partial batch at its end")
    finally:
        os.close(fd)


def _whole(buf: bytes) -> Iterator[tuple[int, BatchHeader]]:
    """(position, header) of the whole, CRC-checked batches at the start of `buf`."""
    pos = 0
    while pos + BATCH_HEADER_BYTES <= len(buf):
        header = read_header(buf, pos)
        if pos + header.size > len(buf):
            return
        validate_batch(buf, pos, header)
        yield pos, header
        pos += header.size
