"""A simulated broker's state and views (tests/simulation/broker.py puts the parts together):
what survives its crashes (the data directory, the simulated disk, counters), what each
incarnation rebuilds (`_reset`), and the calls every part makes (respond, run a ZooKeeper
script)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import TypeVar, cast

from broker.config.dynamic_update import (
    BrokerDefaults,
)
from broker.core.cleaner_manager import CleanerManager
from broker.core.controlled_shutdown import ShutdownAttempts
from broker.core.follower import FetchState, FollowerSet
from broker.core.housekeeping import HousekeepingSchedule
from broker.core.partition import Partition
from broker.core.state import BrokerState
from broker.log.manager import LogManager
from controller.zk_script import ZkScript
from controller.zk_types import ZkError
from protocol.acl import Acls
from protocol.topic_partition import TopicPartition
from tests.simulation.controller_shell import SimController
from tests.simulation.disk import CrashCut, MirroredLog, SimDisk, SimSegment
from tests.simulation.fetcher import SimFetcher
from tests.simulation.group_shell import SimGroupCoordinator
from tests.simulation.network import Envelope
from tests.simulation.process import SimProcess
from tests.simulation.purgatory import SimPurgatory
from tests.simulation.world import World

__all__ = ["SimBrokerBase"]

T = TypeVar("T")


class SimBrokerBase(SimProcess):
    """What every part of a simulated broker reads: its state across and within incarnations,
    the views the scenario tests and invariants use, and its ZooKeeper session."""

    # Set by SimBroker.start (the cleaner's state, the scheduler's).
    cleaner: CleanerManager
    _housekeeping: HousekeepingSchedule

    def __init__(self, world: World, broker_id: int, data_dir: Path) -> None:
        super().__init__(world.scheduler, f"b{broker_id}")
        self.world = world
        self.broker_id = broker_id
        self.data_dir = data_dir
        self.session_id: int | None = None
        self.crashes = 0
        self.last_crash_ms = -1
        self.last_crash: dict[TopicPartition, CrashCut] = {}
        self.lost_data_in_last_crash = False
        self.shutting_down = False  # a controlled shutdown is under way
        self.shutdown_attempts: ShutdownAttempts | None = None  # the last one's, for views
        self.disk = SimDisk(world.rng)
        SimSegment.disks[data_dir] = self.disk
        self.fetch_sessions_seen: Counter[str] = Counter()  # across incarnations, for the report
        self._reset()

    def _reset(self) -> None:
        self.log_manager: LogManager | None = None
        self.state: BrokerState | None = None
        self.followers: FollowerSet | None = None
        self.fetchers: dict[int, SimFetcher] = {}
        self.purgatory = SimPurgatory(self)
        self.controller: SimController | None = None
        self.groups: SimGroupCoordinator | None = None
        # Every ACL, as last read from ZooKeeper (broker/acl_changes.py); with an authorizer.
        self.acls = Acls()
        # The config change listener's (broker/config/change_listener.py): the defaults in
        # force here, and the last notification handled.
        self.config_defaults: BrokerDefaults = self.world.static_defaults
        self._config_changes_seen = -1
        # The broker epoch of this process's first registration: its incarnation.
        self.first_broker_epoch: int | None = None
        # Partitions whose log went offline in this process, and when.
        self.offline_since: dict[TopicPartition, int] = {}

    # -- views (scenario tests and invariants) ---------------------------------------------

    @property
    def partitions(self) -> dict[TopicPartition, Partition]:
        return self.state.replica_manager.partitions if self.state is not None else {}

    @property
    def logs(self) -> dict[TopicPartition, MirroredLog]:
        logs = self.log_manager.logs if self.log_manager is not None else {}
        return cast("dict[TopicPartition, MirroredLog]", logs)

    @property
    def broker_epoch(self) -> int:
        return self.state.broker_epoch if self.state is not None else -1

    @property
    def controller_epoch(self) -> int:
        return self.state.controller_epoch if self.state is not None else -1

    def fetch_state(self, tp: TopicPartition) -> FetchState | None:
        return self.followers.fetch_state(tp) if self.followers is not None else None

    @property
    def wall_ms(self) -> int:
        """The wall clock the cores date stored things by (`wall_ms`, the log's `now_ms`);
        here the scheduler's clock, as `now_ms` (timers)."""
        return self.now_ms

    # -- the network and ZooKeeper ---------------------------------------------------------

    def _respond(self, envelope: Envelope, payload: object) -> None:
        self.world.net.respond(envelope, payload)

    def _zk_run(self, script: ZkScript[T], *, raising: bool = False) -> T | None:
        """Run a ZooKeeper script in our session; None if it fails (session gone)."""
        try:
            return self.world.zk.run(self.session_id, script)
        except ZkError:
            if raising:
                raise
            return None
