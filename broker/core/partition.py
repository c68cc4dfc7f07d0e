"""One partition replica on this broker: its log, its role, its leader epoch and high watermark.

Synchronous, no trio, time passed in: the replica manager, the fetch handler and the replica
fetcher call it. As leader it tracks each follower's LEO and caught-up time from their
fetches, moves the HW to the minimum LEO of the ISR (never backwards) and proposes ISR
changes; the shell writes them to ZooKeeper and reports back. As follower it appends the
leader's batches as they are, truncates where told, and takes min(leader HW, own LEO) as HW.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from broker.core.replication import (
    RemoteReplica,
    can_join_isr,
    high_watermark_candidate,
    out_of_sync_replicas,
)
from broker.log.log import FetchDataInfo, Log, LogAppendInfo
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.fetch import FetchPartitionData
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState

__all__ = ["FencedLeaderEpochError", "NotLeaderError", "Partition", "ReadResult"]

DEBUG_REPLICA_ID = -2  # Kafka's debugging consumer: lists the LEO, fetches below the HW


class NotLeaderError(HighwaterError):
    code = ErrorCode.NOT_LEADER_OR_FOLLOWER


class FencedLeaderEpochError(HighwaterError):
    code = ErrorCode.FENCED_LEADER_EPOCH


class UnknownLeaderEpochError(HighwaterError):
    code = ErrorCode.UNKNOWN_LEADER_EPOCH


@dataclass(frozen=True, slots=True)
class ReadResult:
    data: FetchDataInfo
    high_watermark: int
    log_start_offset: int
    log_end_offset: int


@dataclass(slots=True)
class Partition:
    topic: str
    index: int
    broker_id: int
    log: Log
    leader_id: int = -1
    leader_epoch: int = -1
    partition_epoch: int = -1  # the state znode's zkVersion: ISR writes are CAS on it
    controller_epoch: int = -1
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    # A reassignment in progress: the replicas being added, and the bytes/s they may copy at.
    adding_replicas: tuple[int, ...] = ()
    replication_throttle_bytes_per_sec: int = -1
    high_watermark: int = 0
    min_insync_replicas: int | None = None  # the topic's override of the broker default
    remotes: dict[int, RemoteReplica] = field(default_factory=dict)  # leader only
    leader_epoch_start_offset: int = 0  # the LEO when this leader epoch began
    # An ISR change written to ZooKeeper but not yet confirmed. Until it is, the HW counts
    # the union of both ISRs (KIP-497's "maximal ISR"), so a joining follower that a new
    # leader might be elected from is never behind the HW.
    pending_isr: tuple[int, ...] | None = None
    # The last Fetch answer of no records (broker.core.fetch), reused while it stays true.
    empty_fetch_answer: FetchPartitionData | None = None

    def __post_init__(self) -> None:
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    @property
    def maximal_isr(self) -> tuple[int, ...]:
        if self.pending_isr is None:
            return self.isr
        return tuple(sorted({*self.isr, *self.pending_isr}))

    def _logger(self) -> structlog.stdlib.BoundLogger:
        return structlog.get_logger("highwater.partition").bind(  # type: ignore[no-any-return]
            topic=self.topic, partition=self.index, leader_epoch=self.leader_epoch
        )

    # -- role changes (from LeaderAndIsr) ------------------------------------------------

    def apply_state(self, state: LeaderAndIsrPartitionState, now_ms: int = 0) -> bool:
        """Take the controller's view; False (and no change) if it is older than ours: an
        older leader epoch, or the same one with an older partition epoch (a retried request,
        or one sent before our own ISR write, which would roll the ISR back)."""
        if state.leader_epoch < self.leader_epoch or (
            state.leader_epoch == self.leader_epoch and state.partition_epoch < self.partition_epoch
        ):
            return False
        was_leader = self.is_leader
        new_epoch = state.leader_epoch != self.leader_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.controller_epoch = state.controller_epoch
        self.isr = tuple(state.isr)
        self.replicas = tuple(state.replicas)
        self.adding_replicas = tuple(state.adding_replicas)
        self.replication_throttle_bytes_per_sec = state.replication_throttle_bytes_per_sec
        self.pending_isr = None  # the controller's write supersedes ours
        if self.is_leader:
            if new_epoch or not was_leader:
                self._become_leader(now_ms)
            self.maybe_increment_high_watermark()
            if not was_leader:
                self._logger().info("became leader", isr=list(self.isr))
        else:
            self.remotes = {}
            self.high_watermark = min(self.high_watermark, self.log_end_offset)
            self._logger().info("became follower", leader=self.leader_id)
        return True

    def _become_leader(self, now_ms: int) -> None:
        # KIP-101: the new epoch starts at the current LEO. Followers' LEOs are unknown until
        # they fetch; ISR members count as caught up now, so they get a full lag time to fetch.
        self.leader_epoch_start_offset = self.log_end_offset
        self.log.leader_epoch_cache.assign(self.leader_epoch, self.log_end_offset)
        self.remotes = {
            r: RemoteReplica(last_caught_up_time_ms=now_ms if r in self.isr else 0)
            for r in self.replicas
            if r != self.broker_id
        }

    # -- data ----------------------------------------------------------------------------

    def in_leader_epoch(self, current_leader_epoch: int) -> bool:
        """KIP-320: a request made in this leader epoch (-1 asks for none)."""
        return current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing: -1 skips the check."""
        if self.in_leader_epoch(current_leader_epoch):
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"request epoch {current_leader_epoch} < current {self.leader_epoch}"
            )
        raise UnknownLeaderEpochError(
            f"request epoch {current_leader_epoch} > current {self.leader_epoch}"
        )

    def append_as_leader(self, records: bytes, wall_ms: int) -> LogAppendInfo:
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.broker_id} does not lead {self.topic}-{self.index}")
        info = self.log.append_as_leader(records, self.leader_epoch, wall_ms)
        self.maybe_increment_high_watermark()
        return info

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the (maximal) ISR; it never moves backwards."""
        if not self.is_leader:
            return False
        candidate = high_watermark_candidate(
            self.broker_id, self.log_end_offset, self.maximal_isr, self.remotes
        )
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def reads_to_log_end(self, replica_id: int) -> bool:
        """Only followers (assigned replicas) fetch up to the LEO; anyone else is a consumer
        and sees only committed records. The debug id (-2) is a consumer here: Kafka's
        FetchIsolation.of gives LOG_END to followers alone, so no client reads records that
        may yet be truncated away. (ListOffsets still answers -2 with the LEO.)"""
        return replica_id >= 0 and replica_id != self.broker_id and replica_id in self.replicas

    def read(
        self, fetch_offset: int, max_bytes: int, *, replica_id: int, min_one_batch: bool
    ) -> ReadResult:
        """Consumers (the debug id too) read below the HW; followers read up to the LEO."""
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.broker_id} does not lead {self.topic}-{self.index}")
        max_offset = None if self.reads_to_log_end(replica_id) else self.high_watermark
        data = self.log.read(
            fetch_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch
        )
        return ReadResult(data, self.high_watermark, self.log.log_start_offset, self.log_end_offset)

    # -- leader: followers and the ISR ---------------------------------------------------

    def update_follower_fetch(
        self, replica_id: int, fetch_offset: int, leader_log_end_offset: int, now_ms: int
    ) -> bool:
        """A follower fetched from `fetch_offset` (so its LEO is that) while our LEO was
        `leader_log_end_offset`. Returns True if the HW moved."""
        remote = self.remotes.get(replica_id)
        if not self.is_leader or remote is None:
            return False
        previous = remote.log_end_offset
        remote.on_fetch(fetch_offset, leader_log_end_offset, now_ms)
        # As Kafka's updateFollowerFetchState: only a follower LEO that moved can move the HW
        # here (appends, ISR changes and LeaderAndIsr check it themselves).
        return remote.log_end_offset != previous and self.maybe_increment_high_watermark()

    def isr_to_expand(self, fetched_by: int | None = None) -> tuple[int, ...] | None:
        """The ISR with caught-up followers added, or None if no one can join (or an ISR write
        is already in flight). `fetched_by`: only that follower, the one whose fetch this
        answers, may join (Kafka's maybeExpandIsr(followerReplica)): a follower that died
        caught up must not be let back in on another follower's fetch, just after the lag
        time dropped it."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        if fetched_by is not None and fetched_by in self.isr:
            return None  # the usual fetch: a member already
        joining = [
            r
            for r, remote in self.remotes.items()
            if r not in self.isr
            and (fetched_by is None or r == fetched_by)
            and r in self.replicas
            and can_join_isr(
                remote.log_end_offset, self.high_watermark, self.leader_epoch_start_offset
            )
        ]
        if not joining:
            return None
        return tuple(sorted({*self.isr, *joining}))

    def isr_to_shrink(self, now_ms: int, replica_lag_time_max_ms: int) -> tuple[int, ...] | None:
        """The ISR without followers that have not caught up within the lag time, or None."""
        if not self.is_leader or self.pending_isr is not None:
            return None
        lagging = out_of_sync_replicas(
            self.broker_id, self.isr, self.remotes, now_ms, replica_lag_time_max_ms
        )
        if not lagging:
            return None
        return tuple(r for r in self.isr if r not in lagging)

    def begin_isr_update(self, new_isr: tuple[int, ...]) -> None:
        self.pending_isr = new_isr

    def complete_isr_update(
        self, new_isr: tuple[int, ...], leader_epoch: int, new_partition_epoch: int | None
    ) -> bool:
        """The ZooKeeper write of `new_isr` (made in `leader_epoch`) finished: None means it
        lost the compare-and-set, so keep the old ISR and wait for the controller. A write that
        succeeded is adopted even if a LeaderAndIsr of the same leader epoch arrived while it
        was out: it is then the newest state in ZooKeeper. Returns True if the HW moved.

        Whatever the outcome, the HW is computed again: the maximal ISR lost the pending
        members, and a pending expansion whose joiner is behind held the HW at its LEO."""
        if self.pending_isr == new_isr:
            self.pending_isr = None
        if self.leader_epoch != leader_epoch or not self.is_leader:
            return self.maybe_increment_high_watermark()  # a new leader epoch superseded it
        if new_partition_epoch is None:
            self._logger().info("isr update lost a race; waiting for the controller")
            return self.maybe_increment_high_watermark()
        if new_partition_epoch <= self.partition_epoch:
            return self.maybe_increment_high_watermark()  # something newer was applied
        old = self.isr
        self.isr = new_isr
        self.partition_epoch = new_partition_epoch
        self._logger().info(
            "isr shrunk" if len(new_isr) < len(old) else "isr expanded",
            old_isr=list(old),
            isr=list(new_isr),
        )
        return self.maybe_increment_high_watermark()

    # -- follower --------------------------------------------------------------------------

    def append_as_follower(
        self, records: bytes, leader_high_watermark: int, wall_ms: int
    ) -> LogAppendInfo | None:
        """Append the leader's batches as they are (offsets and epochs kept), then take the
        leader's HW, capped at our LEO."""
        info = self.log.append_as_follower(records, wall_ms) if records else None
        self.update_follower_high_watermark(leader_high_watermark)
        return info

    def update_follower_high_watermark(self, leader_high_watermark: int) -> None:
        new = min(leader_high_watermark, self.log_end_offset)
        if new > self.high_watermark:
            self.high_watermark = new

    def truncate_to(self, offset: int) -> None:
        """Drop a divergent tail (KIP-101). The HW can only fall if it was above the new end."""
        if self.log.truncate_to(offset):
            self._logger().info("truncated", offset=offset, log_end_offset=self.log_end_offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)
