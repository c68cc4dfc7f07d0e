"""The replication rules as tables: follower truncation (KIP-101/279), caught-up time, HW,
ISR shrink/expand, and the ISR change propagation damping."""

from __future__ import annotations

import pytest

from broker.core.replication import (
    UNDEFINED_EPOCH,
    UNDEFINED_OFFSET,
    RemoteReplica,
    Truncation,
    can_join_isr,
    high_watermark_candidate,
    out_of_sync_replicas,
    should_propagate_isr_changes,
    truncation_for,
)
from broker.log.leader_epoch_cache import LeaderEpochCache


def lookup(entries: list[tuple[int, int]], log_end_offset: int):  # type: ignore[no-untyped-def]
    cache = LeaderEpochCache()
    for epoch, start in entries:
        cache.assign(epoch, start)
    return lambda epoch: cache.end_offset_for(epoch, log_end_offset)


# --- truncation ----------------------------------------------------------------------------


def test_leader_without_epoch_information_falls_back_to_the_hw() -> None:
    decision = truncation_for(3, UNDEFINED_EPOCH, UNDEFINED_OFFSET, 10, 7, lookup([(3, 0)], 10))
    assert decision == Truncation(7, complete=True)


def test_same_epoch_keeps_up_to_the_leaders_end() -> None:
    # Follower has epoch 2 up to 10; the leader's epoch 2 ended at 8: drop 8..9.
    decision = truncation_for(2, 2, 8, 10, 5, lookup([(1, 0), (2, 4)], 10))
    assert decision == Truncation(8, complete=True)


def test_same_epoch_never_truncates_past_our_own_end() -> None:
    decision = truncation_for(2, 2, 50, 10, 5, lookup([(2, 0)], 10))
    assert decision == Truncation(10, complete=True)


def test_kip101_scenario_1_no_loss_after_restart() -> None:
    """KIP-101 scenario 1: the follower restarted with HW 1 but holds offsets 0-1 (epoch 0);
    the leader's epoch 0 also ends at 2. HW-based truncation would drop offset 1; with epochs
    nothing goes."""
    decision = truncation_for(0, 0, 2, 2, 1, lookup([(0, 0)], 2))
    assert decision == Truncation(2, complete=True)


def test_kip101_scenario_2_divergent_tail_is_dropped() -> None:
    """KIP-101 scenario 2: both crashed; the old follower came back first as leader (epoch 1)
    with only offset 0 and took a new write at offset 1. The old leader has offset 1 from
    epoch 0: the new leader says epoch 0 ended at 1, so the follower drops its offset 1."""
    decision = truncation_for(0, 0, 1, 2, 2, lookup([(0, 0)], 2))
    assert decision == Truncation(1, complete=True)


def test_older_epoch_we_also_have_truncates_to_the_smaller_end() -> None:
    # Follower: epoch 1 at 0, epoch 3 at 6, LEO 9. Asked about 3, leader answers (1, 5):
    # the leader's epoch 1 ended at 5, ours at 6 -> both agree up to 5.
    decision = truncation_for(3, 1, 5, 9, 4, lookup([(1, 0), (3, 6)], 9))
    assert decision == Truncation(5, complete=True)


def test_kip279_leader_answers_an_epoch_we_never_had_so_we_ask_again() -> None:
    # Follower: epochs 1@0, 3@6, LEO 9. Leader never had 3 and answers (2, 7). We do not have
    # 2: truncate to the end of our largest epoch below 2 (epoch 1 ends at 6) and ask about 1.
    decision = truncation_for(3, 2, 7, 9, 4, lookup([(1, 0), (3, 6)], 9))
    assert decision == Truncation(6, complete=False, next_epoch=1)
    # Second round: asked about 1, leader answers (1, 7): we both have 1; ours ends at 6 (LEO).
    again = truncation_for(1, 1, 7, 6, 4, lookup([(1, 0)], 6))
    assert again == Truncation(6, complete=True)


