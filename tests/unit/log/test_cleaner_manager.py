"""Which log the cleaner picks and how far it may clean (broker/core/cleaner_manager.py):
whole segments only, never at or past the high watermark or into the active segment, not
before min.compaction.lag.ms, the filthiest due log first, max.compaction.lag.ms overriding
the ratio."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from broker.config.log_config import LogConfig
from broker.core.cleaner_manager import CleanerManager
from broker.log.log import Log
from protocol.records import Record, build_batch
from protocol.topic_partition import TopicPartition
from tests.unit.log.helpers import T0

COMPACT = LogConfig(segment_bytes=400, index_interval_bytes=128, cleanup_policy=("compact",))
A = TopicPartition("a", 0)
B = TopicPartition("b", 0)


def filled(directory: Path, config: LogConfig, batches: int, keys: int = 2) -> Log:
    log = Log.open(directory, config, now_ms=T0)
    for i in range(batches):
        record = Record(key=f"k{i % keys}".encode(), value=b"v" * 40, timestamp_ms=T0)
        log.append_as_leader(build_batch([record], now_ms=T0), 0, T0)
    return log


def test_cleans_whole_segments_below_the_high_watermark_and_the_active_segment(
    tmp_path: Path,
) -> None:
    log = filled(tmp_path / "a-0", COMPACT, 40)
    assert len(log.segments) > 3
    manager = CleanerManager()
    everything = manager.candidate(A, log, log.log_end_offset, T0)
    assert everything is not None
    assert everything.end_offset == log.active_segment.base_offset
    assert everything.first_dirty_offset == 0

    high_watermark = log.segments[2].base_offset + 1  # inside the third segment
    bounded = manager.candidate(A, log, high_watermark, T0)
    assert bounded is not None
    assert bounded.end_offset == log.segments[1].next_offset  # the third is not whole below it


def test_nothing_to_clean_below_the_first_segment_boundary(tmp_path: Path) -> None:
    log = filled(tmp_path / "a-0", COMPACT, 40)
    assert CleanerManager().candidate(A, log, log.segments[0].next_offset - 1, T0) is None


def test_a_delete_policy_log_is_never_a_candidate(tmp_path: Path) -> None:
    log = filled(tmp_path / "a-0", replace(COMPACT, cleanup_policy=("delete",)), 40)
    assert CleanerManager().candidate(A, log, log.log_end_offset, T0) is None


def test_the_checkpoint_moves_the_first_dirty_offset(tmp_path: Path) -> None:
    log = filled(tmp_path / "a-0", COMPACT, 40)
    manager = CleanerManager()
    manager.begin(A)
    assert manager.choose({A: (log, log.log_end_offset)}, T0) is None  # in progress
    manager.done(A, log.segments[1].next_offset)
    candidate = manager.candidate(A, log, log.log_end_offset, T0)
    assert candidate is not None
    assert candidate.first_dirty_offset == log.segments[1].next_offset
    assert candidate.clean_bytes == log.segments[0].size + log.segments[1].size

    manager.done(A, log.log_end_offset + 5)  # a checkpoint past the log (it was truncated)
    restarted = manager.candidate(A, log, log.log_end_offset, T0)
    assert restarted is not None and restarted.first_dirty_offset == log.log_start_offset


def test_min_compaction_lag_holds_young_segments_back(tmp_path: Path) -> None:
    hour_ms = 3_600_000
    log = filled(tmp_path / "a-0", replace(COMPACT, min_compaction_lag_ms=hour_ms), 40)
    manager = CleanerManager()
    assert manager.candidate(A, log, log.log_end_offset, T0) is None
    assert manager.candidate(A, log, log.log_end_offset, T0 + hour_ms + 1) is not None


def test_the_filthiest_due_log_is_chosen(tmp_path: Path) -> None:
    a = filled(tmp_path / "a-0", COMPACT, 40)
    b = filled(tmp_path / "b-0", COMPACT, 40)
    manager = CleanerManager()
    manager.done(A, a.segments[-2].base_offset)  # a: mostly clean already
    logs = {A: (a, a.log_end_offset), B: (b, b.log_end_offset)}
    chosen = manager.choose(logs, T0)
    assert chosen is not None and chosen.tp == B


def test_below_the_ratio_nothing_is_due_unless_max_compaction_lag_passed(tmp_path: Path) -> None:
    hour_ms = 3_600_000
    config = replace(COMPACT, min_cleanable_dirty_ratio=0.99, max_compaction_lag_ms=hour_ms)
    log = filled(tmp_path / "a-0", config, 40)
    manager = CleanerManager()
    manager.done(A, log.segments[1].next_offset)  # some clean bytes: ratio below 0.99
    logs = {A: (log, log.log_end_offset)}
    assert manager.choose(logs, T0) is None
    due = manager.choose(logs, T0 + hour_ms + 1)
    assert due is not None and due.max_lag_due


def test_an_uncleanable_log_is_skipped_until_forgotten(tmp_path: Path) -> None:
    log = filled(tmp_path / "a-0", COMPACT, 40)
    manager = CleanerManager()
    logs = {A: (log, log.log_end_offset)}
    manager.begin(A)
    manager.failed(A)
    assert manager.choose(logs, T0) is None
    manager.forget(A)  # deleted (and re-created): a new log
    assert manager.choose(logs, T0) is not None
