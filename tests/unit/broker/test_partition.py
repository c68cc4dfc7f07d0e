"""Partition: role changes, leader epochs, the high watermark and what each reader may see.

Every test uses a real `broker.log.Log` in tmp_path.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.core.partition import (
    FencedLeaderEpochError,
    NotLeaderError,
    Partition,
    UnknownLeaderEpochError,
)
from broker.log.checkpoints import EpochEntry
from broker.log.errors import OffsetOutOfRangeError
from broker.log.log import Log
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.records import Record, build_batch, decode_batches

ME = 1
OTHER = 2
NOW = 1_700_000_000_000


@pytest.fixture
def log(tmp_path: Path) -> Iterator[Log]:
    log = Log.open(tmp_path / "t-0", LogConfig(), now_ms=NOW)
    yield log
    log.close()


def state(
    leader: int = ME,
    epoch: int = 0,
    isr: tuple[int, ...] = (ME,),
    replicas: tuple[int, ...] | None = None,
    partition_epoch: int = 0,
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        topic_name="t",
        partition_index=0,
        controller_epoch=1,
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        partition_epoch=partition_epoch,
        replicas=tuple(sorted({*isr, ME})) if replicas is None else replicas,
    )


def batch(*values: bytes) -> bytes:
    return build_batch([Record(v) for v in values], now_ms=NOW)


def values(data: bytes) -> list[bytes | None]:
    return [r.value for b in decode_batches(data) for r in b.records]


def test_new_partition_is_nobodys_replica(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    assert not partition.is_leader
    assert partition.leader_epoch == -1 and partition.high_watermark == 0
    with pytest.raises(NotLeaderError) as info:
        partition.append_as_leader(batch(b"x"), NOW)
    assert info.value.code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert log.log_end_offset == 0


def test_checkpointed_high_watermark_is_clamped_to_the_log_end(log: Log) -> None:
    log.append_as_leader(batch(b"a", b"b"), 0, NOW)
    assert Partition("t", 0, ME, log, high_watermark=10).high_watermark == 2
    assert Partition("t", 0, ME, log, high_watermark=1).high_watermark == 1


def test_apply_state_takes_the_controllers_view(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    assert partition.apply_state(
        state(epoch=4, isr=(ME, OTHER), replicas=(OTHER, ME), partition_epoch=9)
    )
    assert partition.is_leader
    assert partition.leader_id == ME and partition.leader_epoch == 4
    assert partition.partition_epoch == 9
    assert partition.isr == (ME, OTHER) and partition.replicas == (OTHER, ME)


def test_apply_state_with_older_epoch_is_refused_and_changes_nothing(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    assert partition.apply_state(state(epoch=5, isr=(ME, OTHER), partition_epoch=3))
    assert not partition.apply_state(state(leader=OTHER, epoch=4, isr=(OTHER,), partition_epoch=7))
    assert partition.is_leader and partition.leader_id == ME
    assert partition.leader_epoch == 5 and partition.partition_epoch == 3
    assert partition.isr == (ME, OTHER)
    assert log.leader_epoch_cache.entries() == [EpochEntry(5, 0)]


def test_apply_state_with_same_epoch_updates_isr(log: Log) -> None:
    """Kafka accepts an equal leader epoch (an ISR change carries a new partition epoch)."""
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=2, isr=(ME, OTHER), partition_epoch=0))
    assert partition.apply_state(state(epoch=2, isr=(ME,), replicas=(ME, OTHER), partition_epoch=1))
    assert partition.isr == (ME,) and partition.partition_epoch == 1
    assert log.leader_epoch_cache.entries() == [EpochEntry(2, 0)]


def test_becoming_leader_assigns_the_epoch_at_the_log_end(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=3))
    assert log.leader_epoch_cache.entries() == [EpochEntry(3, 0)]
    partition.append_as_leader(batch(b"a", b"b", b"c"), NOW)
    partition.apply_state(state(epoch=7))
    assert log.leader_epoch_cache.entries() == [EpochEntry(3, 0), EpochEntry(7, 3)]
    partition.append_as_leader(batch(b"d"), NOW)
    assert [h.partition_leader_epoch for h in log.iter_batch_headers()] == [3, 7]
    assert log.end_offset_for_epoch(3) == (3, 3)
    assert log.end_offset_for_epoch(7) == (7, 4)


def test_becoming_follower_does_not_assign_an_epoch(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(leader=OTHER, epoch=3, isr=(OTHER, ME)))
    assert not partition.is_leader
    assert log.leader_epoch_cache.entries() == []
    with pytest.raises(NotLeaderError):
        partition.append_as_leader(batch(b"x"), NOW)
    with pytest.raises(NotLeaderError):
        partition.read(0, 1000, replica_id=-1, min_one_batch=True)


def test_high_watermark_follows_the_log_end_with_an_isr_of_one(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0))
    info = partition.append_as_leader(batch(b"a", b"b"), NOW)
    assert (info.first_offset, info.last_offset) == (0, 1)
    assert partition.high_watermark == 2 == partition.log_end_offset
    partition.append_as_leader(batch(b"c"), NOW)
    assert partition.high_watermark == 3


def test_leader_over_existing_data_with_isr_of_one_raises_hw_to_log_end(log: Log) -> None:
    log.append_as_leader(batch(b"a", b"b"), 0, NOW)  # written in an earlier life
    partition = Partition("t", 0, ME, log, high_watermark=1)
    partition.apply_state(state(epoch=1))
    assert partition.high_watermark == 2


def test_hw_waits_for_a_second_isr_member_with_unknown_log_end(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME, OTHER)))
    partition.append_as_leader(batch(b"a", b"b", b"c"), NOW)
    assert partition.log_end_offset == 3
    assert partition.high_watermark == 0
    assert not partition.maybe_increment_high_watermark()
    assert partition.high_watermark == 0


def test_hw_moves_with_the_follower_and_never_backwards(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME, OTHER)))
    partition.append_as_leader(batch(b"a", b"b", b"c"), NOW)
    assert partition.update_follower_fetch(OTHER, 2, 3, NOW)
    assert partition.high_watermark == 2
    # a stale or truncated report
    assert not partition.update_follower_fetch(OTHER, 1, 3, NOW)
    assert partition.high_watermark == 2
    assert partition.update_follower_fetch(OTHER, 3, 3, NOW)
    assert partition.high_watermark == 3


def test_new_leader_epoch_with_unknown_follower_keeps_the_hw(log: Log) -> None:
    """A new epoch resets what the leader knows of followers; the HW must stay put."""
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0))
    partition.append_as_leader(batch(b"a", b"b"), NOW)
    assert partition.high_watermark == 2
    partition.apply_state(state(epoch=1, isr=(ME, OTHER)))
    assert partition.high_watermark == 2
    partition.append_as_leader(batch(b"c"), NOW)
    assert partition.high_watermark == 2
    assert partition.log_end_offset == 3


def test_same_epoch_isr_update_keeps_what_the_leader_knows_of_followers(log: Log) -> None:
    """Kafka resets follower state only on a new leader epoch; an ISR change at the same
    epoch must not forget follower LEOs, or acks=all stalls until every follower fetches."""
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=2, isr=(ME, OTHER), partition_epoch=0))
    partition.append_as_leader(batch(b"a", b"b"), NOW)
    partition.update_follower_fetch(OTHER, 2, 2, NOW)
    assert partition.high_watermark == 2
    partition.apply_state(state(epoch=2, isr=(ME, OTHER), partition_epoch=1))
    assert partition.remotes[OTHER].log_end_offset == 2


def test_follower_outside_the_isr_does_not_hold_back_the_hw(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME,), replicas=(ME, OTHER)))
    partition.append_as_leader(batch(b"a"), NOW)
    assert partition.high_watermark == 1


def test_hw_survives_becoming_follower(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0))
    partition.append_as_leader(batch(b"a"), NOW)
    partition.apply_state(state(leader=OTHER, epoch=1, isr=(OTHER, ME)))
    assert partition.high_watermark == 1
    assert not partition.maybe_increment_high_watermark()


@pytest.mark.parametrize("request_epoch", [-1, 5])
def test_check_leader_epoch_passes_for_current_or_unset(log: Log, request_epoch: int) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=5))
    partition.check_leader_epoch(request_epoch)  # no error


def test_check_leader_epoch_older_is_fenced(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=5))
    with pytest.raises(FencedLeaderEpochError) as info:
        partition.check_leader_epoch(4)
    assert info.value.code == ErrorCode.FENCED_LEADER_EPOCH == 74


def test_check_leader_epoch_newer_is_unknown(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=5))
    with pytest.raises(UnknownLeaderEpochError) as info:
        partition.check_leader_epoch(6)
    assert info.value.code == ErrorCode.UNKNOWN_LEADER_EPOCH == 75


def _leader_with_uncommitted_tail(log: Log) -> Partition:
    """Offsets 0-1 committed (HW 2), offset 2 only on the leader (LEO 3)."""
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME, OTHER)))
    partition.append_as_leader(batch(b"a", b"b"), NOW)
    partition.update_follower_fetch(OTHER, 2, 2, NOW)
    partition.append_as_leader(batch(b"c"), NOW)
    assert (partition.high_watermark, partition.log_end_offset) == (2, 3)
    return partition


def test_consumer_read_stops_at_the_high_watermark(log: Log) -> None:
    partition = _leader_with_uncommitted_tail(log)
    result = partition.read(0, 1 << 20, replica_id=-1, min_one_batch=True)
    assert values(result.data.read()) == [b"a", b"b"]
    assert result.high_watermark == 2 and result.log_end_offset == 3
    assert result.log_start_offset == 0
    at_hw = partition.read(2, 1 << 20, replica_id=-1, min_one_batch=True)
    assert at_hw.data.read() == b""


def test_the_debug_replica_id_reads_only_below_the_high_watermark(log: Log) -> None:
    """-2 is a consumer to Fetch (Kafka's FetchIsolation.of: LOG_END is for followers only)."""
    partition = _leader_with_uncommitted_tail(log)
    result = partition.read(0, 1 << 20, replica_id=-2, min_one_batch=True)
    assert values(result.data.read()) == [b"a", b"b"]
    assert result.high_watermark == 2 and result.log_end_offset == 3
    assert partition.read(2, 1 << 20, replica_id=-2, min_one_batch=True).data.read() == b""


def test_follower_reads_to_the_log_end(log: Log) -> None:
    partition = _leader_with_uncommitted_tail(log)
    result = partition.read(2, 1 << 20, replica_id=OTHER, min_one_batch=True)
    assert values(result.data.read()) == [b"c"]


@pytest.mark.parametrize("replica_id", [99, -3])
def test_unknown_replica_id_does_not_see_uncommitted_records(log: Log, replica_id: int) -> None:
    """Only the partition's own replicas may read past the HW, as in Kafka's FetchIsolation;
    any other id reading to the LEO lets a consumer see records that may yet be truncated
    away."""
    partition = _leader_with_uncommitted_tail(log)
    try:
        result = partition.read(0, 1 << 20, replica_id=replica_id, min_one_batch=True)
    except NotLeaderError:
        return  # rejecting the id outright is also fine
    assert b"c" not in values(result.data.read())


def test_read_past_the_log_end_is_out_of_range(log: Log) -> None:
    partition = _leader_with_uncommitted_tail(log)
    with pytest.raises(OffsetOutOfRangeError) as info:
        partition.read(4, 1000, replica_id=-1, min_one_batch=True)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE


def test_read_respects_max_bytes_but_returns_one_batch_when_asked(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0))
    first = batch(b"x" * 200)
    partition.append_as_leader(first, NOW)
    partition.append_as_leader(batch(b"y" * 200), NOW)
    one = partition.read(0, 10, replica_id=-1, min_one_batch=True).data.read()
    assert len(one) == len(first) and values(one) == [b"x" * 200]
    # Without min_one_batch the slice is cut at max_bytes (clients drop a partial batch).
    partial = partition.read(0, 10, replica_id=-1, min_one_batch=False).data.read()
    assert partial == first[:10]


