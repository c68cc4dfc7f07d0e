"""What every simulated component shares: config, randomness, clock, network, ZooKeeper,
the brokers, and the hooks through which the invariants observe what happens."""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from broker.config.broker_config import BrokerConfig
from broker.config.dynamic_update import BrokerDefaults
from broker.config.log_config import LogConfig
from protocol.topic_partition import TopicPartition
from tests.simulation.config import SimConfig
from tests.simulation.network import Network
from tests.simulation.scheduler import Scheduler
from tests.simulation.zk import SimZk

if TYPE_CHECKING:
    from controller.core import ControllerContext, ControllerEvent
    from controller.leading import Reply
    from tests.simulation.acl_workload import Decision, Served
    from tests.simulation.broker import SimBroker

__all__ = ["Ack", "World"]


@dataclass(frozen=True, slots=True)
class Ack:
    """An acks=all produce the leader acknowledged: HW past it and ISR >= min.insync."""

    tp: TopicPartition
    base_offset: int
    next_offset: int
    crc: int
    values: tuple[bytes, ...]
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]
    appended_ms: int  # 0: a resend the leader recognised (appended earlier, when unknown)
    acked_ms: int
    keys: tuple[bytes | None, ...] = ()


@dataclass
class World:
    seed: int
    config: SimConfig
    rng: random.Random
    scheduler: Scheduler
    zk: SimZk
    log_config: LogConfig
    replica_fetch_max_bytes: int
    trace: Callable[[str], None]
    brokers: dict[int, SimBroker] = field(default_factory=dict)
    network: Network | None = None  # set once the brokers exist
    on_ack: list[Callable[[Ack], None]] = field(default_factory=list)
    on_crash: list[Callable[[int], None]] = field(default_factory=list)
    # A broker's logs went offline (its disk failed them): (broker id, partitions).
    on_offline: list[Callable[[int, list[TopicPartition]], None]] = field(default_factory=list)
    # The controller answered a request (called in the step it decided, with its context).
    on_reply: list[Callable[[ControllerEvent, Reply | None, ControllerContext], None]] = field(
        default_factory=list
    )
    # A group coordinator committed an OffsetCommit (the request, the ack of its records).
    on_group_commit: list[Callable[[object, Ack], None]] = field(default_factory=list)
    # With an authorizer: the core's answers to brokers, and the requests brokers served.
    on_authorized: list[Callable[[Decision], None]] = field(default_factory=list)
    on_served: list[Callable[[Served], None]] = field(default_factory=list)
    compacted: set[str] = field(default_factory=set)  # topics with cleanup.policy=compact
    tombstoned: set[tuple[TopicPartition, bytes]] = field(default_factory=set)  # ever sent
    cleanings: int = 0  # cleaned segments swapped in, on any broker
    controller_count: int = 0  # controllers ever elected (for reports)
    controller_paused: bool = False  # scripted tests: hold the controller's event queue

    @property
    def now_ms(self) -> int:
        return self.scheduler.now_ms

    def broker_config(self, broker_id: int, data_dir: Path) -> BrokerConfig:
        """A simulated broker's server.properties: Kafka's settings, scaled down."""
        config = self.config
        return BrokerConfig(
            broker_id=broker_id,
            zookeeper_connect="simulated:2181",
            log_dirs=(str(data_dir),),
            log_segment_bytes=self.log_config.segment_bytes,
            min_insync_replicas=config.min_insync_replicas,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            replica_lag_time_max_ms=config.replica_lag_time_max_ms,
            isr_change_propagation_interval_ms=config.isr_change_propagation_interval_ms,
            isr_change_propagation_blackout_ms=config.isr_change_propagation_blackout_ms,
            isr_change_propagation_max_delay_ms=config.isr_change_propagation_max_delay_ms,
            replica_fetch_max_bytes=self.replica_fetch_max_bytes,
            replica_fetch_min_bytes=config.replica_fetch_min_bytes,
            replica_fetch_wait_max_ms=config.replica_fetch_wait_max_ms,
            replica_fetch_backoff_ms=config.replica_fetch_backoff_ms,
            request_timeout_ms=config.request_timeout_ms,
            log_retention_check_interval_ms=config.retention_check_interval_ms,
            log_flush_scheduler_interval_ms=config.flush_scheduler_interval_ms,
            replica_high_watermark_checkpoint_interval_ms=config.high_watermark_checkpoint_interval_ms,
            log_flush_offset_checkpoint_interval_ms=config.recovery_point_checkpoint_interval_ms,
            producer_id_expiration_check_interval_ms=config.producer_expiration_check_interval_ms,
        )

    @property
    def static_defaults(self) -> BrokerDefaults:
        """What every broker's server.properties sets (config_admin.static_defaults)."""
        config = self.config
        return BrokerDefaults(
            self.log_config, config.min_insync_replicas, config.unclean_leader_election_enable
        )

    @property
    def net(self) -> Network:
        assert self.network is not None
        return self.network

    def draw(self, bounds: tuple[int, int]) -> int:
        return self.rng.randint(*bounds)
