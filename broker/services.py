"""What the request handlers and the broker's tasks need from the broker's trio shells, as
narrow interfaces: `BrokerContext` holds these, not the shell classes, so the context does not
import the shells that import it (the shells satisfy them structurally).

A shell that is started after the listeners are (the fetchers, the ISR writer, the controller
candidate, the group coordinator) stands in as an explicit not-ready value until then, which
answers what a handler answers a request that comes too early (Kafka's NOT_CONTROLLER,
COORDINATOR_NOT_AVAILABLE); so does ZooKeeper, which an in-process broker never has.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Protocol, TypeVar

from broker.core.controller_requests import FollowerChange
from broker.core.follower import FetchState
from broker.core.group.coordinator import Decision, GroupCoordinatorCore, GroupSettings
from broker.core.isr import IsrWrite
from controller.core import ControllerContext, Reassignment
from controller.leading import ControllerStats
from controller.zk_script import ZkScript
from controller.zk_types import SessionState, ZkError
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from protocol.topic_partition import TopicPartition

__all__ = [
    "NOT_FETCHING",
    "NO_ZOOKEEPER",
    "ControllerView",
    "Fetchers",
    "Groups",
    "IsrWrites",
    "NoGroups",
    "NoZooKeeper",
    "NotController",
    "NotFetching",
    "ProducerIds",
    "ZkAccess",
    "ZkSessionView",
    "no_producer_ids",
]

_T = TypeVar("_T")

ShutdownAnswer = tuple[ErrorCode, list[TopicPartition]]
ElectionResults = dict[TopicPartition, ErrorCode]
ReassignmentTargets = dict[TopicPartition, tuple[int, ...] | None]


class ZkSessionView(Protocol):
    """The ZooKeeper session as metrics and the cluster view show it."""

    @property
    def session_state(self) -> SessionState: ...
    @property
    def disconnects(self) -> int: ...
    @property
    def expirations(self) -> int: ...
    @property
    def reconnects(self) -> int: ...


class ZkAccess(ZkSessionView, Protocol):
    """This broker's ZooKeeper session: scripts (controller.zk_*) run on it. `absent`: the
    broker has none at all (`NoZooKeeper`), not one that is only disconnected for now."""

    @property
    def absent(self) -> bool: ...

    async def run(self, script: ZkScript[_T]) -> _T: ...


class NoZooKeeper:
    """The ZooKeeper of an in-process broker (and of one before broker/main.py connects):
    none. The requests that need it answer NOT_CONTROLLER, as a ZooKeeper-mode broker that
    cannot reach the controller does; its session shows as LOST; a script run anyway fails as
    one ZooKeeper refused."""

    absent = True
    session_state = SessionState.LOST
    disconnects = expirations = reconnects = 0

    async def run(self, script: ZkScript[_T]) -> _T:
        raise ZkError("broker has no ZooKeeper session")


NO_ZOOKEEPER = NoZooKeeper()


class ControllerView(Protocol):
    """This broker's controller candidate: the controller it last saw, and (when it is the
    active one) the requests only the controller answers."""

    @property
    def controller_id(self) -> int: ...
    @property
    def controller_epoch(self) -> int: ...
    @property
    def is_active(self) -> bool: ...
    @property
    def stats(self) -> ControllerStats: ...
    @property
    def context(self) -> ControllerContext: ...

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> ShutdownAnswer: ...

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Iterable[TopicPartition] | None,
        timeout_ms: int,
    ) -> ElectionResults: ...

    async def alter_reassignments(
        self, targets: ReassignmentTargets, timeout_ms: int, throttle_bytes_per_sec: int = -1
    ) -> ElectionResults: ...

    def list_reassignments(self) -> dict[TopicPartition, Reassignment] | None: ...


class NotController:
    """The controller candidate before it has started: no controller seen, never active (the
    controller's requests are answered NOT_CONTROLLER, as by a candidate that lost)."""

    controller_id = -1
    controller_epoch = -1
    is_active = False

    def __init__(self, broker_id: int = -1) -> None:
        self.stats = ControllerStats()
        self.context = ControllerContext(broker_id)

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> ShutdownAnswer:
        return ErrorCode.NOT_CONTROLLER, []

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Iterable[TopicPartition] | None,
        timeout_ms: int,
    ) -> ElectionResults:
        return dict.fromkeys(partitions or (), ErrorCode.NOT_CONTROLLER)

    async def alter_reassignments(
        self, targets: ReassignmentTargets, timeout_ms: int, throttle_bytes_per_sec: int = -1
    ) -> ElectionResults:
        return dict.fromkeys(targets, ErrorCode.NOT_CONTROLLER)

    def list_reassignments(self) -> dict[TopicPartition, Reassignment] | None:
        return None


class Fetchers(Protocol):
    """The followers' fetching (broker/replica_fetcher.py)."""

    def apply(self, change: FollowerChange) -> None: ...

    def followed(self) -> Iterator[tuple[TopicPartition, FetchState]]:
        """Every partition followed, with its fetch state (for the lag metrics)."""
        ...


class NotFetching:
    """Before the fetchers start (and in-process brokers): nothing is followed, and a
    controller request's follower changes are dropped (the next LeaderAndIsr restates them)."""

    def apply(self, change: FollowerChange) -> None:
        pass

    def followed(self) -> Iterator[tuple[TopicPartition, FetchState]]:
        return iter(())


NOT_FETCHING = NotFetching()


class IsrWrites(Protocol):
    """Runs the ISR writes the core decided (broker/isr_manager.py)."""

    def start_write(self, write: IsrWrite) -> None: ...


class ProducerIds(Protocol):
    """Hands out producer ids (broker/producer_id_manager.py); ZkError when it cannot."""

    async def generate_producer_id(self) -> int: ...


class _NoProducerIds:
    async def generate_producer_id(self) -> int:
        raise ZkError("no ZooKeeper session: no producer id block")


def no_producer_ids() -> ProducerIds:
    """Without a ZooKeeper session: every InitProducerId fails as a ZooKeeper error does
    (COORDINATOR_NOT_AVAILABLE, retriable)."""
    return _NoProducerIds()


class Groups(Protocol):
    """The group coordinator's shell (broker/group_coordinator.py): its core, and the writes
    of the core's decisions to __consumer_offsets. Not `active` (Kafka's
    GroupCoordinator.isActive): the group requests answer COORDINATOR_NOT_AVAILABLE."""

    @property
    def active(self) -> bool: ...
    @property
    def core(self) -> GroupCoordinatorCore: ...
    @property
    def classic_synced(self) -> dict[tuple[str, str], frozenset[TopicPartition]]: ...

    def topics(self) -> Mapping[str, int]: ...
    def sync_partitions(self) -> None: ...
    async def write(self, decision: Decision[_T]) -> _T: ...
    async def ensure_offsets_topic(self) -> None: ...


class NoGroups:
    """The group coordinator before broker/main.py starts it (and in-process brokers): not
    active, coordinating no partition, creating no offsets topic."""

    active = False

    def __init__(self) -> None:
        self.core = GroupCoordinatorCore(GroupSettings(), lambda: "")
        self.classic_synced: dict[tuple[str, str], frozenset[TopicPartition]] = {}

    def topics(self) -> Mapping[str, int]:
        return {}

    def sync_partitions(self) -> None:
        pass

    async def write(self, decision: Decision[_T]) -> _T:
        return decision.failed(ErrorCode.COORDINATOR_NOT_AVAILABLE)

    async def ensure_offsets_topic(self) -> None:
        pass