# -- the ISR, from the leader's side ---------------------------------------------------------


def test_a_follower_that_catches_up_is_proposed_for_the_isr(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME,), replicas=(ME, OTHER)), NOW)
    partition.append_as_leader(batch(b"a", b"b"), NOW)
    assert partition.high_watermark == 2
    partition.update_follower_fetch(OTHER, 1, 2, NOW)
    assert partition.isr_to_expand() is None  # behind the HW
    partition.update_follower_fetch(OTHER, 2, 2, NOW)
    assert partition.isr_to_expand() == (ME, OTHER)


def test_only_the_fetching_follower_may_join_the_isr(log: Log) -> None:
    """A follower that died caught up is dropped after the lag time; another follower's
    fetch must not let it straight back in (the ISR flapped every lag/2 while it was down)."""
    third = 3
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME, third), replicas=(ME, OTHER, third)), NOW)
    partition.append_as_leader(batch(b"a"), NOW)
    partition.update_follower_fetch(OTHER, 1, 1, NOW)  # OTHER caught up, then died
    partition.update_follower_fetch(third, 1, 1, NOW + 5_000)
    assert partition.isr_to_expand(third) is None
    assert partition.isr_to_expand(OTHER) == (ME, OTHER, third)


def test_pending_expansion_counts_the_joiner_for_the_hw(log: Log) -> None:
    """KIP-497's maximal ISR: while the write is in flight the HW may not pass the joiner."""
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME,), replicas=(ME, OTHER)), NOW)
    partition.append_as_leader(batch(b"a"), NOW)
    partition.update_follower_fetch(OTHER, 1, 1, NOW)
    partition.begin_isr_update((ME, OTHER))
    partition.append_as_leader(batch(b"b"), NOW)
    assert partition.high_watermark == 1  # OTHER has only offset 0
    assert partition.isr_to_expand() is None  # one write at a time
    assert not partition.complete_isr_update((ME, OTHER), 0, 7)
    assert (partition.isr, partition.partition_epoch, partition.pending_isr) == (
        (ME, OTHER),
        7,
        None,
    )
    assert partition.update_follower_fetch(OTHER, 2, 2, NOW)
    assert partition.high_watermark == 2


