"""The simulated disk: a real Log that remembers its batches, and a crash that loses data.

`MirroredLog` is `broker.log.log.Log` itself (every byte goes to real segment files) that
also keeps each batch's (base offset, next offset, leader epoch, CRC) in memory, updated by
the same calls that change the log, so the invariants can compare replicas after every step
without re-reading files. `verify_mirror` re-reads the files to prove the two agree.

`crash` models a power loss: the log is closed without a flush and its active segment is cut
back to a batch boundary at or past the recovery point (everything below it was fsynced; a
rolled segment was fsynced when it rolled), optionally leaving a torn half-batch behind.
The broker's LogManager, restarted without its clean-shutdown marker, then runs the real
crash recovery.

A full disk (`SimDisk`): while a broker's disk is full every segment write in its data dir
fails with ENOSPC after writing a random part of the batch, the way a real write runs out of
space midway; the real LogSegment must cut that part again and the real broker take the dir
offline (KIP-112).
"""

from __future__ import annotations

import bisect
import errno
import os
import random
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Literal

from broker.config.log_config import LogConfig
from broker.log.cleaner import CleaningResult, CleaningTask
from broker.log.log import Log, LogAppendInfo
from broker.log.segment import LogSegment
from protocol.records import check_batches

__all__ = ["BatchInfo", "CrashCut", "MirroredLog", "SimDisk", "SimSegment", "crash"]


@dataclass
class SimDisk:
    """One broker's disk: `full` makes every segment write in its data dir fail."""

    rng: random.Random
    full: bool = False
    failed_writes: int = 0
    torn_bytes_written: list[int] = field(default_factory=list)


class SimSegment(LogSegment):
    """A LogSegment whose writes fail while its broker's disk is full."""

    # data dir -> its disk: a segment lives at <data dir>/<topic>-<partition>/<base>.log.
    disks: ClassVar[dict[Path, SimDisk]] = {}

    def _writev(self, fd: int, parts: tuple[bytes | memoryview, ...]) -> int:
        disk = self.disks.get(self.log_path.parent.parent)
        if disk is None or not disk.full:
            return super()._writev(fd, parts)
        data = b"".join(parts)
        torn = disk.rng.randint(0, len(data) - 1)
        os.write(fd, data[:torn])  # what fitted before the disk ran out
        disk.failed_writes += 1
        disk.torn_bytes_written.append(torn)
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))


@dataclass(frozen=True, slots=True)
class BatchInfo:
    base_offset: int
    next_offset: int
    leader_epoch: int
    crc: int


