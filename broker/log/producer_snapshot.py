"""Producer state snapshots: `<offset>.snapshot` files in a partition's log directory.

A snapshot named for offset N holds the producer state after every batch below N, so recovery
replays the log from N only. Written atomically (checkpoints.write_atomically), read strictly:
a snapshot that cannot be trusted raises CorruptSnapshotError and `load_latest_snapshot` falls
back to an older one. The file format is in docs/architecture.md ("Producer state").
"""

from __future__ import annotations

import os
import re
import struct
from collections import deque
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Final

import msgpack
import structlog

from broker.log.checkpoints import fsync_path, write_atomically
from broker.log.errors import LogStorageError
from broker.log.producer_state import MAX_CACHED_BATCHES, BatchMetadata, ProducerStateEntry
from protocol.errors import ErrorCode
from protocol.records import crc32c

__all__ = [
    "MAX_SNAPSHOT_BYTES",
    "SNAPSHOT_SUFFIX",
    "SNAPSHOT_VERSION",
    "CorruptSnapshotError",
    "delete_snapshots_below",
    "list_snapshot_offsets",
    "load_latest_snapshot",
    "read_snapshot",
    "snapshot_path",
    "write_snapshot",
]

SNAPSHOT_SUFFIX: Final = ".snapshot"
SNAPSHOT_VERSION: Final = 1
# About 300 bytes per producer at most: room for ~200k producer ids on one partition. A larger
# file is not something this broker wrote, and reading it whole could exhaust memory.
MAX_SNAPSHOT_BYTES: Final = 64 * 1024 * 1024

_PREFIX: Final = struct.Struct(">HI")  # version, crc
_NAME: Final = re.compile(r"([0-9]{20})" + re.escape(SNAPSHOT_SUFFIX))
_ENTRY_FIELDS: Final = 4
_BATCH_FIELDS: Final = 5


class CorruptSnapshotError(LogStorageError):
    """A snapshot file that cannot be trusted (version, CRC, size or shape)."""

    code = ErrorCode.KAFKA_STORAGE_ERROR

    def __init__(self, path: Path, what: str) -> None:
        super().__init__(f"corrupt producer snapshot {path}: {what}")
        self.path = path


Logger = structlog.typing.FilteringBoundLogger