def test_a_failed_expansion_releases_the_hw_it_held(log: Log) -> None:
    """The joiner's LEO held the HW while the expansion was pending (maximal ISR); once the
    write fails the HW is the old ISR's again, at once, not at the next append or fetch."""
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME,), replicas=(ME, OTHER), partition_epoch=3), NOW)
    partition.append_as_leader(batch(b"a"), NOW)
    partition.update_follower_fetch(OTHER, 1, 1, NOW)
    partition.begin_isr_update((ME, OTHER))
    partition.append_as_leader(batch(b"b"), NOW)
    assert partition.high_watermark == 1  # held at OTHER's LEO
    assert partition.complete_isr_update((ME, OTHER), 0, None)  # the HW moved: wake its key
    assert (partition.isr, partition.pending_isr, partition.high_watermark) == ((ME,), None, 2)


def test_a_lost_isr_write_keeps_the_old_isr(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME, OTHER), partition_epoch=3), NOW)
    partition.begin_isr_update((ME,))
    partition.complete_isr_update((ME,), 0, None)
    assert (partition.isr, partition.partition_epoch, partition.pending_isr) == (
        (ME, OTHER),
        3,
        None,
    )


def test_an_isr_write_overtaken_by_leader_and_isr_is_ignored(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME, OTHER)), NOW)
    partition.begin_isr_update((ME,))
    partition.apply_state(state(epoch=1, isr=(ME, OTHER), partition_epoch=5), NOW)
    partition.complete_isr_update((ME,), 0, 1)
    assert (partition.isr, partition.partition_epoch) == ((ME, OTHER), 5)


