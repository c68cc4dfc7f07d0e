"""One partition's log (Kafka's LocalLog with the log half of UnifiedLog): its segments, log
start offset, LEO, recovery point, leader-epoch cache and producer state.

The leader checks each producer batch (validator.py, records included), stamps base offset and
leader epoch into its first 16 bytes and writes the rest as it came; followers append the
leader's batches as they are; reads return file slices. Nothing here knows the high watermark
(the replica layer passes it as `max_offset`). docs/architecture.md ("broker/log/") describes
appending, producer state snapshots and recovery. One class past 500 lines, as Kafka's
LocalLog is: its sections (opening, appending, reading, truncation and retention, the
cleaner's swap, flushing) all change the one segment list and LEO, which nothing else may.
"""

from __future__ import annotations

import bisect
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final, NamedTuple

import structlog

from broker.config.log_config import LogConfig
from broker.log.cleaner import (
    CLEANED_SUFFIX,
    CleanedGroup,
    CleaningResult,
    CleaningTask,
    SegmentRef,
)
from broker.log.errors import (
    LogStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from broker.log.leader_epoch_cache import LeaderEpochCache
from broker.log.loader import (
    LEADER_EPOCH_CHECKPOINT_FILE,
    SWAP_SUFFIX,
    finish_swaps,
    open_epoch_cache,
    remove_stray_files,
    segment_bases,
)
from broker.log.producer_snapshot import (
    delete_snapshots_below,
    list_snapshot_offsets,
    load_latest_snapshot,
    snapshot_path,
    write_snapshot,
)
from broker.log.producer_state import DuplicateBatch, ProducerStateManager, has_producer_id
from broker.log.segment import MAX_RELATIVE_OFFSET, FileSlice, LogSegment
from broker.log.validator import (
    check_headers,
    check_producer_batch,
    check_producer_records,
    raise_bad_request_size,
    raise_batch_too_large,
    validate_batches,
)
from protocol.errors import HighwaterError, InvalidRecordError
from protocol.record_check import check_records
from protocol.records import (
    LOG_OVERHEAD_BYTES,
    NO_PRODUCER_ID,
    BatchHeader,
    check_batches,
)
from protocol.stats import Timings

__all__ = ["LEADER_EPOCH_CHECKPOINT_FILE", "FetchDataInfo", "Log", "LogAppendInfo"]

_tuple_new: Final = tuple.__new__


class LogAppendInfo(NamedTuple):
    first_offset: int
    last_offset: int
    max_timestamp: int
    log_start_offset: int
    batch_count: int
    record_count: int
    byte_count: int
    log_append_time_ms: int = -1  # CreateTime only: the producer's timestamps are kept
    duplicate: bool = False  # an idempotent producer's resend: nothing was appended


@dataclass(frozen=True, slots=True)
class FetchDataInfo:
    fetch_offset: int
    slice: FileSlice | None  # None: nothing to return at this offset (yet)

    def read(self) -> bytes:
        return b"" if self.slice is None else self.slice.read()


class Log:
    """Use `Log.open(...)`; the constructor only wires already-opened parts together."""

    # The segment type every segment of this log is made of (the simulator's disk fails some
    # writes of its own subclass).
    segment_class: type[LogSegment] = LogSegment
    # Where flushes are timed (Kafka's LogFlushRateAndTimeMs); the LogManager sets its own.
    flush_timer: Timings | None = None

    def __init__(
        self,
        directory: Path,
        config: LogConfig,
        segments: list[LogSegment],
        log_start_offset: int,
        recovery_point: int,
        epoch_cache: LeaderEpochCache,
    ) -> None:
        assert segments, "a log always has an active segment"
        self.directory = directory
        self._segments = segments
        self.config = config
        self._bases = [s.base_offset for s in segments]
        self.log_start_offset = log_start_offset
        self.recovery_point = recovery_point
        self.leader_epoch_cache = epoch_cache
        self._unflushed_records = 0
        # The flush.ms timer, on the monotonic clock maybe_flush is given; None: not started,
        # or flushed since (by flush.messages, a roll): the next check starts it again.
        self._flush_timer_from_ms: int | None = None
        self._logger = structlog.get_logger("highwater.log").bind(log=directory.name)
        self.producer_state = ProducerStateManager()
        self._load_producer_state()

    # -- opening and recovery --------------------------------------------------------------

    @classmethod
    def open(
        cls,
        directory: Path,
        config: LogConfig,
        *,
        now_ms: int,
        recovery_point: int = 0,
        log_start_offset: int = 0,
        clean_shutdown: bool = True,
    ) -> Log:
        """Open (creating if needed) the log in `directory`.

        After an unclean shutdown every segment that may hold offsets at or past
        `recovery_point` is re-validated batch by batch; a torn or corrupt tail is truncated
        at its first bad byte and every later segment deleted. Missing or corrupt indexes are
        rebuilt; so is a corrupt or missing leader-epoch checkpoint.
        """
        logger = structlog.get_logger("highwater.log").bind(log=directory.name)
        directory.mkdir(parents=True, exist_ok=True)
        swapped = finish_swaps(directory, config, now_ms)
        if swapped:
            logger.warning("finished interrupted segment swaps", bases=swapped)
        remove_stray_files(directory)
        bases = segment_bases(directory)
        segments: list[LogSegment] = []
        for i, base in enumerate(bases):
            segment = cls.segment_class(directory, base, config, now_ms)
            next_base = bases[i + 1] if i + 1 < len(bases) else None
            must_recover = not clean_shutdown and (next_base is None or next_base > recovery_point)
            if not must_recover:
                try:
                    segment.load()
                except HighwaterError as exc:
                    logger.warning(
                        "segment failed its check, recovering", base=base, error=str(exc)
                    )
                    must_recover = True
            truncated = segment.recover() if must_recover else 0
            segments.append(segment)
            if truncated:
                logger.warning(
                    "truncated corrupt log tail",
                    base=base,
                    bytes=truncated,
                    leo=segment.next_offset,
                )
                for later in bases[i + 1 :]:
                    cls.segment_class(directory, later, config, now_ms).delete()
                    logger.warning("deleted segment after corrupt tail", base=later)
                break
        if not segments:
            segments.append(cls.segment_class(directory, log_start_offset, config, now_ms))
        log_end_offset = segments[-1].next_offset
        start = min(max(log_start_offset, segments[0].base_offset), log_end_offset)
        epoch_cache = open_epoch_cache(directory, segments, start, logger)
        epoch_cache.truncate_from_end(log_end_offset)
        epoch_cache.truncate_from_start(start)
        if not clean_shutdown:
            for segment in segments:
                if segment.next_offset > recovery_point:
                    segment.flush()
        return cls(directory, config, segments, start, log_end_offset, epoch_cache)

    # -- state -----------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        """A topic's config (it arrives after the log was opened with the broker's defaults,
        e.g. at start-up) applies to the open segments too: the active one rolls at the
        topic's segment.bytes / segment.ms, not at the defaults it was opened with."""
        self._config = config
        for segment in self._segments:
            segment.config = config

    @property
    def log_end_offset(self) -> int:
        """LEO: the offset the next appended record gets."""
        return self._segments[-1].next_offset

    @property
    def active_segment(self) -> LogSegment:
        return self._segments[-1]

    @property
    def segments(self) -> tuple[LogSegment, ...]:
        return tuple(self._segments)

    @property
    def size_bytes(self) -> int:
        return sum(s.size for s in self._segments)

    def latest_epoch(self) -> int:
        return self.leader_epoch_cache.latest_epoch()

    def end_offset_for_epoch(self, epoch: int) -> tuple[int, int]:
        """KIP-279: (largest epoch <= `epoch`, its end offset), for OffsetForLeaderEpoch."""
        return self.leader_epoch_cache.end_offset_for(epoch, self.log_end_offset)

    # -- appending -------------------------------------------------------------------------

    def append_as_leader(self, records: bytes, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        """Validate producer batches, assign offsets from the LEO, stamp `leader_epoch`, append.

        A request with any bad batch is rejected whole: nothing is written. A resend of one of
        an idempotent producer's last batches appends nothing and reports the original offsets;
        a sequence gap or a fenced epoch is refused (OUT_OF_ORDER_SEQUENCE_NUMBER,
        INVALID_PRODUCER_EPOCH) before anything is written.
        """
        # One batch is the usual produce request: it takes the steps of _validate,
        # _append_batches_as_leader and _append, in the same order, without their loops,
        # lists and extra calls (this runs per produce). Other requests take those.
        config = self._config
        byte_count = len(records)
        if not byte_count or byte_count > config.segment_bytes:
            raise_bad_request_size(records, config)
        view = memoryview(records)  # one view for the CRC check and the write
        headers = check_batches(view)
        if len(headers) != 1:
            check_headers(headers, config, from_producer=True)
            check_producer_records(view, headers, config)
            return self._append_batches_as_leader(records, headers, leader_epoch, now_ms)
        header = headers[0][1]
        if header.batch_length > config.max_message_bytes - LOG_OVERHEAD_BYTES:
            raise_batch_too_large(0, header, config)
        if (
            header.base_offset
            or header.attributes
            or header.record_count != header.last_offset_delta + 1
        ):
            check_producer_batch(0, header)
        check_records(
            view, 0, header, max_record_bytes=config.max_message_bytes, keyed=config.compact
        )
        idempotent = header.producer_id != NO_PRODUCER_ID
        if idempotent:
            duplicate = self.producer_state.check_leader_append([header])
            if duplicate is not None:
                return self._duplicate_info(duplicate)
        segment = self._segments[-1]
        first_offset = segment.next_offset
        if leader_epoch >= 0:
            # assign() is a no-op for the latest epoch at a later offset: skip the call.
            latest = self.leader_epoch_cache.latest
            if latest is None or leader_epoch != latest.epoch or first_offset < latest.start_offset:
                self.leader_epoch_cache.assign(leader_epoch, first_offset)
        record_count = header.record_count
        if record_count - 1 > MAX_RELATIVE_OFFSET:
            raise RecordListTooLargeError(f"{record_count} offsets in one request")
        last_offset = first_offset + record_count - 1
        max_timestamp = header.max_timestamp
        if segment.should_roll(byte_count, max_timestamp, last_offset, now_ms):
            segment = self.roll(now_ms)
        segment.append(view, 0, header, leader_epoch)
        unflushed_records = self._unflushed_records + record_count
        self._unflushed_records = unflushed_records
        if unflushed_records >= config.flush_messages:
            self.flush()
        if idempotent:
            self.producer_state.update(header._replace(base_offset=first_offset))
        # tuple.__new__ skips the NamedTuple's Python-level __new__; the last two fields are
        # LogAppendInfo's defaults (CreateTime, not a duplicate).
        return _tuple_new(
            LogAppendInfo,
            (
                first_offset,
                last_offset,
                max_timestamp,
                self.log_start_offset,
                1,
                record_count,
                byte_count,
                -1,
                False,
            ),
        )

    def _append_batches_as_leader(
        self,
        records: bytes,
        headers: list[tuple[int, BatchHeader]],
        leader_epoch: int,
        now_ms: int,
    ) -> LogAppendInfo:
        """append_as_leader of a request holding several batches (validated)."""
        idempotent = any(h.producer_id != NO_PRODUCER_ID for _, h in headers)
        if idempotent:
            duplicate = self.producer_state.check_leader_append([h for _, h in headers])
            if duplicate is not None:
                return self._duplicate_info(duplicate)
        if leader_epoch >= 0:
            self.leader_epoch_cache.assign(leader_epoch, self._segments[-1].next_offset)
        info = self._append(records, headers, leader_epoch, now_ms)
        if idempotent:
            offset = info.first_offset
            for _, header in headers:
                self.producer_state.update(header._replace(base_offset=offset))
                offset += header.record_count
        return info

    def _duplicate_info(self, duplicate: DuplicateBatch) -> LogAppendInfo:
        self._logger.info(
            "duplicate batch from an idempotent producer; not appended",
            first_offset=duplicate.first_offset,
            last_offset=duplicate.last_offset,
        )
        return LogAppendInfo(
            duplicate.first_offset,
            duplicate.last_offset,
            duplicate.max_timestamp,
            self.log_start_offset,
            0,
            0,
            0,
            duplicate=True,
        )

    def append_as_follower(self, records: bytes, now_ms: int) -> LogAppendInfo:
        """Append the leader's batches as they are, at or past the LEO and in order. A gap is
        the leader's log compaction at work (offsets are kept, records removed)."""
        headers = self._validate(records, from_producer=False)
        expected = self._segments[-1].next_offset
        for _, header in headers:
            if header.base_offset < expected:
                raise InvalidRecordError(
                    f"follower append: batch base offset {header.base_offset} below {expected}"
                )
            expected = header.next_offset
        for _, header in headers:
            if header.partition_leader_epoch >= 0:
                self.leader_epoch_cache.assign(header.partition_leader_epoch, header.base_offset)
        info = self._append(records, headers, None, now_ms)
        # Followers keep producer state too, so a new leader deduplicates retries.
        for _, header in headers:
            if has_producer_id(header):
                self.producer_state.update(header)
        return info

    def _validate(self, records: bytes, *, from_producer: bool) -> list[tuple[int, BatchHeader]]:
        """(position, header) of every batch, or an error for the first bad one."""
        return validate_batches(records, self._config, from_producer=from_producer)

    def _append(
        self,
        records: bytes,
        headers: list[tuple[int, BatchHeader]],
        leader_epoch: int | None,
        now_ms: int,
    ) -> LogAppendInfo:
        """Write validated batches at the LEO; `leader_epoch` None keeps their offsets/epochs."""
        segment = self._segments[-1]
        batch_count = len(headers)
        if batch_count == 1:  # the common case, kept loop-free: this runs per produce
            header = headers[0][1]
            record_count = header.record_count
            max_timestamp = header.max_timestamp
        else:
            record_count = sum(header.record_count for _, header in headers)
            max_timestamp = max(header.max_timestamp for _, header in headers)
        if leader_epoch is None:  # a follower's: offsets as the leader gave them, maybe gaps
            first_offset = headers[0][1].base_offset
            last_offset = headers[-1][1].next_offset - 1
        else:
            first_offset = segment.next_offset
            last_offset = first_offset + record_count - 1
        if last_offset - first_offset > MAX_RELATIVE_OFFSET:
            # One request must fit one segment's int32 relative offsets.
            raise RecordListTooLargeError(
                f"{last_offset - first_offset + 1} offsets in one request"
            )
        byte_count = len(records)
        if segment.should_roll(byte_count, max_timestamp, last_offset, now_ms):
            segment = self.roll(now_ms)
        for position, header in headers:
            segment.append(records, position, header, leader_epoch)
        unflushed_records = self._unflushed_records + record_count
        self._unflushed_records = unflushed_records
        if unflushed_records >= self._config.flush_messages:
            self.flush()
        # tuple.__new__ skips the NamedTuple's Python-level __new__; the last two fields are
        # LogAppendInfo's defaults (CreateTime, not a duplicate).
        return _tuple_new(
            LogAppendInfo,
            (
                first_offset,
                last_offset,
                max_timestamp,
                self.log_start_offset,
                batch_count,
                record_count,
                byte_count,
                -1,
                False,
            ),
        )

    def roll(self, now_ms: int) -> LogSegment:
        """Start a new active segment at the LEO; the old one is flushed (recovery point)."""
        old = self._segments[-1]
        if old.size == 0:
            return old
        new = self.segment_class(self.directory, old.next_offset, self.config, now_ms)
        self._segments.append(new)
        self._bases.append(new.base_offset)
        old.flush()
        self.recovery_point = max(self.recovery_point, new.base_offset)
        # After the flush: the snapshot never describes batches a crash could still lose.
        self._take_producer_snapshot()
        self._logger.info("rolled segment", base=new.base_offset)
        return new

    # -- producer state --------------------------------------------------------------------

    def _take_producer_snapshot(self) -> None:
        """Snapshot the producer state at the LEO; keep the two newest snapshots."""
        offset = self.log_end_offset
        write_snapshot(self.directory, offset, self.producer_state.snapshot_entries())
        delete_snapshots_below(self.directory, offset, keep=2)

    def _load_producer_state(self) -> None:
        """The newest valid snapshot at or below the LEO, then every batch after it (headers
        only). Snapshots above the LEO (a truncated tail) are deleted on the way.

        The replay starts at the snapshot, not at the log start offset: a log start moved past
        the snapshot inside its segment leaves the batches between in the file, and skipping
        them would put their producers back at the snapshot's sequences (refusing their next
        batch). A snapshot older than the first segment misses batches deleted since: it is
        not used, and the state is replayed from the first batch on (Kafka's rebuild from the
        log start; a producer whose batches are all gone is then unknown, never behind)."""
        log_end_offset = self.log_end_offset
        entries, offset = load_latest_snapshot(self.directory, log_end_offset, self._logger)
        start = offset
        first_offset = self._segments[0].base_offset
        if offset < first_offset:
            entries, start = [], first_offset
        self.producer_state.reset(entries, start)
        replayed = 0
        for segment in self._segments:
            if segment.next_offset <= start:
                continue
            for _, header in segment.iter_headers(0, validate=False):
                if header.base_offset >= start:
                    self.producer_state.update(header)
                    replayed += 1
        self.producer_state.map_end_offset = log_end_offset
        if replayed:
            self._logger.info(
                "producer state rebuilt from the log",
                snapshot_offset=offset,
                batches_replayed=replayed,
                producers=len(self.producer_state.producers),
            )

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget producers idle longer than producer.id.expiration.ms; how many."""
        return len(
            self.producer_state.remove_expired(now_ms, self.config.producer_id_expiration_ms)
        )

    # -- reading ---------------------------------------------------------------------------

    def read(
        self,
        offset: int,
        max_bytes: int,
        *,
        max_offset: int | None = None,
        min_one_batch: bool = True,
    ) -> FetchDataInfo:
        """Bytes of whole batches from the one holding `offset`, stopping before `max_offset`
        (consumers pass the HW; followers read to the LEO)."""
        log_end_offset = self.log_end_offset
        if offset < self.log_start_offset or offset > log_end_offset:
            raise OffsetOutOfRangeError(
                f"offset {offset} outside [{self.log_start_offset}, {log_end_offset}]"
            )
        limit = log_end_offset if max_offset is None else min(max_offset, log_end_offset)
        i = max(0, bisect.bisect_right(self._bases, offset) - 1)
        while offset < limit and i < len(self._segments):
            segment = self._segments[i]
            max_position = segment.size
            if limit < segment.next_offset:
                max_position = segment.position_of(limit)
            data = segment.read(offset, max_bytes, max_position, min_one_batch)
            if data is not None:
                return FetchDataInfo(offset, data)
            i += 1
        return FetchDataInfo(offset, None)

    def fetch_offset_by_timestamp(self, timestamp: int) -> tuple[int, int] | None:
        """(offset, timestamp) of the first record at or after `timestamp`, or None."""
        for segment in self._segments:
            if segment.next_offset <= self.log_start_offset:
                continue
            found = segment.find_offset_by_timestamp(timestamp, self.log_start_offset)
            if found is not None:
                return found
        return None

    def fetch_offset_of_max_timestamp(self, max_offset: int) -> tuple[int, int] | None:
        """KIP-734 (ListOffsets -3): (offset, timestamp) of the first record with the largest
        timestamp below `max_offset` (the HW for consumers), or None."""
        best: tuple[int, int] | None = None
        holder: LogSegment | None = None
        for segment in self._segments:
            if segment.next_offset <= self.log_start_offset:
                continue
            found = segment.max_timestamp_below(max_offset)
            if found is not None and (best is None or found[0] > best[0]):
                best, holder = found, segment
        if best is None or holder is None:
            return None
        return holder.record_with_max_timestamp(best[1])

    def iter_batch_headers(self) -> Iterator[BatchHeader]:
        """Every batch header in offset order (tools and tests; reads the whole log)."""
        for segment in self._segments:
            yield from (h for _, h in segment.iter_headers(0, validate=False))

    # -- truncation and retention ----------------------------------------------------------

    def truncate_to(self, offset: int) -> bool:
        """Remove all records at offsets >= `offset` (a follower dropping a divergent tail).
        Returns True if anything was removed."""
        if offset < 0:
            raise ValueError(f"cannot truncate to negative offset {offset}")
        if offset >= self.log_end_offset:
            return False
        if offset <= self.log_start_offset:
            self.truncate_fully_and_start_at(offset, now_ms=self.active_segment.created_ms)
            return True
        while len(self._segments) > 1 and self._segments[-1].base_offset >= offset:
            self._segments.pop().delete()
            self._bases.pop()
        self._segments[-1].truncate_to(offset)
        new_end = self.log_end_offset
        self.leader_epoch_cache.truncate_from_end(new_end)
        self.recovery_point = min(self.recovery_point, new_end)
        self._logger.info("truncated", to_offset=offset, log_end_offset=new_end)
        self._load_producer_state()
        return True

    def truncate_fully_and_start_at(self, new_offset: int, now_ms: int) -> None:
        """Delete everything; the log restarts empty at `new_offset`."""
        for segment in self._segments:
            segment.delete()
        self._segments = [self.segment_class(self.directory, new_offset, self.config, now_ms)]
        self._bases = [new_offset]
        self.log_start_offset = new_offset
        self.recovery_point = new_offset
        self.leader_epoch_cache.clear()
        for offset in list_snapshot_offsets(self.directory):
            snapshot_path(self.directory, offset).unlink(missing_ok=True)
        self.producer_state.reset([], new_offset)
        self._logger.info("truncated fully", start_offset=new_offset)

    def maybe_increment_log_start_offset(self, offset: int) -> None:
        """Advance the log start offset (never past the LEO) and delete segments below it."""
        if offset <= self.log_start_offset:
            return
        if offset > self.log_end_offset:
            raise OffsetOutOfRangeError(f"log start offset {offset} past LEO {self.log_end_offset}")
        self.log_start_offset = offset
        self.leader_epoch_cache.truncate_from_start(offset)
        while len(self._segments) > 1 and self._segments[1].base_offset <= offset:
            self._delete_oldest_segment()

    def delete_retention_breached_segments(self, now_ms: int) -> int:
        """Delete whole segments past `retention.ms` or beyond `retention.bytes`, oldest first.
        Returns how many were deleted. The active segment goes too only if it is expired; a
        new empty one is rolled first, as Kafka does."""
        if not self._config.delete:
            return 0  # cleanup.policy=compact: the cleaner, not retention, keeps it bounded
        count = 0
        retention_ms = self.config.retention_ms
        retention_bytes = self.config.retention_bytes
        if retention_ms >= 0:
            expired = 0
            for segment in self._segments:
                if now_ms - segment.largest_timestamp() <= retention_ms or segment.size == 0:
                    break
                expired += 1
            count += self._delete_oldest(expired, now_ms)
        if retention_bytes >= 0:
            excess = self.size_bytes - retention_bytes
            over = 0
            for segment in self._segments[:-1]:
                if excess - segment.size < 0:
                    break
                excess -= segment.size
                over += 1
            count += self._delete_oldest(over, now_ms)
        return count

    def _delete_oldest(self, count: int, now_ms: int) -> int:
        if count <= 0:
            return 0
        if count >= len(self._segments):
            self.roll(now_ms)
        for _ in range(count):
            self._delete_oldest_segment()
        start = self._segments[0].base_offset
        if start > self.log_start_offset:
            self.log_start_offset = start
            self.leader_epoch_cache.truncate_from_start(start)
        self._logger.info("deleted segments by retention", count=count, log_start_offset=start)
        return count

    def _delete_oldest_segment(self) -> None:
        if len(self._segments) <= 1:
            raise LogStorageError("cannot delete the active segment")
        self._segments.pop(0).delete()
        self._bases.pop(0)

    # -- compaction (the log cleaner's two steps around its work in broker/log/cleaner.py) --

    def cleaning_task(
        self, first_dirty_offset: int, end_offset: int, now_ms: int, max_map_keys: int
    ) -> CleaningTask:
        """What `cleaner.clean` needs to clean this log below `end_offset` (a boundary of a
        segment that is not the active one)."""
        refs = tuple(
            SegmentRef(s.base_offset, s.size)
            for s in self._segments[:-1]
            if s.base_offset < end_offset
        )
        return CleaningTask(
            self.directory,
            self._config,
            refs,
            first_dirty_offset,
            end_offset,
            now_ms,
            self.producer_state.last_offsets(),
            max_map_keys,
        )

    def replace_segments(self, task: CleaningTask, result: CleaningResult, now_ms: int) -> bool:
        """Swap the cleaned segments in, group by group (Kafka's LocalLog.replaceSegments):
        `.cleaned` -> `.swap`, the old segments deleted, `.swap` -> `.log`, so a crash at any
        point leaves the old segments or the new ones (LogLoader finishes a swap). False,
        and the cleaned files deleted, if the log changed meanwhile (truncated, retention,
        deleted): the cleaning is then void."""
        by_base = {s.base_offset: s for s in self._segments[:-1]}
        planned = {r.base_offset: r.size for r in task.segments}
        unchanged = all(
            base in by_base and by_base[base].size == planned[base]
            for group in result.groups
            for base in group.replaces
        )
        if not unchanged:
            for group in result.groups:
                if group.size:
                    LogSegment(
                        self.directory,
                        group.base_offset,
                        self._config,
                        now_ms,
                        suffix=CLEANED_SUFFIX,
                    ).delete()
            return False
        for group in result.groups:
            self._swap_in(group, by_base, now_ms)
        self._bases = [s.base_offset for s in self._segments]
        return True

    def _swap_in(self, group: CleanedGroup, by_base: dict[int, LogSegment], now_ms: int) -> None:
        old = [by_base[base] for base in group.replaces]
        new: LogSegment | None = None
        if group.size:
            new = LogSegment(
                self.directory, group.base_offset, self._config, now_ms, suffix=CLEANED_SUFFIX
            )
            new.recover()  # indexes and next offset from the bytes the cleaner wrote
            new.flush()
            new.change_suffix(SWAP_SUFFIX)
        first = self._segments.index(old[0])
        for segment in old:
            segment.delete()
        replacement = [new] if new is not None else []
        self._segments[first : first + len(old)] = replacement
        if new is not None:
            new.change_suffix("")

    # -- durability ------------------------------------------------------------------------

    def flush(self, *, indexes: bool = False) -> None:
        """fsync every segment that holds data past the recovery point; advance it to the LEO.

        The active segment's indexes are fsynced only with `indexes` (clean shutdown): after a
        crash recovery rebuilds them from the log, which is what the fsync here protects."""
        started = time.perf_counter()
        active = self._segments[-1]
        for segment in self._segments:
            if segment is active:
                segment.flush(indexes=indexes)
            elif segment.next_offset > self.recovery_point:
                segment.flush()
        if self.flush_timer is not None:
            self.flush_timer.observe(time.perf_counter() - started)
        self.recovery_point = self.log_end_offset
        self._unflushed_records = 0
        self._flush_timer_from_ms = None

    def maybe_flush(self, now_ms: int) -> bool:
        """The `flush.ms` policy: flush if records are waiting and the interval has passed.
        Unlike the rest of the log, `now_ms` here is the monotonic clock: a timer, which a
        wall clock stepped back would stall for the length of the step. A flush elsewhere
        restarts the interval at the next check (Kafka's lastFlushTime, a check late)."""
        if self._flush_timer_from_ms is None:
            self._flush_timer_from_ms = now_ms
        if self._unflushed_records and now_ms - self._flush_timer_from_ms >= self.config.flush_ms:
            self.flush()
            self._flush_timer_from_ms = now_ms
            return True
        return False

    def close(self) -> None:
        """Close the files, after a producer state snapshot at the LEO (a clean restart then
        replays nothing)."""
        try:
            self._take_producer_snapshot()
        except OSError as exc:
            self._logger.warning("producer snapshot failed at close", error=str(exc))
        self._close_segments()

    def close_files(self) -> None:
        """Close the files and nothing else (a failed log dir: nothing more is written)."""
        self._close_segments()

    def _close_segments(self) -> None:
        for segment in self._segments:
            segment.close()

    def delete(self) -> None:
        """Remove the whole partition directory."""
        self._close_segments()
        shutil.rmtree(self.directory, ignore_errors=True)
