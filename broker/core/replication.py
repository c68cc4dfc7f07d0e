"""The replication rules as plain functions of their inputs (Kafka's ISR and HW rules, KIP-101,
KIP-279).

No I/O, no clock: callers pass `now_ms`. Partition (leader side) and the replica fetcher
(follower side) apply these; the cluster simulation tests them over many seeded runs.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

__all__ = [
    "UNDEFINED_EPOCH",
    "UNDEFINED_OFFSET",
    "RemoteReplica",
    "Truncation",
    "can_join_isr",
    "high_watermark_candidate",
    "out_of_sync_replicas",
    "should_propagate_isr_changes",
    "truncation_for",
]

UNDEFINED_EPOCH = -1
UNDEFINED_OFFSET = -1


@dataclass(slots=True)
class RemoteReplica:
    """What a leader knows of one follower, from its fetches."""

    log_end_offset: int = -1  # unknown until its first fetch in this leader epoch
    last_caught_up_time_ms: int = 0
    last_fetch_leader_log_end_offset: int = -1
    last_fetch_time_ms: int = 0

    def on_fetch(self, fetch_offset: int, leader_log_end_offset: int, now_ms: int) -> None:
        """Kafka's Replica.updateFetchState: a follower is caught up at the time of a fetch
        that reached the leader's LEO, or at the previous fetch's time if this one reached the
        LEO the leader had then (it was caught up then, and has been fetching since)."""
        if fetch_offset >= leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, now_ms)
        elif fetch_offset >= self.last_fetch_leader_log_end_offset:
            self.last_caught_up_time_ms = max(self.last_caught_up_time_ms, self.last_fetch_time_ms)
        self.log_end_offset = fetch_offset
        self.last_fetch_leader_log_end_offset = leader_log_end_offset
        self.last_fetch_time_ms = now_ms


def high_watermark_candidate(
    leader_id: int,
    leader_log_end_offset: int,
    isr: Collection[int],
    remotes: Mapping[int, RemoteReplica],
) -> int:
    """Min LEO over the ISR (the leader's own LEO included). A member the leader has not heard
    from in this epoch counts as -1, so the HW waits for it."""
    candidate = leader_log_end_offset
    for replica in isr:
        if replica != leader_id:
            remote = remotes.get(replica)
            candidate = min(candidate, remote.log_end_offset if remote else -1)
    return candidate


def out_of_sync_replicas(
    leader_id: int,
    isr: Collection[int],
    remotes: Mapping[int, RemoteReplica],
    now_ms: int,
    replica_lag_time_max_ms: int,
) -> list[int]:
    """ISR followers that have not caught up within the lag time: stuck or too slow."""
    return sorted(
        r
        for r in isr
        if r != leader_id
        and (
            r not in remotes or now_ms - remotes[r].last_caught_up_time_ms > replica_lag_time_max_ms
        )
    )


def can_join_isr(
    follower_log_end_offset: int, high_watermark: int, epoch_start_offset: int
) -> bool:
    """A follower rejoins once it has everything committed and the current epoch's start
    (so it cannot have a divergent tail from an older epoch)."""
    return (
        follower_log_end_offset >= high_watermark and follower_log_end_offset >= epoch_start_offset
    )


@dataclass(frozen=True, slots=True)
class Truncation:
    """A follower's decision after an OffsetForLeaderEpoch answer."""

    offset: int  # truncate the log to this offset (records >= it go)
    complete: bool  # False: ask again with `next_epoch` (the leader's epoch is unknown here)
    next_epoch: int = UNDEFINED_EPOCH


def truncation_for(
    asked_epoch: int,
    leader_epoch: int,
    leader_end_offset: int,
    log_end_offset: int,
    high_watermark: int,
    local_end_offset_for: Callable[[int], tuple[int, int]],
) -> Truncation:
    """KIP-101 step 4 with KIP-279's iteration. `local_end_offset_for(epoch)` answers like the
    leader would, from the follower's own epoch cache: (largest epoch <= it, its end offset).

    - The leader has no epoch information (UNDEFINED offset): fall back to the HW.
    - The leader answered the epoch we asked about: keep what both have, up to its end.
    - The leader answered an older epoch E: if we have E too, our logs agree up to the smaller
      of the two ends of E. If we do not have E, truncate to the end of our largest epoch
      below E and ask again about that epoch.
    """
    if leader_end_offset == UNDEFINED_OFFSET:
        return Truncation(min(high_watermark, log_end_offset), complete=True)
    if leader_epoch in (UNDEFINED_EPOCH, asked_epoch):
        return Truncation(min(leader_end_offset, log_end_offset), complete=True)
    local_epoch, local_end = local_end_offset_for(leader_epoch)
    if local_end == UNDEFINED_OFFSET:
        # Nothing at or below the leader's epoch here: our whole log is newer, drop to its end.
        return Truncation(min(leader_end_offset, log_end_offset), complete=True)
    if local_epoch == leader_epoch:
        return Truncation(min(leader_end_offset, local_end, log_end_offset), complete=True)
    return Truncation(min(local_end, log_end_offset), complete=False, next_epoch=local_epoch)


def should_propagate_isr_changes(
    has_changes: bool,
    last_change_ms: int,
    last_propagation_ms: int,
    now_ms: int,
    blackout_ms: int,
    max_delay_ms: int,
) -> bool:
    """Kafka's damping of ISR change propagation (ZkAlterPartitionManager): publish gathered
    changes once none happened for the blackout time, or once the last publication is older
    than the maximum delay, so a burst costs the controller one notification, not many."""
    return has_changes and (
        now_ms - last_change_ms > blackout_ms or now_ms - last_propagation_ms > max_delay_ms
    )