def snapshot_path(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"


def write_snapshot(directory: Path, offset: int, entries: Sequence[ProducerStateEntry]) -> Path:
    """Atomically write the snapshot for `offset` (replacing one already there); its path."""
    if offset < 0:
        raise ValueError(f"snapshot offset must be non-negative, got {offset}")
    body = msgpack.packb([_encode_entry(e) for e in entries])
    path = snapshot_path(directory, offset)
    write_atomically(path, _PREFIX.pack(SNAPSHOT_VERSION, crc32c(body)) + body)
    return path


def _encode_entry(entry: ProducerStateEntry) -> list[Any]:
    batches = [
        [b.first_seq, b.last_seq, b.first_offset, b.last_offset, b.max_timestamp]
        for b in entry.batches
    ]
    return [entry.producer_id, entry.producer_epoch, entry.last_timestamp, batches]


def list_snapshot_offsets(directory: Path) -> list[int]:
    """Offsets of the snapshot files in `directory`, ascending (tmp files are not listed)."""
    offsets = []
    for name in os.listdir(directory):
        match = _NAME.fullmatch(name)
        if match is not None:
            offsets.append(int(match.group(1)))
    return sorted(offsets)


def read_snapshot(path: Path) -> list[ProducerStateEntry]:
    """The entries of one snapshot file. Raises CorruptSnapshotError if it cannot be trusted,
    FileNotFoundError if it is missing."""
    with open(path, "rb") as f:
        # Refuse by size before reading; the bounded read also covers a file still growing.
        if os.fstat(f.fileno()).st_size > MAX_SNAPSHOT_BYTES:
            raise CorruptSnapshotError(path, f"larger than the limit of {MAX_SNAPSHOT_BYTES} bytes")
        data = f.read(MAX_SNAPSHOT_BYTES + 1)
    if len(data) > MAX_SNAPSHOT_BYTES:
        raise CorruptSnapshotError(path, f"larger than the limit of {MAX_SNAPSHOT_BYTES} bytes")
    if len(data) < _PREFIX.size:
        raise CorruptSnapshotError(path, f"{len(data)} bytes, shorter than the header")
    version, stored_crc = _PREFIX.unpack_from(data)
    if version != SNAPSHOT_VERSION:
        raise CorruptSnapshotError(path, f"version {version}, expected {SNAPSHOT_VERSION}")
    body = data[_PREFIX.size :]
    actual_crc = crc32c(body)
    if actual_crc != stored_crc:
        raise CorruptSnapshotError(path, f"CRC-32C {actual_crc:#010x} != stored {stored_crc:#010x}")
    return _decode_body(path, body)


def _decode_body(path: Path, body: bytes) -> list[ProducerStateEntry]:
    try:
        plain = msgpack.unpackb(
            body,
            max_array_len=len(body),  # every element takes at least one byte
            max_map_len=0,
            max_str_len=0,
            max_bin_len=0,
            max_ext_len=0,
        )
    except (ValueError, TypeError, msgpack.exceptions.StackError) as exc:
        raise CorruptSnapshotError(path, f"body is not valid msgpack: {exc}") from exc
    if type(plain) is not list:
        raise CorruptSnapshotError(path, "body is not an array of producers")
    entries: list[ProducerStateEntry] = []
    seen: set[int] = set()
    for index, raw in enumerate(plain):
        entry = _decode_entry(path, index, raw)
        if entry.producer_id in seen:
            raise CorruptSnapshotError(path, f"producer id {entry.producer_id} appears twice")
        seen.add(entry.producer_id)
        entries.append(entry)
    return entries


def _is_int_array(value: Any, length: int) -> bool:
    # `type(x) is int` also refuses msgpack booleans, which are ints to isinstance.
    return type(value) is list and len(value) == length and all(type(x) is int for x in value)


def _decode_entry(path: Path, index: int, raw: Any) -> ProducerStateEntry:
    if type(raw) is not list or len(raw) != _ENTRY_FIELDS or not _is_int_array(raw[:3], 3):
        raise CorruptSnapshotError(path, f"producer {index} is not [id, epoch, timestamp, batches]")
    producer_id, producer_epoch, last_timestamp, raw_batches = raw
    if producer_id < 0:
        raise CorruptSnapshotError(path, f"producer {index} has id {producer_id}")
    if type(raw_batches) is not list or len(raw_batches) > MAX_CACHED_BATCHES:
        raise CorruptSnapshotError(
            path, f"producer {producer_id}: batches is not an array of at most {MAX_CACHED_BATCHES}"
        )
    batches: deque[BatchMetadata] = deque()
    for raw_batch in raw_batches:
        if not _is_int_array(raw_batch, _BATCH_FIELDS):
            raise CorruptSnapshotError(
                path, f"producer {producer_id}: a batch is not an array of {_BATCH_FIELDS} ints"
            )
        batches.append(BatchMetadata(*raw_batch))
    return ProducerStateEntry(producer_id, producer_epoch, batches, last_timestamp)


def load_latest_snapshot(
    directory: Path, upto: int, logger: Logger | None = None
) -> tuple[list[ProducerStateEntry], int]:
    """(entries, offset) of the newest valid snapshot at or below `upto`; ([], 0) if none.

    Snapshots above `upto` describe offsets the log no longer has and are deleted; corrupt ones
    are deleted (with a warning) and the next older one is tried. Deletions are made durable
    before returning: a stale snapshot that came back after a crash could later be loaded for a
    log that has since been rewritten past its offset.
    """
    log = logger if logger is not None else structlog.get_logger("highwater.log")
    offsets = list_snapshot_offsets(directory)
    deleted = False
    for offset in (o for o in offsets if o > upto):
        snapshot_path(directory, offset).unlink(missing_ok=True)
        log.info("deleted producer snapshot above the log end", offset=offset, upto=upto)
        deleted = True
    result: tuple[list[ProducerStateEntry], int] = ([], 0)
    for offset in reversed([o for o in offsets if o <= upto]):
        path = snapshot_path(directory, offset)
        try:
            result = (read_snapshot(path), offset)
            break
        except FileNotFoundError:
            continue
        except CorruptSnapshotError as exc:
            log.warning("deleted corrupt producer snapshot", offset=offset, error=exc.message)
            path.unlink(missing_ok=True)
            deleted = True
    if deleted:
        fsync_path(directory)
    return result


def delete_snapshots_below(directory: Path, offset: int, keep: int = 2) -> None:
    """Delete snapshots with an offset below `offset` (the log start offset moved past them),
    except that the newest `keep` snapshots are always kept (recovery starts from them)."""
    if keep < 0:
        raise ValueError(f"keep must be non-negative, got {keep}")
    offsets = list_snapshot_offsets(directory)
    candidates = offsets[: max(0, len(offsets) - keep)]
    doomed = [o for o in candidates if o < offset]
    for o in doomed:
        snapshot_path(directory, o).unlink(missing_ok=True)
    if doomed:
        fsync_path(directory)
