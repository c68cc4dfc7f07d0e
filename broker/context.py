"""Everything a request handler may touch, in one object handed to each handler."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

import trio

from broker.metadata_cache import MetadataCache
from broker.partition import Partition
from broker.purgatory import Purgatory
from broker.replica_manager import ReplicaManager
from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.producer_id_manager import ProducerIdManager
    from controller.controller import Controller
    from controller.zk_client import ZkClient

__all__ = ["METADATA_KEY", "BrokerContext", "Fetchers", "IsrUpkeep", "wall_clock_ms"]


class Fetchers(Protocol):
    """What handlers ask of the followers' fetching (broker/replica_fetcher.py)."""

    def follow(self, tp: TopicPartition, leader: BrokerEndpoint, leader_epoch: int) -> None: ...

    def unfollow(self, tp: TopicPartition) -> None: ...


class IsrUpkeep(Protocol):
    """What handlers ask of the leaders' ISR upkeep (broker/isr_manager.py)."""

    def maybe_expand(self, partition: Partition) -> None: ...


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
    controller: Controller | None = None  # this broker's controller candidate
    fetchers: Fetchers | None = None  # followers' fetching (None: not started)
    isr: IsrUpkeep | None = None  # leaders' ISR upkeep (None: not started)
    producer_ids: ProducerIdManager | None = None  # InitProducerId (None: no ZooKeeper yet)
    broker_epoch: int = -1
    # The highest controller epoch seen in a controller request (STALE_CONTROLLER_EPOCH below).
    controller_epoch: int = -1
    cluster_id: str | None = None
    _registered: trio.Event = field(default_factory=trio.Event)

    def registered(self, broker_epoch: int) -> None:
        """This process's registration znode exists, with this czxid (again, after a session
        expiry): controller requests are admitted from now on."""
        self.broker_epoch = broker_epoch
        self._registered.set()

    async def admit_controller_request(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        """Wait (bounded) until this process has registered, then check the request's epochs.

        Until registration the controller may still address a previous, crashed process of
        this broker id (with a longer log): Kafka only starts processing requests once it has
        registered, and so do we; a request that arrives earlier is held, not refused, so the
        controller's first LeaderAndIsr to a starting broker is not lost. Then:
        STALE_CONTROLLER_EPOCH for a request from an older controller; STALE_BROKER_EPOCH for
        one meant for an earlier registration of this broker (-1: not checked)."""
        if self.broker_epoch < 0:
            with trio.move_on_after(self.config.request_timeout_ms / 1000):
                await self._registered.wait()
            if self.broker_epoch < 0:
                return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        self.controller_epoch = controller_epoch
        return ErrorCode.NONE

    @property
    def broker_id(self) -> int:
        return self.replica_manager.broker_id

    def now_ms(self) -> int:
        return wall_clock_ms()
