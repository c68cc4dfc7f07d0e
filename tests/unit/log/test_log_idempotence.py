"""The log and the idempotent producer: duplicates, refusals, followers, snapshots, recovery.

Unit tests over real files in a temporary directory; the producer state module itself is
tested in test_producer_state.py and test_producer_snapshot.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.log import Log
from broker.log.producer_snapshot import list_snapshot_offsets, snapshot_path
from protocol.errors import ErrorCode, HighwaterError
from protocol.records import Record, build_batch
from tests.unit.log.helpers import T0, open_log, snapshot

PID = 4242


def idem(seq: int, count: int = 2, *, epoch: int = 0, pid: int = PID, tag: str = "") -> bytes:
    records = [Record(f"{tag}{seq + i}".encode(), timestamp_ms=T0 + seq + i) for i in range(count)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq, now_ms=T0)


def leader_append(log: Log, batch: bytes) -> tuple[int, int, bool]:
    info = log.append_as_leader(batch, leader_epoch=1, now_ms=T0)
    return info.first_offset, info.last_offset, info.duplicate


def code(log: Log, batch: bytes) -> ErrorCode:
    with pytest.raises(HighwaterError) as caught:
        log.append_as_leader(batch, leader_epoch=1, now_ms=T0)
    return ErrorCode(caught.value.code)


def test_a_resent_batch_gets_its_original_offsets_and_appends_nothing(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert leader_append(log, idem(0)) == (0, 1, False)
    assert leader_append(log, idem(2)) == (2, 3, False)
    before = snapshot(log)
    assert leader_append(log, idem(0)) == (0, 1, True)
    assert leader_append(log, idem(2)) == (2, 3, True)
    assert snapshot(log) == before
    assert log.log_end_offset == 4


def test_refusals_leave_the_log_untouched(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    leader_append(log, idem(0, epoch=1))
    before = snapshot(log)
    assert code(log, idem(5, epoch=1)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert code(log, idem(2, epoch=0)) == ErrorCode.INVALID_PRODUCER_EPOCH
    assert code(log, idem(3, epoch=2)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert snapshot(log) == before
    assert leader_append(log, idem(0, epoch=2)) == (2, 3, False)  # a new epoch starts at 0


def test_non_idempotent_batches_are_never_deduplicated(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    plain = build_batch([Record(b"x", timestamp_ms=T0)], now_ms=T0)
    assert leader_append(log, plain) == (0, 0, False)
    assert leader_append(log, plain) == (1, 1, False)


def copy_to_follower(leader: Log, follower: Log) -> None:
    """Follower fetches until caught up (one read ends at its segment's end)."""
    while follower.log_end_offset < leader.log_end_offset:
        data = leader.read(follower.log_end_offset, 1 << 20).read()
        follower.append_as_follower(data, now_ms=T0)


def test_a_follower_that_becomes_leader_deduplicates_the_old_leaders_batches(
    tmp_path: Path,
) -> None:
    leader, follower = open_log(tmp_path / "a" / "t-0"), open_log(tmp_path / "b" / "t-0")
    leader_append(leader, idem(0))
    leader_append(leader, idem(2))
    copy_to_follower(leader, follower)
    # The ack for seq 2 was lost; the producer retries against the new leader.
    assert leader_append(follower, idem(2)) == (2, 3, True)
    assert leader_append(follower, idem(4)) == (4, 5, False)
    assert code(follower, idem(9)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER


def test_clean_close_snapshots_at_the_log_end_and_reopening_keeps_the_window(
    tmp_path: Path,
) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory)
    leader_append(log, idem(0))
    leader_append(log, idem(2))
    log.close()
    assert list_snapshot_offsets(directory) == [4]
    log = open_log(directory)
    assert leader_append(log, idem(2)) == (2, 3, True)
    assert leader_append(log, idem(4)) == (4, 5, False)


@pytest.mark.parametrize("damage", ["corrupt", "deleted"])
def test_after_a_crash_the_state_is_rebuilt_from_the_log(tmp_path: Path, damage: str) -> None:
    """No snapshot at the end (a crash, or a corrupt one): the batches after the newest valid
    snapshot are replayed from their headers."""
    directory = tmp_path / "t-0"
    log = open_log(directory, LogConfig(segment_bytes=200))
    for seq in range(0, 20, 2):
        leader_append(log, idem(seq))
    assert len(log.segments) > 2, "rolls wrote snapshots"
    assert list_snapshot_offsets(directory), "kept at each roll"
    log.flush()
    newest = list_snapshot_offsets(directory)[-1]
    if damage == "corrupt":
        path = snapshot_path(directory, newest)
        path.write_bytes(path.read_bytes()[:-3] + b"\xff\xff\xff")
    else:
        snapshot_path(directory, newest).unlink()
    # No close(): as after SIGKILL.
    reopened = Log.open(directory, LogConfig(segment_bytes=200), now_ms=T0, clean_shutdown=False)
    assert reopened.log_end_offset == 20
    assert leader_append(reopened, idem(18)) == (18, 19, True)
    assert leader_append(reopened, idem(14)) == (14, 15, True)
    assert code(reopened, idem(30)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert leader_append(reopened, idem(20)) == (20, 21, False)


def test_rolls_keep_the_two_newest_snapshots(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory, LogConfig(segment_bytes=200))
    for seq in range(0, 40, 2):
        leader_append(log, idem(seq))
    bases = [s.base_offset for s in log.segments]
    assert list_snapshot_offsets(directory) == bases[-2:]


def test_truncation_forgets_the_truncated_batches(tmp_path: Path) -> None:
    """A follower truncating a divergent tail must not later treat a resend of a batch it no
    longer has as a duplicate (that would ack a record nobody stores)."""
    directory = tmp_path / "t-0"
    log = open_log(directory, LogConfig(segment_bytes=200))
    for seq in range(0, 12, 2):
        leader_append(log, idem(seq))
    log.truncate_to(8)
    assert log.log_end_offset == 8
    assert leader_append(log, idem(6)) == (6, 7, True)  # still there
    assert leader_append(log, idem(8)) == (8, 9, False)  # gone: appended again
    assert [h.base_sequence for h in log.iter_batch_headers()] == [0, 2, 4, 6, 8]


def test_idle_producers_expire(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(producer_id_expiration_ms=1000))
    leader_append(log, idem(0))
    assert log.remove_expired_producers(T0 + 500) == 0
    assert log.remove_expired_producers(T0 + 5000) == 1
    # Forgotten: the producer is unknown now, accepted at any sequence.
    assert leader_append(log, idem(40)) == (2, 3, False)


def test_truncate_fully_drops_producer_state_and_snapshots(tmp_path: Path) -> None:
    directory = tmp_path / "t-0"
    log = open_log(directory, LogConfig(segment_bytes=200))
    for seq in range(0, 20, 2):
        leader_append(log, idem(seq))
    log.truncate_fully_and_start_at(100, T0)
    assert list_snapshot_offsets(directory) == []
    assert leader_append(log, idem(18)) == (100, 101, False)


def test_a_new_config_reaches_the_open_segments(tmp_path: Path) -> None:
    """The broker opens logs with its defaults at start-up; the topic's config arrives later.
    The active segment must then roll at the topic's segment.bytes, not the default."""
    directory = tmp_path / "t-0"
    log = open_log(directory)  # default: 1 GiB segments
    leader_append(log, idem(0))
    log.config = LogConfig(segment_bytes=200)
    for seq in range(2, 12, 2):
        leader_append(log, idem(seq))
    assert len(log.segments) > 1
    assert all(s.config.segment_bytes == 200 for s in log.segments)


@pytest.mark.parametrize("reload", ["truncation", "restart"])
def test_a_reload_past_a_moved_log_start_keeps_the_batches_after_the_snapshot(
    tmp_path: Path, reload: str
) -> None:
    """The log start offset moved (`maybe_increment_log_start_offset`) past the newest
    snapshot but not past the segment holding it: a reload (a follower's truncation, a
    restart after a crash) must replay every batch after the snapshot, those below the log
    start included, or the producer's state goes back to the snapshot's and its next batch
    is refused."""
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=300)
    log = open_log(directory, config)
    for seq in range(0, 10, 2):  # offsets 0-9, rolls with snapshots on the way
        leader_append(log, idem(seq))
    for seq in range(4):  # another producer, offsets 10-13
        leader_append(log, idem(seq, count=1, pid=PID + 1))
    log.flush()
    snapshots = list_snapshot_offsets(directory)
    assert snapshots and snapshots[0] < 10 < log.log_end_offset
    log.maybe_increment_log_start_offset(10)
    assert log.segments[0].base_offset <= snapshots[0], "the snapshot's segment is kept"
    if reload == "truncation":
        log.truncate_to(11)  # KIP-101: a divergent tail from offset 11
    else:
        log.close_files()  # SIGKILL: the newest snapshot at or below the log end is reused
        snapshot_path(directory, snapshots[-1]).unlink()
        log = Log.open(
            directory,
            config,
            now_ms=T0,
            log_start_offset=10,
            recovery_point=10,
            clean_shutdown=False,
        )
        assert log.log_start_offset == 10
    assert log.producer_state.producers[PID].last_seq == 9
    assert leader_append(log, idem(8)) == (8, 9, True)  # a resend of its last batch
    assert leader_append(log, idem(10))[2] is False  # and the next one follows it


def test_a_reload_past_deleted_segments_forgets_rather_than_refuses(tmp_path: Path) -> None:
    """The newest usable snapshot is older than the first segment left (the segments after it
    deleted, the newer snapshots gone): the batches between are gone, so the snapshot cannot
    be brought up to date. A producer whose batches went with them is forgotten (accepted at
    any sequence, Kafka's rebuild from the log start offset), not left at the snapshot's
    older sequence."""
    directory = tmp_path / "t-0"
    config = LogConfig(segment_bytes=300)
    log = open_log(directory, config)
    for seq in range(0, 10, 2):
        leader_append(log, idem(seq))
    for seq in range(6):  # another producer, into later segments
        leader_append(log, idem(seq, count=1, pid=PID + 1))
    log.flush()
    bases = [s.base_offset for s in log.segments]
    first_snapshot = list_snapshot_offsets(directory)[0]
    kept_from = next(b for b in bases if b > first_snapshot)
    log.maybe_increment_log_start_offset(kept_from)
    assert log.segments[0].base_offset == kept_from
    for offset in list_snapshot_offsets(directory)[1:]:
        snapshot_path(directory, offset).unlink()  # only the old snapshot is left
    log.close_files()
    log = Log.open(
        directory,
        config,
        now_ms=T0,
        log_start_offset=kept_from,
        recovery_point=kept_from,
        clean_shutdown=False,
    )
    entry = log.producer_state.producers.get(PID)
    held = [h.base_sequence for h in log.iter_batch_headers() if h.producer_id == PID]
    if held:
        assert entry is not None and entry.last_seq == held[-1] + 1  # batches of 2
    else:
        assert entry is None
    assert leader_append(log, idem(10))[2] is False


@pytest.mark.parametrize("restarted", [False, True], ids=["running", "killed-and-restarted"])
def test_a_leader_truncated_as_follower_leads_again_with_the_new_leaders_sequences(
    tmp_path: Path, restarted: bool
) -> None:
    """A leader appends batches of its own (rolling segments: snapshots past the point it
    will be truncated to), is deposed, truncates to where its epoch ends on the new leader,
    copies the new leader's batches of the same producer (rolling again), maybe restarts
    after SIGKILL, and leads again: its producer state is the new leader's."""
    config = LogConfig(segment_bytes=300)
    me, other = open_log(tmp_path / "a" / "t-0", config), open_log(tmp_path / "b" / "t-0", config)
    for seq in range(0, 10, 2):
        leader_append(me, idem(seq))  # epoch 1
    copy_to_follower(me, other)
    for seq in range(10, 16, 2):  # epoch 2, never replicated
        me.append_as_leader(idem(seq, tag="mine-"), leader_epoch=2, now_ms=T0)
    assert max(list_snapshot_offsets(me.directory)) > 10, "snapshots past the truncation point"
    for seq in range(10, 30, 2):  # epoch 3 on the other broker: the producer's retries and on
        other.append_as_leader(idem(seq), leader_epoch=3, now_ms=T0)
    assert other.end_offset_for_epoch(2) == (1, 10)
    me.truncate_to(10)
    assert me.producer_state.producers[PID].last_seq == 9
    copy_to_follower(other, me)
    assert me.log_end_offset == other.log_end_offset == 30
    if restarted:
        me.close_files()
        me = Log.open(me.directory, config, now_ms=T0, recovery_point=10, clean_shutdown=False)
    # Leading epoch 4: the producer's resend of its last batch, then its next one.
    assert me.append_as_leader(idem(28), leader_epoch=4, now_ms=T0).duplicate
    assert me.append_as_leader(idem(30), leader_epoch=4, now_ms=T0).first_offset == 30
    assert code(me, idem(40)) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
