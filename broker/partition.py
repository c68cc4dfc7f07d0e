"""One partition replica on this broker: its log, its role, its leader epoch and high watermark.

Synchronous, no trio: the replica manager calls it. The leader's HW is the minimum LEO over the
ISR and never moves backwards; remote replicas' LEOs arrive with their fetches (the replication
issue fills `remote_log_end_offsets`). With an ISR of just the leader, HW follows the LEO.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import structlog

from broker.log.log import FetchDataInfo, Log, LogAppendInfo
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState

__all__ = ["FencedLeaderEpochError", "NotLeaderError", "Partition", "ReadResult"]

DEBUG_REPLICA_ID = -2  # Kafka's debugging consumer: reads up to the LEO


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
    partition_epoch: int = -1
    isr: tuple[int, ...] = ()
    replicas: tuple[int, ...] = ()
    high_watermark: int = 0
    min_insync_replicas: int | None = None  # the topic's override of the broker default
    remote_log_end_offsets: dict[int, int] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.high_watermark = min(self.high_watermark, self.log.log_end_offset)

    @property
    def is_leader(self) -> bool:
        return self.leader_id == self.broker_id

    @property
    def log_end_offset(self) -> int:
        return self.log.log_end_offset

    def _logger(self) -> structlog.stdlib.BoundLogger:
        return structlog.get_logger("highwater.partition").bind(  # type: ignore[no-any-return]
            topic=self.topic, partition=self.index, leader_epoch=self.leader_epoch
        )

    # -- role changes (from LeaderAndIsr) ------------------------------------------------

    def apply_state(self, state: LeaderAndIsrPartitionState) -> bool:
        """Take the controller's view; False (and no change) if its leader epoch is older."""
        if state.leader_epoch < self.leader_epoch:
            return False
        was_leader = self.is_leader
        new_epoch = state.leader_epoch != self.leader_epoch
        self.leader_id = state.leader
        self.leader_epoch = state.leader_epoch
        self.partition_epoch = state.partition_epoch
        self.isr = tuple(state.isr)
        self.replicas = tuple(state.replicas)
        if self.is_leader:
            # KIP-101: the new epoch starts at the current LEO.
            self.log.leader_epoch_cache.assign(self.leader_epoch, self.log_end_offset)
            known = {} if new_epoch else self.remote_log_end_offsets
            self.remote_log_end_offsets = {
                r: known.get(r, -1) for r in self.replicas if r != self.broker_id
            }
            self.maybe_increment_high_watermark()
            if not was_leader:
                self._logger().info("became leader", isr=list(self.isr))
        else:
            self.remote_log_end_offsets = {}
            self._logger().info("became follower", leader=self.leader_id)
        return True

    # -- data ----------------------------------------------------------------------------

    def check_leader_epoch(self, current_leader_epoch: int) -> None:
        """KIP-320 fencing: -1 skips the check."""
        if current_leader_epoch < 0 or current_leader_epoch == self.leader_epoch:
            return
        if current_leader_epoch < self.leader_epoch:
            raise FencedLeaderEpochError(
                f"request epoch {current_leader_epoch} < current {self.leader_epoch}"
            )
        raise UnknownLeaderEpochError(
            f"request epoch {current_leader_epoch} > current {self.leader_epoch}"
        )

    def append_as_leader(self, records: bytes, now_ms: int) -> LogAppendInfo:
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.broker_id} does not lead {self.topic}-{self.index}")
        info = self.log.append_as_leader(records, self.leader_epoch, now_ms)
        self.maybe_increment_high_watermark()
        return info

    def maybe_increment_high_watermark(self) -> bool:
        """HW = min LEO over the ISR; it never moves backwards."""
        if not self.is_leader:
            return False
        candidate = self.log_end_offset
        for replica in self.isr:
            if replica != self.broker_id:
                candidate = min(candidate, self.remote_log_end_offsets.get(replica, -1))
        if candidate > self.high_watermark:
            self.high_watermark = candidate
            return True
        return False

    def reads_to_log_end(self, replica_id: int) -> bool:
        """Followers (assigned replicas) and the debug id see up to the LEO; anyone else is a
        consumer and sees only committed records."""
        if replica_id == DEBUG_REPLICA_ID:
            return True
        return replica_id >= 0 and replica_id != self.broker_id and replica_id in self.replicas

    def read(
        self, fetch_offset: int, max_bytes: int, *, replica_id: int, min_one_batch: bool
    ) -> ReadResult:
        """Consumers read below the HW; followers and the debug id read up to the LEO."""
        if not self.is_leader:
            raise NotLeaderError(f"broker {self.broker_id} does not lead {self.topic}-{self.index}")
        max_offset = None if self.reads_to_log_end(replica_id) else self.high_watermark
        data = self.log.read(
            fetch_offset, max_bytes, max_offset=max_offset, min_one_batch=min_one_batch
        )
        return ReadResult(data, self.high_watermark, self.log.log_start_offset, self.log_end_offset)
