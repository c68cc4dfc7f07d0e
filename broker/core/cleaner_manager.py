"""Which log the cleaner cleans next, and how far (Kafka's LogCleanerManager). IO-free.

A compacted log's dirty part starts at its checkpointed first dirty offset and ends at the
first uncleanable offset: the active segment, the high watermark (uncommitted records may be
truncated away), and segments younger than min.compaction.lag.ms; only whole segments below
it are cleaned. The filthiest log whose dirty ratio reaches min.cleanable.dirty.ratio is
chosen, or any whose dirty records are older than max.compaction.lag.ms. The trio shell
(broker/log_cleaner.py) and the simulator both ask this core.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from broker.config.log_config import NEVER_MS
from broker.log.log import Log
from protocol.topic_partition import TopicPartition

__all__ = ["CleanCandidate", "CleanerManager"]


@dataclass(frozen=True, slots=True)
class CleanCandidate:
    tp: TopicPartition
    first_dirty_offset: int
    end_offset: int  # the end of the last whole segment cleaned; nothing above is touched
    clean_bytes: int
    dirty_bytes: int
    max_lag_due: bool  # dirty for longer than max.compaction.lag.ms

    @property
    def dirty_ratio(self) -> float:
        total = self.clean_bytes + self.dirty_bytes
        return self.dirty_bytes / total if total else 0.0


@dataclass(slots=True)
class CleanerManager:
    # tp -> first dirty offset (the cleaner-offset-checkpoint): below it, cleaned before.
    checkpoints: dict[TopicPartition, int] = field(default_factory=dict)
    in_progress: set[TopicPartition] = field(default_factory=set)
    # Logs a cleaning found corrupt: skipped until the broker restarts (Kafka's
    # LogCleanerManager.uncleanablePartitions).
    uncleanable: set[TopicPartition] = field(default_factory=set)

    def choose(
        self, logs: Mapping[TopicPartition, tuple[Log, int]], now_ms: int
    ) -> CleanCandidate | None:
        """The log to clean now (each with its high watermark), or None; Kafka's rule: the
        filthiest that is due."""
        best: CleanCandidate | None = None
        for tp, (log, high_watermark) in sorted(logs.items()):
            if tp in self.in_progress or tp in self.uncleanable:
                continue
            candidate = self.candidate(tp, log, high_watermark, now_ms)
            if candidate is None or not (
                candidate.max_lag_due
                or candidate.dirty_ratio >= log.config.min_cleanable_dirty_ratio
            ):
                continue
            if best is None or _filthier(candidate, best):
                best = candidate
        return best

    def candidate(
        self, tp: TopicPartition, log: Log, high_watermark: int, now_ms: int
    ) -> CleanCandidate | None:
        config = log.config
        if not config.compact:
            return None
        first_dirty = self.checkpoints.get(tp, log.log_start_offset)
        if not log.log_start_offset <= first_dirty <= log.log_end_offset:
            first_dirty = log.log_start_offset  # truncated or deleted below it: start over
        bound = min(high_watermark, log.active_segment.base_offset)
        youngest_ms = now_ms - config.min_compaction_lag_ms
        end = first_dirty
        clean_bytes = dirty_bytes = 0
        first_dirty_timestamp: int | None = None
        for segment in log.segments[:-1]:
            if segment.next_offset <= first_dirty:
                clean_bytes += segment.size
                continue
            if segment.next_offset > bound or segment.largest_timestamp() > youngest_ms:
                break
            if first_dirty_timestamp is None:
                first_dirty_timestamp = segment.largest_timestamp()
            dirty_bytes += segment.size
            end = segment.next_offset
        if end <= first_dirty or dirty_bytes == 0:
            return None
        max_lag_due = (
            config.max_compaction_lag_ms < NEVER_MS
            and first_dirty_timestamp is not None
            and first_dirty_timestamp < now_ms - config.max_compaction_lag_ms
        )
        return CleanCandidate(tp, first_dirty, end, clean_bytes, dirty_bytes, max_lag_due)

    def begin(self, tp: TopicPartition) -> None:
        self.in_progress.add(tp)

    def done(self, tp: TopicPartition, end_offset: int) -> None:
        """Cleaned below `end_offset`: the next cleaning of it starts there."""
        self.in_progress.discard(tp)
        self.checkpoints[tp] = end_offset

    def aborted(self, tp: TopicPartition) -> None:
        self.in_progress.discard(tp)

    def failed(self, tp: TopicPartition) -> None:
        """The cleaning met a corrupt batch: leave this log alone."""
        self.in_progress.discard(tp)
        self.uncleanable.add(tp)

    def forget(self, tp: TopicPartition) -> None:
        """The log was deleted."""
        self.in_progress.discard(tp)
        self.uncleanable.discard(tp)
        self.checkpoints.pop(tp, None)


def _filthier(a: CleanCandidate, b: CleanCandidate) -> bool:
    if a.max_lag_due != b.max_lag_due:
        return a.max_lag_due
    return a.dirty_ratio > b.dirty_ratio
