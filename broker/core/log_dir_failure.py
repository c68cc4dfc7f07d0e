"""Offline partitions (KIP-112; Kafka's ReplicaManager.handleLogDirFailure): what the shells
do when logs go offline, decided once for the trio shell (broker/log_dir_failure.py) and the
simulator. Stop fetching them, wake what waits on them, let the group coordinator drop the
offsets partitions it can no longer write; then rewrite the registration with every offline
partition and publish a log dir event (controller/zk_brokers.py has the scripts)."""

from __future__ import annotations

from dataclasses import dataclass

from broker.core.actions import Actions
from broker.core.controller_requests import FollowerChange
from broker.core.replica_manager import ReplicaManager
from protocol.topic_partition import TopicPartition

__all__ = ["OfflinePartitions", "take_offline"]


@dataclass(frozen=True, slots=True)
class OfflinePartitions:
    """`gone`: the partitions newly offline; `actions`: what the shell carries out first;
    `registered`: every offline partition, sorted, for the registration's rewrite."""

    gone: list[TopicPartition]
    actions: Actions
    registered: list[TopicPartition]


def take_offline(replica_manager: ReplicaManager) -> OfflinePartitions | None:
    """The partitions that went offline since the last call, and what to do about them;
    None when none did."""
    gone = replica_manager.take_offline()
    if not gone:
        return None
    actions = Actions(
        complete_keys=gone,
        follower_changes=[FollowerChange(tp) for tp in gone],
        group_resync=True,
    )
    return OfflinePartitions(gone, actions, sorted(replica_manager.offline))