def test_leader_answers_older_epoch_and_our_log_starts_later() -> None:
    # Our cache starts at epoch 5 (older entries were deleted with old segments); the leader
    # answers (2, 30). Our lookup for 2 gives (2, 10) -> same epoch, keep up to min(30, 10).
    decision = truncation_for(5, 2, 30, 40, 35, lookup([(5, 10)], 40))
    assert decision == Truncation(10, complete=True)


# --- followers' fetch state ----------------------------------------------------------------


def test_fetch_at_the_leaders_end_is_caught_up_now() -> None:
    remote = RemoteReplica()
    remote.on_fetch(10, 10, 1_000)
    assert (remote.log_end_offset, remote.last_caught_up_time_ms) == (10, 1_000)


def test_fetch_reaching_the_previous_fetchs_leader_end_is_caught_up_then() -> None:
    remote = RemoteReplica()
    remote.on_fetch(5, 10, 1_000)  # behind: not caught up
    assert remote.last_caught_up_time_ms == 0
    remote.on_fetch(10, 20, 2_000)  # reached what the leader had at 1_000
    assert remote.last_caught_up_time_ms == 1_000
    remote.on_fetch(12, 30, 3_000)  # did not reach 20
    assert remote.last_caught_up_time_ms == 1_000


def test_hw_is_the_minimum_over_the_isr_and_waits_for_unknown_members() -> None:
    remotes = {2: RemoteReplica(log_end_offset=7), 3: RemoteReplica(log_end_offset=4)}
    assert high_watermark_candidate(1, 9, (1, 2), remotes) == 7
    assert high_watermark_candidate(1, 9, (1, 2, 3), remotes) == 4
    assert high_watermark_candidate(1, 9, (1, 4), remotes) == -1
    assert high_watermark_candidate(1, 9, (1,), remotes) == 9


@pytest.mark.parametrize(
    ("caught_up_ms", "now_ms", "lagging"),
    [(0, 30_000, []), (0, 30_001, [2]), (5_000, 35_000, []), (5_000, 35_001, [2])],
)
def test_out_of_sync_after_the_lag_time(caught_up_ms: int, now_ms: int, lagging: list[int]) -> None:
    remotes = {2: RemoteReplica(last_caught_up_time_ms=caught_up_ms)}
    assert out_of_sync_replicas(1, (1, 2), remotes, now_ms, 30_000) == lagging


def test_isr_member_never_heard_of_is_out_of_sync() -> None:
    assert out_of_sync_replicas(1, (1, 3), {}, 0, 30_000) == [3]


@pytest.mark.parametrize(
    ("leo", "hw", "epoch_start", "joins"),
    [(10, 10, 8, True), (9, 10, 8, False), (10, 5, 11, False), (11, 10, 11, True)],
)
def test_join_needs_the_hw_and_the_current_epochs_start(
    leo: int, hw: int, epoch_start: int, joins: bool
) -> None:
    assert can_join_isr(leo, hw, epoch_start) is joins


# --- ISR change propagation damping --------------------------------------------------------


@pytest.mark.parametrize(
    ("has_changes", "last_change", "last_propagation", "now", "expected"),
    [
        (False, 0, 0, 100_000, False),  # nothing to say
        (True, 10_000, 9_000, 12_000, False),  # changes still arriving, published recently
        (True, 10_000, 9_000, 15_001, True),  # quiet for 5 s
        (True, 69_000, 9_000, 69_001, True),  # busy, but 60 s since the last publication
        (True, 68_000, 9_000, 69_000, False),  # busy, 60 s not yet passed
    ],
)
def test_propagation_damping(
    has_changes: bool, last_change: int, last_propagation: int, now: int, expected: bool
) -> None:
    assert (
        should_propagate_isr_changes(has_changes, last_change, last_propagation, now, 5_000, 60_000)
        is expected
    )