def test_a_silent_isr_follower_is_shrunk_after_the_lag_time(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME, OTHER)), NOW)
    assert partition.isr_to_shrink(NOW + 30_000, 30_000) is None  # a full lag time to fetch
    assert partition.isr_to_shrink(NOW + 30_001, 30_000) == (ME,)


def test_a_follower_that_keeps_up_stays_in_the_isr(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=0, isr=(ME, OTHER)), NOW)
    for step in range(1, 10):
        now = NOW + step * 10_000
        partition.append_as_leader(batch(b"x"), now)
        partition.update_follower_fetch(
            OTHER, partition.log_end_offset, partition.log_end_offset, now
        )
        assert partition.isr_to_shrink(now + 1, 30_000) is None


# -- following -------------------------------------------------------------------------------


def test_follower_appends_the_leaders_batches_and_caps_the_hw(log: Log, tmp_path: Path) -> None:
    leader_log = Log.open(tmp_path / "leader", LogConfig(), now_ms=NOW)
    try:
        leader = Partition("t", 0, OTHER, leader_log)
        leader.apply_state(state(leader=OTHER, epoch=4, isr=(OTHER,), replicas=(OTHER, ME)), NOW)
        leader.append_as_leader(batch(b"a", b"b"), NOW)
        leader.append_as_leader(batch(b"c"), NOW)
        follower = Partition("t", 0, ME, log)
        follower.apply_state(state(leader=OTHER, epoch=4, isr=(OTHER,), replicas=(OTHER, ME)), NOW)
        data = leader.read(0, 1 << 20, replica_id=ME, min_one_batch=True).data.read()
        follower.append_as_follower(data, 99, NOW)
        assert follower.log_end_offset == 3 and follower.high_watermark == 3
        assert log.leader_epoch_cache.entries() == [EpochEntry(4, 0)]
        follower.truncate_to(1)  # batches are atomic: offsets 0-1 go together
        assert follower.log_end_offset == 0 and follower.high_watermark == 0
    finally:
        leader_log.close()


