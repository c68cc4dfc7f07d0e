"""LogManager: log dirs, locking, checkpoint files, clean-shutdown marker, crash recovery."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.errors import LogStorageError
from broker.log.manager import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
    STRAY_SUFFIX,
    LogManager,
    parse_log_dir_name,
)
from protocol.errors import ErrorCode
from tests.unit.log.helpers import T0, make_batch, read_headers, stored_batches

CONFIG = LogConfig(segment_bytes=600, index_interval_bytes=100)


def manager(*dirs: Path, config: LogConfig = CONFIG) -> LogManager:
    return LogManager(list(dirs), config)


def started(*dirs: Path, now_ms: int = T0) -> LogManager:
    m = manager(*dirs)
    m.startup(now_ms)
    return m


def crash(m: LogManager) -> None:
    """Stop without shutdown(): close the files (as process death would) and nothing else."""
    for log in m.logs.values():
        log.close()
    for lock in m._locks:
        lock.close()
    m._locks.clear()


def fill(m: LogManager, tp: tuple[str, int], batches: int, epoch: int = 0) -> None:
    log = m.get_or_create_log(tp, T0)
    for i in range(batches):
        log.append_as_leader(make_batch(2, tag=i), epoch, T0)


# --- parse_log_dir_name -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("my-topic-3", ("my-topic", 3)),
        ("t-0", ("t", 0)),
        ("a.b_c-12", ("a.b_c", 12)),
        ("topic--1", ("topic-", 1)),
        ("x" * 249 + "-7", ("x" * 249, 7)),
    ],
)
def test_parse_log_dir_name(name: str, expected: tuple[str, int]) -> None:
    assert parse_log_dir_name(name) == expected


@pytest.mark.parametrize(
    "name",
    [
        "my-topic",
        "-3",
        "topic-",
        "topic-x",
        "topic-1a",
        "topic-+1",
        "topic- 1",
        "topic--",
        "3",
        "",
        "top ic-3",
        "top/ic-3",
        "x" * 250 + "-7",
        "my-topic-3.abcdef-delete",
        "recovery-point-offset-checkpoint",
        ".lock",
    ],
)
def test_parse_log_dir_name_rejects_junk(name: str) -> None:
    assert parse_log_dir_name(name) is None


@pytest.mark.parametrize("name", ["topic-²", "topic-①"])
def test_parse_log_dir_name_rejects_non_ascii_digits(name: str) -> None:
    assert parse_log_dir_name(name) is None


def test_parse_log_dir_name_rejects_a_trailing_newline() -> None:
    assert parse_log_dir_name("topic\n-3") is None


def test_topic_with_a_trailing_newline_is_rejected(tmp_path: Path) -> None:
    m = started(tmp_path / "d0")
    try:
        with pytest.raises(ValueError):
            m.get_or_create_log(("topic\n", 0), T0)
        m.checkpoint(T0)
    finally:
        crash(m)


def test_startup_survives_a_directory_with_a_unicode_digit_suffix(tmp_path: Path) -> None:
    d = tmp_path / "d0"
    (d / "x-²").mkdir(parents=True)
    m = started(d)
    assert m.logs == {}
    m.shutdown(T0)


def test_startup_skips_a_junk_directory(tmp_path: Path) -> None:
    d = tmp_path / "d0"
    (d / "not a partition").mkdir(parents=True)
    (d / "lost+found").mkdir()
    m = started(d)
    assert m.logs == {}
    m.shutdown(T0)
    assert (d / "not a partition").is_dir()


# --- startup and shutdown ---------------------------------------------------------------------


def test_startup_on_empty_dirs(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    m = started(d0, d1)
    assert m.logs == {}
    assert m.had_clean_shutdown == {d0: False, d1: False}
    for d in (d0, d1):
        assert (d / ".lock").exists()
        assert not (d / CLEAN_SHUTDOWN_FILE).exists()
        assert (d / RECOVERY_POINT_CHECKPOINT_FILE).read_text() == "0\n0\n"
        assert (d / LOG_START_OFFSET_CHECKPOINT_FILE).read_text() == "0\n0\n"
    m.shutdown(T0)


def test_log_dirs_are_required() -> None:
    with pytest.raises(ValueError):
        LogManager([], CONFIG)


def test_create_logs_spread_over_dirs(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    m = started(d0, d1)
    a = m.get_or_create_log(("a", 0), T0)
    b = m.get_or_create_log(("a", 1), T0)
    c = m.get_or_create_log(("b", 0), T0)
    assert m.get_or_create_log(("a", 0), T0) is a
    assert m.get_log(("a", 0)) is a
    assert m.get_log(("zzz", 0)) is None
    assert a.directory == d0 / "a-0"
    assert b.directory == d1 / "a-1"
    assert c.directory == d0 / "b-0"
    for bad in [("", 0), ("a b", 0), ("a/b", 0), ("a", -1), ("x" * 250, 0)]:
        with pytest.raises(ValueError):
            m.get_or_create_log(bad, T0)
    m.shutdown(T0)


def test_shutdown_writes_marker_and_exact_checkpoints(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("orders", 0), 5)  # offsets 0..9
    fill(m, ("orders", 1), 2)  # 0..3
    fill(m, ("audit", 0), 0)  # empty
    m.get_log(("orders", 0)).maybe_increment_log_start_offset(4)
    m.checkpoint_high_watermarks({("orders", 0): 8, ("orders", 1): 4, ("audit", 0): 0})
    m.shutdown(T0)
    assert m.logs == {}
    assert (d0 / CLEAN_SHUTDOWN_FILE).exists()
    assert (d0 / CLEAN_SHUTDOWN_FILE).read_bytes() == b""
    assert (d0 / RECOVERY_POINT_CHECKPOINT_FILE).read_text() == (
        "0\n3\naudit 0 0\norders 0 10\norders 1 4\n"
    )
    assert (d0 / LOG_START_OFFSET_CHECKPOINT_FILE).read_text() == (
        "0\n3\naudit 0 0\norders 0 4\norders 1 0\n"
    )
    assert (d0 / HIGH_WATERMARK_CHECKPOINT_FILE).read_text() == (
        "0\n3\naudit 0 0\norders 0 8\norders 1 4\n"
    )
    # the lock is released: another manager can start
    m2 = started(d0)
    assert m2.had_clean_shutdown == {d0: True}
    assert not (d0 / CLEAN_SHUTDOWN_FILE).exists()  # deleted once startup finished
    assert sorted(m2.logs) == [("audit", 0), ("orders", 0), ("orders", 1)]
    assert m2.get_log(("orders", 0)).log_start_offset == 4
    assert m2.get_log(("orders", 0)).log_end_offset == 10
    assert m2.get_log(("orders", 1)).log_end_offset == 4
    assert m2.read_high_watermarks() == {("orders", 0): 8, ("orders", 1): 4, ("audit", 0): 0}
    m2.shutdown(T0)


def test_restart_keeps_every_byte(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    m = started(d0, d1)
    for p in range(4):
        fill(m, ("t", p), 3 + p, epoch=p)
    before = {tp: stored_batches(log) for tp, log in m.logs.items()}
    epochs = {tp: log.leader_epoch_cache.entries() for tp, log in m.logs.items()}
    m.shutdown(T0)
    m = started(d0, d1)
    assert m.had_clean_shutdown == {d0: True, d1: True}
    assert {tp: stored_batches(log) for tp, log in m.logs.items()} == before
    assert {tp: log.leader_epoch_cache.entries() for tp, log in m.logs.items()} == epochs
    assert {tp: m.logs[tp].directory.parent for tp in m.logs} == {
        ("t", 0): d0,
        ("t", 1): d1,
        ("t", 2): d0,
        ("t", 3): d1,
    }
    m.shutdown(T0)


def test_marker_is_gone_while_running(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    m.shutdown(T0)
    m = started(d0)
    assert not (d0 / CLEAN_SHUTDOWN_FILE).exists()
    crash(m)
    m = started(d0)
    assert m.had_clean_shutdown == {d0: False}
    m.shutdown(T0)


# --- crashes ----------------------------------------------------------------------------------


def test_crash_then_unclean_startup_recovers_a_torn_tail(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 12)
    log = m.get_log(("t", 0))
    batches = stored_batches(log)
    active = log.active_segment
    assert len(log.segments) > 1
    tail_batch = batches[-1]
    crash(m)
    os.truncate(active.log_path, active.log_path.stat().st_size - 7)  # torn last batch
    m = started(d0)
    assert m.had_clean_shutdown == {d0: False}
    log = m.get_log(("t", 0))
    assert stored_batches(log) == batches[:-1]
    assert log.log_end_offset == 22
    assert all(h.last_offset < 22 for h in read_headers(log, 20))
    info = log.append_as_leader(make_batch(2, tag=50), 1, T0)
    assert info.first_offset == 22
    assert stored_batches(log)[-1] != tail_batch
    m.shutdown(T0)
    assert (d0 / RECOVERY_POINT_CHECKPOINT_FILE).read_text() == "0\n1\nt 0 24\n"


def test_crash_with_the_marker_left_from_before_still_checks_the_tail(tmp_path: Path) -> None:
    # a clean shutdown, a start whose marker deletion was lost, writes, then a crash
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 3)
    m.shutdown(T0)
    m = started(d0)
    fill(m, ("t", 0), 3)
    log = m.get_log(("t", 0))
    batches = stored_batches(log)
    path = log.active_segment.log_path
    crash(m)
    (d0 / CLEAN_SHUTDOWN_FILE).write_bytes(b"")
    with open(path, "ab") as f:
        f.write(make_batch(1)[:40])
    m = started(d0)
    assert m.had_clean_shutdown == {d0: True}
    assert stored_batches(m.get_log(("t", 0))) == batches
    m.shutdown(T0)


def test_corrupt_recovery_point_checkpoint_means_full_recovery(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 12)
    fill(m, ("u", 0), 4)
    batches = {tp: stored_batches(log) for tp, log in m.logs.items()}
    path = m.get_log(("t", 0)).segments[0].log_path
    m.shutdown(T0)
    (d0 / RECOVERY_POINT_CHECKPOINT_FILE).write_text("0\n2\nt 0 2")  # truncated
    # damage the middle of the first segment: only a full recovery finds it
    data = bytearray(path.read_bytes())
    data[70] ^= 0xFF
    path.write_bytes(bytes(data))
    m = started(d0)
    assert m.had_clean_shutdown == {d0: True}
    assert m.get_log(("u", 0)) is not None
    assert stored_batches(m.get_log(("u", 0))) == batches[("u", 0)]  # data intact, not lost
    assert stored_batches(m.get_log(("t", 0))) == []  # the first batch was the damaged one
    assert m.get_log(("t", 0)).log_end_offset == 0
    assert (d0 / RECOVERY_POINT_CHECKPOINT_FILE).read_text() == "0\n2\nt 0 0\nu 0 8\n"
    m.shutdown(T0)


def test_corrupt_recovery_point_checkpoint_keeps_intact_data(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 12)
    batches = stored_batches(m.get_log(("t", 0)))
    m.shutdown(T0)
    (d0 / RECOVERY_POINT_CHECKPOINT_FILE).write_bytes(b"\xff\xfe garbage")
    m = started(d0)
    assert stored_batches(m.get_log(("t", 0))) == batches
    assert m.get_log(("t", 0)).log_end_offset == 24
    m.shutdown(T0)


def test_corrupt_log_start_offset_checkpoint_falls_back_to_the_first_segment(
    tmp_path: Path,
) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 12)
    log = m.get_log(("t", 0))
    second = log.segments[1].base_offset
    log.maybe_increment_log_start_offset(second + 1)
    m.shutdown(T0)
    assert (d0 / LOG_START_OFFSET_CHECKPOINT_FILE).read_text() == f"0\n1\nt 0 {second + 1}\n"
    (d0 / LOG_START_OFFSET_CHECKPOINT_FILE).write_text("0\n1\nt 0 x\n")
    m = started(d0)
    log = m.get_log(("t", 0))
    assert log.log_start_offset == second
    assert log.log_end_offset == 24
    assert read_headers(log, second)[0].base_offset == second
    m.shutdown(T0)
    assert (d0 / LOG_START_OFFSET_CHECKPOINT_FILE).read_text() == f"0\n1\nt 0 {second}\n"


def test_missing_checkpoints_after_clean_shutdown(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 5)
    m.shutdown(T0)
    (d0 / RECOVERY_POINT_CHECKPOINT_FILE).unlink()
    (d0 / LOG_START_OFFSET_CHECKPOINT_FILE).unlink()
    m = started(d0)
    assert m.get_log(("t", 0)).log_end_offset == 10
    assert m.get_log(("t", 0)).log_start_offset == 0
    m.shutdown(T0)


def test_corrupt_high_watermark_checkpoint_reads_as_empty(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 1)
    m.checkpoint_high_watermarks({("t", 0): 2})
    assert m.read_high_watermarks() == {("t", 0): 2}
    (d0 / HIGH_WATERMARK_CHECKPOINT_FILE).write_text("0\n1\n")
    assert m.read_high_watermarks() == {}
    m.shutdown(T0)


# --- locking ----------------------------------------------------------------------------------


def test_second_manager_on_the_same_dir_fails(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    first = started(d0)
    fill(first, ("t", 0), 2)
    second = manager(d1, d0)
    with pytest.raises(LogStorageError) as info:
        second.startup(T0)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert second.get_log(("t", 0)) is None
    # the first manager is unaffected
    first.get_log(("t", 0)).append_as_leader(make_batch(1), 0, T0)
    assert first.get_log(("t", 0)).log_end_offset == 5
    first.shutdown(T0)
    for lock in second._locks:  # d1 was locked before d0 failed
        lock.close()
    third = started(d0)
    assert third.get_log(("t", 0)).log_end_offset == 5
    third.shutdown(T0)


def test_duplicate_partition_in_two_log_dirs_is_refused(tmp_path: Path) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    for d in (d0, d1):
        m = started(d)
        fill(m, ("t", 0), 2)
        m.shutdown(T0)
    m = manager(d0, d1)
    try:
        with pytest.raises(LogStorageError):
            m.startup(T0)
    finally:
        crash(m)


# --- deletion -----------------------------------------------------------------------------------


def test_delete_log_removes_the_directory(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 3)
    fill(m, ("t", 1), 3)
    assert m.delete_log(("t", 0)) is True
    assert m.delete_log(("t", 0)) is False
    assert m.get_log(("t", 0)) is None
    assert sorted(p.name for p in d0.iterdir() if p.is_dir()) == ["t-1"]
    m.checkpoint(T0)
    # t-1 never rolled nor flushed: its recovery point is still 0
    assert (d0 / RECOVERY_POINT_CHECKPOINT_FILE).read_text() == "0\n1\nt 1 0\n"
    # recreated from scratch
    log = m.get_or_create_log(("t", 0), T0)
    assert log.log_end_offset == 0
    assert log.leader_epoch_cache.entries() == []
    m.shutdown(T0)


def test_leftover_delete_dir_is_removed_at_startup(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 3)
    m.shutdown(T0)
    doomed = d0 / "t-0.0123456789abcdef-delete"
    os.replace(d0 / "t-0", doomed)  # a crash between the rename and the rmtree
    (doomed / "sub").mkdir()
    m = started(d0)
    assert not doomed.exists()
    assert m.logs == {}
    assert (d0 / RECOVERY_POINT_CHECKPOINT_FILE).read_text() == "0\n0\n"
    m.shutdown(T0)


def test_a_failed_delete_leaves_the_log_in_its_dir_so_the_right_dir_goes_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    d0, d1 = tmp_path / "d0", tmp_path / "d1"
    m = started(d0, d1)
    fill(m, ("t", 0), 1)
    where = m.dir_of(("t", 0))
    assert where is not None

    def eio(src: object, dst: object) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr("broker.log.manager.os.replace", eio)
    with pytest.raises(OSError):
        m.delete_log(("t", 0))
    assert m.dir_of(("t", 0)) == where  # what the caller's storage_failed looks up
    monkeypatch.undo()
    assert m.fail_dir(where, "EIO") == [("t", 0)]
    assert where in m.offline_dirs


def test_a_log_moved_aside_keeps_its_files_and_is_not_loaded_again(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 3)
    m.get_or_create_log(("t", 0), T0).flush(indexes=True)
    before = {p.name: p.read_bytes() for p in (d0 / "t-0").iterdir()}
    stray = m.move_log_aside(("t", 0))
    assert stray.parent == d0
    assert stray.name.startswith("t-0.") and stray.name.endswith(STRAY_SUFFIX)
    assert not (d0 / "t-0").exists()
    assert {name: (stray / name).read_bytes() for name in before} == before  # close adds a snapshot
    assert m.get_log(("t", 0)) is None and m.dir_of(("t", 0)) is None
    assert m.get_or_create_log(("t", 0), T0).log_end_offset == 0  # a new, empty log
    m.shutdown(T0)
    m = started(d0)
    assert stray.is_dir(), "left for the operator, never deleted"
    assert set(m.logs) == {("t", 0)}
    assert m.logs[("t", 0)].log_end_offset == 0, "the stray dir is not loaded"
    m.shutdown(T0)


# --- periodic work ------------------------------------------------------------------------------


def test_cleanup_and_flush_dirty(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = LogManager([d0], LogConfig(segment_bytes=600, retention_ms=1000, flush_ms=500))
    m.startup(T0)
    log = m.get_or_create_log(("t", 0), T0)
    for i in range(12):
        log.append_as_leader(make_batch(2, tag=i, ts=T0), 0, T0)
    segments = len(log.segments)
    # flush_dirty is given the monotonic clock: its first check starts the flush.ms timer.
    assert m.flush_dirty(100) == 0
    assert m.flush_dirty(599) == 0
    assert m.flush_dirty(600) == 1
    assert log.recovery_point == log.log_end_offset
    assert m.flush_dirty(2000) == 0  # nothing new
    # the largest timestamp of every segment is T0 + 1 (records at T0, T0 + 1)
    assert m.cleanup(T0 + 1001) == 0
    assert m.cleanup(T0 + 1002) == segments
    assert (log.log_start_offset, log.log_end_offset) == (24, 24)
    m.checkpoint(T0)
    assert (d0 / LOG_START_OFFSET_CHECKPOINT_FILE).read_text() == "0\n1\nt 0 24\n"
    m.shutdown(T0)


def test_per_log_configs_at_startup(tmp_path: Path) -> None:
    d0 = tmp_path / "d0"
    m = started(d0)
    fill(m, ("t", 0), 1)
    fill(m, ("t", 1), 1)
    m.shutdown(T0)
    special = LogConfig(segment_bytes=128)
    m = LogManager([d0], CONFIG)
    m.startup(T0, {("t", 1): special})
    assert m.get_log(("t", 1)).config == special
    assert m.get_log(("t", 0)).config == CONFIG
    m.shutdown(T0)