class MirroredLog(Log):
    """A Log plus an in-memory list of its batch headers (see the module docstring)."""

    segment_class = SimSegment
    batches: list[BatchInfo]
    version: int  # bumped on every change, so checks can skip unchanged logs

    @classmethod
    def open(cls, directory: Path, config: LogConfig, **options: Any) -> Log:
        log = super().open(directory, config, **options)
        assert isinstance(log, MirroredLog)
        log.load_mirror()
        return log

    def load_mirror(self) -> None:
        self.batches = [
            BatchInfo(h.base_offset, h.next_offset, h.partition_leader_epoch, h.crc)
            for h in self.iter_batch_headers()
        ]
        self.version = getattr(self, "version", 0) + 1

    def append_as_leader(self, records: bytes, leader_epoch: int, now_ms: int) -> LogAppendInfo:
        info = super().append_as_leader(records, leader_epoch, now_ms)
        if info.duplicate:  # an idempotent producer's resend: nothing was appended
            return info
        offset = info.first_offset
        for _, header in check_batches(records):
            self.batches.append(
                BatchInfo(offset, offset + header.record_count, leader_epoch, header.crc)
            )
            offset += header.record_count
        self.version += 1
        return info

    def append_as_follower(self, records: bytes, now_ms: int) -> LogAppendInfo:
        info = super().append_as_follower(records, now_ms)
        for _, h in check_batches(records):
            self.batches.append(
                BatchInfo(h.base_offset, h.next_offset, h.partition_leader_epoch, h.crc)
            )
        self.version += 1
        return info

    def truncate_to(self, offset: int) -> bool:
        removed = super().truncate_to(offset)
        if removed:
            end = self.log_end_offset
            del self.batches[self._count_below(end) :]
            self.version += 1
        return removed

    def replace_segments(self, task: CleaningTask, result: CleaningResult, now_ms: int) -> bool:
        swapped = super().replace_segments(task, result, now_ms)
        if swapped:
            self.load_mirror()  # the cleaner rewrote batches below its end offset
        return swapped

    def truncate_fully_and_start_at(self, new_offset: int, now_ms: int) -> None:
        super().truncate_fully_and_start_at(new_offset, now_ms)
        self.batches = []
        self.version += 1

    # -- queries -----------------------------------------------------------------------------

    def _count_below(self, offset: int) -> int:
        """How many batches start below `offset`."""
        return bisect.bisect_left(self.batches, offset, key=lambda b: b.base_offset)

    def batch_at(self, base_offset: int) -> BatchInfo | None:
        i = self._count_below(base_offset)
        if i < len(self.batches) and self.batches[i].base_offset == base_offset:
            return self.batches[i]
        return None

    def batches_below(self, offset: int) -> list[BatchInfo]:
        """The batches that start below `offset` (a HW is always at a batch boundary)."""
        return self.batches[: self._count_below(offset)]

    def verify_mirror(self) -> str | None:
        """None if the in-memory batches match the segment files, else what differs."""
        on_disk = [
            BatchInfo(h.base_offset, h.next_offset, h.partition_leader_epoch, h.crc)
            for h in self.iter_batch_headers()
        ]
        if on_disk != self.batches:
            return f"{self.directory.name}: files hold {on_disk}, mirror says {self.batches}"
        if (self.batches[-1].next_offset if self.batches else None) not in (
            None,
            self.log_end_offset,
        ):
            return f"{self.directory.name}: LEO {self.log_end_offset} != last batch end"
        return None


@dataclass(frozen=True, slots=True)
class CrashCut:
    recovery_point: int
    log_end_offset: int
    kept_offset: int  # the log ends here after the crash (before recovery drops a torn tail)
    torn_bytes: int  # bytes of a half-written batch left after `kept_offset`


def crash(
    log: MirroredLog,
    rng: random.Random,
    torn_tail_probability: float,
    *,
    keep: Literal["random", "all", "flushed"] = "random",
) -> CrashCut:
    """Close without flushing and cut the unflushed tail back to a random batch boundary at
    or past the recovery point, maybe leaving part of the next batch (a torn write).
    `keep="all"` loses nothing (a killed process: the page cache survives); `"flushed"` keeps
    exactly what was flushed."""
    segment = log.active_segment
    boundaries = [(segment.base_offset, 0)]
    sizes: list[int] = []
    for position, header in segment.iter_headers(0, validate=False):
        boundaries.append((header.next_offset, position + header.size))
        sizes.append(header.size)
    recovery_point = log.recovery_point
    choices = [i for i, (offset, _) in enumerate(boundaries) if offset >= recovery_point]
    if not choices:  # the whole active segment was flushed
        choices = [len(boundaries) - 1]
    if keep == "all":
        i = len(boundaries) - 1
    elif keep == "flushed":
        i = choices[0]
    else:
        i = rng.choice(choices)
    kept_offset, position = boundaries[i]
    torn_bytes = 0
    if i < len(sizes) and rng.random() < torn_tail_probability:
        torn_bytes = rng.randint(1, sizes[i] - 1)
    log_end_offset = log.log_end_offset
    path = segment.log_path
    log.close()
    os.truncate(path, position + torn_bytes)
    return CrashCut(recovery_point, log_end_offset, kept_offset, torn_bytes)
