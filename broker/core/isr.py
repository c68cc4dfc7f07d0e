"""The leader's ISR upkeep as decisions (Kafka's isr-expiration and isr-change-propagation).

`Partition` decides who lags and who may join; `IsrCore` turns that into writes of the
partition state znode (compare-and-set on the partition epoch), applies their outcome, and
decides when the gathered changes are published to `/isr_change_notification` (damped:
`isr.change.propagation.*`). The shell runs the writes (zk_isr scripts) and the timers.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from broker.core.partition import Partition
from broker.core.replication import should_propagate_isr_changes
from controller.zk_data import PartitionStateZnode
from protocol.topic_partition import TopicPartition

__all__ = ["IsrCore", "IsrSettings", "IsrWrite"]


@dataclass(frozen=True, slots=True)
class IsrSettings:
    replica_lag_time_max_ms: int
    propagation_blackout_ms: int  # no change for this long: publish
    propagation_max_delay_ms: int  # publish at the latest this long after the last publication


@dataclass(frozen=True, slots=True)
class IsrWrite:
    """A decided ISR change, to be written by CAS at `expected_version`. Its epochs are taken
    when it is decided: a LeaderAndIsr may change the partition before the write runs."""

    tp: TopicPartition
    znode: PartitionStateZnode
    expected_version: int


@dataclass(slots=True)
class IsrCore:
    broker_id: int
    settings: IsrSettings
    last_propagation_ms: int
    changed: set[TopicPartition] = field(default_factory=set)  # written, not yet published
    last_change_ms: int = 0
    # Outcomes of the writes, for the metrics (Kafka's IsrShrinksPerSec, IsrExpandsPerSec,
    # FailedIsrUpdatesPerSec, as counts): ISRs this broker shrank or expanded in ZooKeeper,
    # and writes that lost the compare-and-set or failed.
    isr_shrinks: int = 0
    isr_expands: int = 0
    failed_isr_updates: int = 0

    def maybe_expand(self, partition: Partition, follower: int) -> IsrWrite | None:
        """After `follower`'s fetch: let it back into the ISR if it has caught up."""
        new_isr = partition.isr_to_expand(follower)
        return None if new_isr is None else self._propose(partition, new_isr)

    def shrink(self, partitions: Iterable[Partition], now_ms: int) -> list[IsrWrite]:
        """The periodic isr-expiration: drop followers not caught up within the lag time."""
        writes = []
        for partition in partitions:
            new_isr = partition.isr_to_shrink(now_ms, self.settings.replica_lag_time_max_ms)
            if new_isr is not None:
                writes.append(self._propose(partition, new_isr))
        return writes

    def _propose(self, partition: Partition, new_isr: tuple[int, ...]) -> IsrWrite:
        partition.begin_isr_update(new_isr)
        znode = PartitionStateZnode(
            partition.broker_id, partition.leader_epoch, new_isr, partition.controller_epoch
        )
        tp = TopicPartition(partition.topic, partition.index)
        return IsrWrite(tp, znode, partition.partition_epoch)

    @staticmethod
    def still_wanted(write: IsrWrite, partition: Partition | None) -> bool:
        """False if a LeaderAndIsr superseded the proposal before its write started."""
        return (
            partition is not None
            and partition.pending_isr == write.znode.isr
            and partition.leader_epoch == write.znode.leader_epoch
        )

    def written(
        self, write: IsrWrite, partition: Partition | None, new_version: int | None, now_ms: int
    ) -> bool:
        """The write finished (None: it lost the CAS, or failed). True if the HW moved."""
        if new_version is None:
            self.failed_isr_updates += 1
        if partition is None:
            return False
        old_isr = partition.isr
        moved = partition.complete_isr_update(
            write.znode.isr, write.znode.leader_epoch, new_version
        )
        if new_version is not None and partition.isr == write.znode.isr:
            self.changed.add(write.tp)
            self.last_change_ms = now_ms
            if partition.isr != old_isr:
                if len(partition.isr) < len(old_isr):
                    self.isr_shrinks += 1
                else:
                    self.isr_expands += 1
        return moved

    def to_propagate(self, now_ms: int) -> set[TopicPartition] | None:
        """The changes to publish now (taken out of `changed`), or None: not yet."""
        if not should_propagate_isr_changes(
            bool(self.changed),
            self.last_change_ms,
            self.last_propagation_ms,
            now_ms,
            self.settings.propagation_blackout_ms,
            self.settings.propagation_max_delay_ms,
        ):
            return None
        changed, self.changed = self.changed, set()
        return changed

    def propagated(self, changed: set[TopicPartition], ok: bool, now_ms: int) -> None:
        """The notification was written (or failed: the changes wait for the next round)."""
        if ok:
            self.last_propagation_ms = now_ms
        else:
            self.changed |= changed
