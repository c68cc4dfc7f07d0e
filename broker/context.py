"""Everything a request handler may touch, in one object handed to each handler."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from broker.metadata_cache import MetadataCache
from broker.purgatory import Purgatory
from broker.replica_manager import ReplicaManager

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from controller.zk_client import ZkClient

__all__ = ["METADATA_KEY", "BrokerContext", "wall_clock_ms"]

# Purgatory key notified whenever the metadata cache changes (CreateTopics/DeleteTopics wait on it).
METADATA_KEY = ("__metadata__",)


def wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


@dataclass(slots=True)
class BrokerContext:
    config: BrokerConfig
    replica_manager: ReplicaManager
    metadata: MetadataCache = field(default_factory=MetadataCache)
    purgatory: Purgatory = field(default_factory=Purgatory)
    zk: ZkClient | None = None
    broker_epoch: int = -1
    # The highest controller epoch seen in a controller request (STALE_CONTROLLER_EPOCH below).
    controller_epoch: int = -1
    cluster_id: str | None = None

    def accept_controller_epoch(self, epoch: int) -> bool:
        """False for a request from an older controller (STALE_CONTROLLER_EPOCH)."""
        if epoch < self.controller_epoch:
            return False
        self.controller_epoch = epoch
        return True

    @property
    def broker_id(self) -> int:
        return self.replica_manager.broker_id

    def now_ms(self) -> int:
        return wall_clock_ms()