def test_leader_and_isr_with_an_older_partition_epoch_is_refused(log: Log) -> None:
    """A retried or slow LeaderAndIsr must not roll back the ISR the leader wrote since."""
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=3, isr=(ME, OTHER), partition_epoch=4), NOW)
    partition.begin_isr_update((ME,))
    partition.complete_isr_update((ME,), 3, 5)
    assert not partition.apply_state(state(epoch=3, isr=(ME, OTHER), partition_epoch=4), NOW)
    assert (partition.isr, partition.partition_epoch) == ((ME,), 5)
    assert partition.apply_state(state(epoch=3, isr=(ME,), partition_epoch=5), NOW)  # a repeat


def test_a_successful_isr_write_is_adopted_after_a_same_epoch_leader_and_isr(log: Log) -> None:
    partition = Partition("t", 0, ME, log)
    partition.apply_state(state(epoch=3, isr=(ME, OTHER), partition_epoch=4), NOW)
    partition.begin_isr_update((ME,))
    partition.apply_state(state(epoch=3, isr=(ME, OTHER), partition_epoch=4), NOW)  # a retry
    assert partition.pending_isr is None
    partition.complete_isr_update((ME,), 3, 5)  # ZooKeeper has it: it is the newest state
    assert (partition.isr, partition.partition_epoch) == ((ME,), 5)
