"""A log segment: one `.log` file of whole batches plus its sparse `.index` and `.timeindex`.

Files are named by the segment's base offset, 20 digits (00000000000000000000.log). The
segment only ever looks at batch headers: it never decodes records, except for ListOffsets by
timestamp and by max timestamp, which need the exact record (an admin path, not produce/fetch).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from broker.config.log_config import LogConfig
from broker.log.errors import CorruptIndexError, LogStorageError
from broker.log.offset_index import OffsetIndex
from broker.log.time_index import TimeIndex
from protocol.errors import HighwaterError
from protocol.records import (
    BATCH_HEADER_BYTES,
    BATCH_PREFIX,
    LOG_OVERHEAD_BYTES,
    BatchHeader,
    decode_batch,
    read_header,
    validate_batch,
)

__all__ = ["MAX_RELATIVE_OFFSET", "FileSlice", "LogSegment", "segment_file_name"]

_SCAN_CHUNK_BYTES: Final = 64 * 1024
_RECENT_BATCHES: Final = 64  # batch positions remembered per segment (LogSegment._recent)
MAX_RELATIVE_OFFSET: Final = (1 << 31) - 1
_INDEX_SUFFIXES: Final = (".index", ".timeindex")
_pack_prefix: Final = BATCH_PREFIX.pack  # stamp_prefix without a Python call: runs per append


def segment_file_name(base_offset: int, suffix: str) -> str:
    return f"{base_offset:020d}{suffix}"


@dataclass(frozen=True, slots=True)
class FileSlice:
    """`length` bytes at `position` of an open segment file: sendfile-ready, or `read()`."""

    fd: int
    position: int
    length: int

    def read(self) -> bytes:
        return os.pread(self.fd, self.length, self.position)


class LogSegment:
    def __init__(
        self,
        directory: Path,
        base_offset: int,
        config: LogConfig,
        now_ms: int,
        *,
        suffix: str = "",
    ) -> None:
        """`suffix`: "" for a segment of the log; the cleaner writes ".cleaned" segments that
        become ".swap" ones before they replace the old (Kafka's LocalLog.replaceSegments)."""
        self.base_offset = base_offset
        self.config = config
        self.directory = directory
        self.suffix = suffix
        self.log_path = directory / segment_file_name(base_offset, ".log" + suffix)
        self.fd = os.open(self.log_path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        self.size = os.fstat(self.fd).st_size
        index_paths = [
            directory / segment_file_name(base_offset, s + suffix) for s in _INDEX_SUFFIXES
        ]
        self._indexes_existed = all(path.exists() for path in index_paths)
        self.offset_index = OffsetIndex(index_paths[0], base_offset, config.segment_index_bytes)
        self.time_index = TimeIndex(index_paths[1], base_offset, config.segment_index_bytes)
        self.created_ms = now_ms
        self.next_offset = base_offset  # one past the last offset held here
        self.max_timestamp = -1  # largest batch max_timestamp so far
        self.offset_of_max_timestamp = base_offset
        self.rolling_base_timestamp: int | None = None  # the first batch's max_timestamp
        self._bytes_since_index_entry = 0
        # (position, size) of the last batches appended, by base offset: followers and
        # consumers at the log end fetch from exactly these, so their reads (and the HW's
        # position) skip the index lookup and header scan of translate_offset.
        self._recent: dict[int, tuple[int, int]] = {}

    # -- opening -------------------------------------------------------------------------

    def load(self) -> None:
        """Open after a clean shutdown: trust the indexes, re-read only the tail.

        Raises CorruptIndexError or a record error if anything is inconsistent; the caller
        then runs `recover()`, which rebuilds everything from the log bytes.
        """
        if self.size and not self._indexes_existed:
            raise CorruptIndexError(f"{self.log_path}: index files missing")
        self.offset_index.load()
        self.time_index.load()
        if self.offset_index.last_position() > self.size:
            raise CorruptIndexError(f"{self.offset_index.path}: points past the end of the log")
        ts, offset = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = ts, offset
        self._read_tail(validate=True)

    def _read_tail(self, *, validate: bool) -> None:
        """Set next_offset and timestamps from the batches after the last index entry."""
        self.next_offset = self.base_offset
        if self.size == 0:
            self.rolling_base_timestamp = None
            return
        first = read_header(os.pread(self.fd, BATCH_HEADER_BYTES, 0))
        self.rolling_base_timestamp = first.max_timestamp
        if self.offset_index.keys:
            self.next_offset = self.offset_index.keys[-1]
        start = self.offset_index.last_position()
        for _, header in self.iter_headers(start, validate=validate):
            self.next_offset = header.next_offset
            if header.max_timestamp > self.max_timestamp:
                self.max_timestamp = header.max_timestamp
                self.offset_of_max_timestamp = header.base_offset
        self._bytes_since_index_entry = self.size - start

    def recover(self, expected_base: int | None = None) -> int:
        """Re-validate every batch (CRC, offsets, sizes), rebuild both indexes, and truncate at
        the first bad byte. Returns the number of bytes truncated."""
        self._recent.clear()
        self.offset_index.reset()
        self.time_index.reset()
        self.max_timestamp = -1
        self.offset_of_max_timestamp = self.base_offset
        self.rolling_base_timestamp = None
        self.next_offset = self.base_offset if expected_base is None else expected_base
        self._bytes_since_index_entry = 0
        valid_end = 0
        try:
            for position, header in self.iter_headers(0, validate=True):
                if header.base_offset < self.next_offset:
                    raise LogStorageError(
                        f"{self.log_path}: batch at byte {position} has base offset "
                        f"{header.base_offset} below {self.next_offset}"
                    )
                if header.last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
                    raise LogStorageError(f"{self.log_path}: offset overflow at byte {position}")
                self._index_batch(position, header.base_offset, header)
                valid_end = position + header.size
        except HighwaterError:
            pass  # everything before valid_end is good; the rest is a torn or corrupt tail
        truncated = self.size - valid_end
        if truncated:
            os.ftruncate(self.fd, valid_end)
            self.size = valid_end
        return truncated

    # -- appending -----------------------------------------------------------------------

    def should_roll(
        self, incoming_bytes: int, incoming_max_timestamp: int, last_offset: int, now_ms: int
    ) -> bool:
        """Kafka's roll rules: size, full index, time (by batch timestamps), offset overflow."""
        # Runs per append: plain attribute reads only (is_full is one too).
        size = self.size
        if size == 0:
            return False
        config = self.config
        if size + incoming_bytes > config.segment_bytes:
            return True
        if self.offset_index.is_full or self.time_index.is_full:
            return True
        if last_offset - self.base_offset > MAX_RELATIVE_OFFSET:
            return True
        rolling_base_timestamp = self.rolling_base_timestamp
        if rolling_base_timestamp is not None:
            waited_ms = incoming_max_timestamp - rolling_base_timestamp
        else:
            waited_ms = now_ms - self.created_ms
        return waited_ms > config.segment_ms

    def append(
        self,
        records: bytes | memoryview,
        position: int,
        header: BatchHeader,
        leader_epoch: int | None,
    ) -> None:
        """Append the batch at `position` of `records` at this segment's next offset.

        With a `leader_epoch` (leader append) the first 16 bytes are replaced by the assigned
        base offset and epoch, written with one writev alongside the untouched rest (the CRC
        does not cover them). Without one (follower append) the bytes go as they are.
        `records` may be a memoryview already (the leader's: it is not wrapped again).
        """
        # A follower's batch keeps the leader's offset, past a compacted gap maybe.
        base_offset = self.next_offset if leader_epoch is not None else header.base_offset
        batch_length = header.batch_length
        size = batch_length + LOG_OVERHEAD_BYTES
        whole = position == 0 and size == len(records)
        parts: tuple[bytes | memoryview, ...]
        if leader_epoch is None:
            parts = (records if whole else memoryview(records)[position : position + size],)
        else:
            view = records if type(records) is memoryview else memoryview(records)
            parts = (
                _pack_prefix(base_offset, batch_length, leader_epoch),
                view[16:] if whole else view[position + 16 : position + size],
            )
        self._write(parts, size)
        # _index_batch(self.size, base_offset, header), inlined: this runs per append.
        file_position = self.size
        max_timestamp = header.max_timestamp
        if self.rolling_base_timestamp is None:
            self.rolling_base_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        bytes_since_index_entry = self._bytes_since_index_entry
        if bytes_since_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(base_offset, file_position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            bytes_since_index_entry = 0
        self._bytes_since_index_entry = bytes_since_index_entry + size
        self.next_offset = base_offset + header.last_offset_delta + 1
        self.size = file_position + size
        recent = self._recent
        recent[base_offset] = (file_position, size)
        if len(recent) > _RECENT_BATCHES:
            del recent[next(iter(recent))]  # the oldest: dicts keep insertion order

    def _write(self, parts: tuple[bytes | memoryview, ...], size: int) -> None:
        """Write one batch at the end of the file. If the disk refuses it (ENOSPC, EIO), cut
        what part of it was written, so the file ends at the last whole batch, then raise: a
        torn batch is never left where the next append or a restart would take it for data."""
        try:
            written = self._writev(self.fd, parts)
            while written < size:  # short writes are rare on regular files, but allowed
                written += os.write(self.fd, b"".join(parts)[written:])
        except OSError:
            with contextlib.suppress(OSError):  # if this fails too, recovery cuts it at start
                os.ftruncate(self.fd, self.size)
            raise

    def _writev(self, fd: int, parts: tuple[bytes | memoryview, ...]) -> int:
        """os.writev (the simulator's full disk overrides it)."""
        return os.writev(fd, parts)

    def _index_batch(self, position: int, base_offset: int, header: BatchHeader) -> None:
        """Account for a batch at `position` in the indexes and offsets. `append` has this
        inlined (it runs per append): keep the two in step."""
        max_timestamp = header.max_timestamp
        if self.rolling_base_timestamp is None:
            self.rolling_base_timestamp = max_timestamp
        if max_timestamp > self.max_timestamp:
            self.max_timestamp = max_timestamp
            self.offset_of_max_timestamp = base_offset
        bytes_since_index_entry = self._bytes_since_index_entry
        if bytes_since_index_entry > self.config.index_interval_bytes:
            self.offset_index.append(base_offset, position)
            self.time_index.maybe_append(self.max_timestamp, self.offset_of_max_timestamp)
            bytes_since_index_entry = 0
        self._bytes_since_index_entry = (
            bytes_since_index_entry + header.batch_length + LOG_OVERHEAD_BYTES
        )
        self.next_offset = base_offset + header.last_offset_delta + 1

    # -- reading -------------------------------------------------------------------------

    def iter_headers(
        self, start: int, *, validate: bool, chunk_bytes: int = _SCAN_CHUNK_BYTES
    ) -> Iterator[tuple[int, BatchHeader]]:
        """(position, header) of each batch from `start`, reading the file in chunks."""
        position = start
        size = self.size
        while position < size:
            chunk = os.pread(self.fd, min(chunk_bytes, size - position), position)
            offset = 0
            while offset + BATCH_HEADER_BYTES <= len(chunk):
                header = read_header(chunk, offset)
                batch_end = position + offset + header.size
                if batch_end > size:
                    raise LogStorageError(
                        f"{self.log_path}: torn batch at byte {position + offset}"
                    )
                if validate:
                    if offset + header.size <= len(chunk):
                        validate_batch(chunk, offset, header)
                    else:
                        whole = os.pread(self.fd, header.size, position + offset)
                        validate_batch(whole, 0, header)
                yield position + offset, header
                offset += header.size
            if offset == 0:  # fewer bytes than a header remain at the end
                read_header(chunk, 0)  # raises CorruptRecordError naming the short tail
            position += offset

    def translate_offset(self, offset: int) -> tuple[int, BatchHeader] | None:
        """Position and header of the first batch whose last offset is >= `offset`."""
        _, start = self.offset_index.lookup(offset)
        # The target lies within about one index interval of its index entry: read just that
        # much, so a lookup costs the same in a 1 MiB and a 1 GiB segment.
        chunk_bytes = self.config.index_interval_bytes + 2 * BATCH_HEADER_BYTES
        for position, header in self.iter_headers(start, validate=False, chunk_bytes=chunk_bytes):
            if header.last_offset >= offset:
                return position, header
        return None

    def read(
        self, offset: int, max_bytes: int, max_position: int, min_one_batch: bool
    ) -> FileSlice | None:
        """Bytes from the batch holding `offset`, up to `max_bytes` and `max_position`.

        As in Kafka, the slice may end inside a batch (clients drop a partial last batch);
        with `min_one_batch` the first batch is returned whole even if over `max_bytes`.
        """
        recent = self._recent.get(offset)
        if recent is not None:
            position, batch_size = recent
        else:
            found = self.translate_offset(offset)
            if found is None:
                return None
            position, batch_size = found[0], found[1].size
        limit = min(max_position, self.size)
        if position >= limit:
            return None
        length = min(max_bytes, limit - position)
        if min_one_batch and length < batch_size:
            length = min(batch_size, limit - position)
        return FileSlice(self.fd, position, length)

    def position_of(self, offset: int) -> int:
        """Position of the first batch whose last offset is >= `offset` (the size: none)."""
        recent = self._recent.get(offset)
        if recent is not None:
            return recent[0]
        found = self.translate_offset(offset)
        return found[0] if found is not None else self.size

    def find_offset_by_timestamp(
        self, timestamp: int, min_offset: int = 0
    ) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or past `min_offset` whose timestamp is
        >= `timestamp`, or None."""
        if self.max_timestamp < timestamp:
            return None
        _, from_offset = self.time_index.lookup(timestamp)
        _, start = self.offset_index.lookup(max(from_offset, min_offset))
        for position, header in self.iter_headers(start, validate=False):
            if header.max_timestamp >= timestamp and header.last_offset >= min_offset:
                batch = decode_batch(os.pread(self.fd, header.size, position))
                for record in batch.records:
                    if record.offset >= min_offset and record.timestamp_ms >= timestamp:
                        return record.offset, record.timestamp_ms
        return None

    def max_timestamp_below(self, max_offset: int) -> tuple[int, int] | None:
        """(timestamp, batch base offset) of the first batch holding this segment's largest
        timestamp among the batches below `max_offset` (a batch boundary), or None."""
        if self.max_timestamp < 0 or self.base_offset >= max_offset:
            return None
        if self.offset_of_max_timestamp < max_offset:
            return self.max_timestamp, self.offset_of_max_timestamp
        best: tuple[int, int] | None = None  # the largest lies past the limit: scan below it
        for _, header in self.iter_headers(0, validate=False):
            if header.base_offset >= max_offset:
                break
            if best is None or header.max_timestamp > best[0]:
                best = header.max_timestamp, header.base_offset
        return best

    def record_with_max_timestamp(self, base_offset: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record with the largest timestamp in the batch
        at `base_offset` (KIP-734); decodes that one batch."""
        found = self.translate_offset(base_offset)
        if found is None:
            return None
        position, header = found
        batch = decode_batch(os.pread(self.fd, header.size, position))
        if not batch.records:  # a producer's last batch the cleaner emptied: the record went,
            return header.last_offset, header.max_timestamp  # the batch's last offset stands in
        best = max(batch.records, key=lambda r: r.timestamp_ms)  # the first of equals
        return best.offset, best.timestamp_ms

    def largest_timestamp(self) -> int:
        """For retention: the largest record timestamp, or the file's mtime if none."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return int(os.fstat(self.fd).st_mtime * 1000)

    # -- changing ------------------------------------------------------------------------

    def truncate_to(self, offset: int) -> int:
        """Remove every batch holding an offset >= `offset`. A batch that straddles `offset`
        goes whole (batches are atomic). Returns the number of bytes removed."""
        found = self.translate_offset(offset)
        if found is None:
            return 0
        self._recent.clear()
        position, header = found
        cut_from = min(header.base_offset, offset)
        self.offset_index.truncate_to(cut_from)
        self.time_index.truncate_to(cut_from)
        removed = self.size - position
        os.ftruncate(self.fd, position)
        self.size = position
        ts, ts_offset = self.time_index.last_entry()
        self.max_timestamp, self.offset_of_max_timestamp = ts, ts_offset
        self._read_tail(validate=False)
        return removed

    def flush(self, *, indexes: bool = True) -> None:
        """fsync the log data, and the indexes unless told not to (an active segment's indexes
        are rebuilt by recovery after a crash, so per-flush fsyncs of them buy nothing)."""
        os.fsync(self.fd)
        if indexes:
            self.offset_index.flush()
            self.time_index.flush()

    def close(self) -> None:
        self.offset_index.close()
        self.time_index.close()
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        self.offset_index.delete()
        self.time_index.delete()
        self.log_path.unlink(missing_ok=True)

    def change_suffix(self, suffix: str) -> None:
        """Rename the three files (open descriptors stay valid): indexes first, the .log
        last, so a .log with a given suffix always has its indexes next to it."""
        for index, name in ((self.offset_index, ".index"), (self.time_index, ".timeindex")):
            index.rename(self.directory / segment_file_name(self.base_offset, name + suffix))
        log_path = self.directory / segment_file_name(self.base_offset, ".log" + suffix)
        os.replace(self.log_path, log_path)
        self.log_path = log_path
        self.suffix = suffix

    def __repr__(self) -> str:
        return f"LogSegment(base={self.base_offset}, next={self.next_offset}, size={self.size})"
