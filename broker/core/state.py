"""What one broker process knows while it serves requests: its replicas, the controller's
metadata, its ISR upkeep, and the epochs that fence controller requests."""

from __future__ import annotations

from dataclasses import dataclass, field

from broker.core.fetch_session import FetchSessionCache
from broker.core.isr import IsrCore
from broker.core.metadata_cache import MetadataCache
from broker.core.replica_manager import ReplicaManager
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

__all__ = ["METADATA_KEY", "BrokerState", "ElectedController"]

# Purgatory key woken whenever the metadata changes (CreateTopics/DeleteTopics wait on it).
METADATA_KEY = ("__metadata__",)


@dataclass(frozen=True, slots=True)
class ElectedController:
    """The controller as ZooKeeper names it: `/controller`'s broker id (-1: none elected) and
    `/controller_epoch`."""

    broker_id: int
    epoch: int

    def sent(self, controller_id: int, controller_epoch: int) -> bool:
        """Whether a request claiming this controller id and epoch is from this controller."""
        return self.broker_id >= 0 and (controller_id, controller_epoch) == (
            self.broker_id,
            self.epoch,
        )


@dataclass(slots=True)
class BrokerState:
    replica_manager: ReplicaManager
    isr: IsrCore
    min_insync_replicas: int  # the broker default; a topic may override it
    metadata: MetadataCache = field(default_factory=MetadataCache)
    # KIP-227's sessions; the shell sizes it (max.incremental.fetch.session.cache.slots).
    fetch_sessions: FetchSessionCache = field(default_factory=lambda: FetchSessionCache(1000))
    # The highest controller epoch seen in a controller request (STALE_CONTROLLER_EPOCH below).
    controller_epoch: int = -1
    # This process's current registration (the znode's czxid); -1 until it has registered.
    broker_epoch: int = -1

    @property
    def broker_id(self) -> int:
        return self.replica_manager.broker_id

    def admit_controller_request(
        self,
        controller_epoch: int,
        broker_epoch: int,
        *,
        controller_id: int = -1,
        elected: ElectedController | None = None,
    ) -> ErrorCode:
        """Fence a controller request (the shell first waits, bounded, for registration:
        before it, the controller may still address a previous process of this broker id).
        STALE_CONTROLLER_EPOCH from an older controller, and from anyone but the controller
        ZooKeeper names (`elected`; None: no ZooKeeper to ask): an epoch above ZooKeeper's is
        never adopted, so one forged request cannot make the broker refuse the real controller
        until restart. STALE_BROKER_EPOCH for a request meant for an earlier registration
        (-1: not checked) or before registration."""
        if self.broker_epoch < 0:
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        if elected is not None and not elected.sent(controller_id, controller_epoch):
            return ErrorCode.STALE_CONTROLLER_EPOCH
        self.controller_epoch = controller_epoch
        return ErrorCode.NONE

    def enough_replicas(self, tp: TopicPartition) -> bool:
        """Kafka's acks=all rule: ISR size >= min(min.insync.replicas, replication factor).
        True for a partition this broker does not lead (the append reports that)."""
        partition = self.replica_manager.partitions.get(tp)
        if partition is None or not partition.is_leader:
            return True
        min_isr = partition.min_insync_replicas or self.min_insync_replicas
        return len(partition.isr) >= min(min_isr, len(partition.replicas))
