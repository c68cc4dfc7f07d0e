"""A simulated ZooKeeper holding what Highwater keeps there, with versions and sessions.

- `/brokers/ids/<id>`: ephemeral registrations; a broker's epoch is its node's czxid, its
  incarnation the czxid of its process's first registration (zk_brokers.RegisteredBroker).
- `/controller` (ephemeral) and `/controller_epoch` (versioned): the controller election.
- `/brokers/topics/<t>`: assignments, fixed for a run.
- `/brokers/topics/<t>/partitions/<p>/state`: PartitionStateZnode + version, written by
  compare-and-set (the controller's writes also check `/controller_epoch`'s version), and
  its mzxid: czxids and mzxids come from one zxid counter, as in ZooKeeper, so a broker
  epoch above a state's mzxid means the broker registered after the state was written.
- `/isr_change_notification/isr_change_<n>`: the leaders' ISR change notifications.

Operations apply at once (a step is atomic); callers model latency around them. A session
that expired can do nothing. Watches are callbacks that fire on every change; the watcher
re-reads, as a real one does after a one-shot watch.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from enum import Enum

from controller.zk_data import PartitionStateZnode

__all__ = ["Registration", "SimZk", "StateWrite", "TopicPartition", "WriteOutcome"]

TopicPartition = tuple[str, int]
Assignments = dict[str, dict[int, tuple[int, ...]]]


@dataclass(frozen=True, slots=True)
class Registration:
    broker_id: int
    epoch: int  # czxid
    session_id: int
    incarnation: int  # the czxid of the registering process's first registration


class WriteOutcome(Enum):
    OK = "ok"
    CONTROLLER_MOVED = "controller moved"  # the epoch guard failed, or the session is gone
    CONFLICT = "conflict"  # a CAS lost, or a node existed / was missing


@dataclass(frozen=True, slots=True)
class StateWrite:
    """What changed in a partition state znode (for the invariants)."""

    tp: TopicPartition
    old: tuple[PartitionStateZnode, int] | None
    new: tuple[PartitionStateZnode, int]
    writer: str


@dataclass
class Watches:
    brokers_changed: list[Callable[[], None]] = field(default_factory=list)
    controller_deleted: list[Callable[[], None]] = field(default_factory=list)
    isr_notification: list[Callable[[], None]] = field(default_factory=list)
    state_written: list[Callable[[StateWrite], None]] = field(default_factory=list)


class SimZk:
    def __init__(self, assignments: Assignments) -> None:
        self.assignments = assignments
        self.watches = Watches()
        self._zxid = 0
        self._next_session = 0
        self._sessions: dict[int, int] = {}  # live session id -> broker id
        self.brokers: dict[int, Registration] = {}
        self.controller: tuple[int, int] | None = None  # (broker id, session id)
        self.controller_epoch = 0
        self.controller_epoch_version = 0
        self.states: dict[TopicPartition, tuple[PartitionStateZnode, int]] = {}
        self.state_mzxids: dict[TopicPartition, int] = {}  # each state znode's last write
        self._isr_notifications: dict[int, tuple[TopicPartition, ...]] = {}

    # -- sessions and registrations --------------------------------------------------------

    def open_session(self, broker_id: int) -> int:
        self._next_session += 1
        self._sessions[self._next_session] = broker_id
        return self._next_session

    def session_alive(self, session_id: int | None) -> bool:
        return session_id is not None and session_id in self._sessions

    def expire_session(self, session_id: int) -> None:
        """The session ends: its ephemeral nodes go, and their watchers hear of it."""
        if self._sessions.pop(session_id, None) is None:
            return
        gone = [b for b, r in self.brokers.items() if r.session_id == session_id]
        for broker_id in gone:
            del self.brokers[broker_id]
        if gone:
            self._fire(self.watches.brokers_changed)
        if self.controller is not None and self.controller[1] == session_id:
            self.controller = None
            self._fire(self.watches.controller_deleted)

    def register_broker(
        self, broker_id: int, session_id: int, incarnation: int | None = None
    ) -> int | None:
        """Create `/brokers/ids/<id>`; its epoch, or None while an older session holds it.
        `incarnation`: None for a process's first registration (it is then the new epoch)."""
        if not self.session_alive(session_id):
            return None
        current = self.brokers.get(broker_id)
        if current is not None:
            return current.epoch if current.session_id == session_id else None
        self._zxid += 1
        first = self._zxid if incarnation is None else incarnation
        self.brokers[broker_id] = Registration(broker_id, self._zxid, session_id, first)
        self._fire(self.watches.brokers_changed)
        return self._zxid

    # -- controller election ---------------------------------------------------------------

    def elect_controller(self, broker_id: int, session_id: int) -> tuple[int, int] | None:
        """The election multi-op: create `/controller` and bump `/controller_epoch` at its
        version. (epoch, epoch znode version) if won, None if someone holds it."""
        if self.controller is not None or not self.session_alive(session_id):
            return None
        self.controller = (broker_id, session_id)
        self.controller_epoch += 1
        self.controller_epoch_version += 1
        self._zxid += 1
        return self.controller_epoch, self.controller_epoch_version

    def delete_controller(self, session_id: int) -> None:
        """Kafka's triggerControllerMove: free `/controller` if this session holds it."""
        if self.controller is not None and self.controller[1] == session_id:
            self.controller = None
            self._fire(self.watches.controller_deleted)

    def _guard(self, session_id: int, epoch_version: int) -> bool:
        return self.session_alive(session_id) and epoch_version == self.controller_epoch_version

    # -- partition state znodes ------------------------------------------------------------

    def create_states(
        self,
        session_id: int,
        epoch_version: int,
        states: Mapping[TopicPartition, PartitionStateZnode],
        writer: str,
    ) -> WriteOutcome:
        """One guarded transaction: all created, or none."""
        if not self._guard(session_id, epoch_version):
            return WriteOutcome.CONTROLLER_MOVED
        if any(tp in self.states for tp in states):
            return WriteOutcome.CONFLICT
        for tp, znode in sorted(states.items()):
            self._set_state(tp, znode, 0, writer)
        return WriteOutcome.OK

    def write_states(
        self,
        session_id: int,
        epoch_version: int,
        updates: Mapping[TopicPartition, tuple[PartitionStateZnode, int]],
        writer: str,
    ) -> WriteOutcome:
        """One guarded transaction of CAS writes: all applied, or none."""
        if not self._guard(session_id, epoch_version):
            return WriteOutcome.CONTROLLER_MOVED
        for tp, (_, expected) in updates.items():
            current = self.states.get(tp)
            if current is None or current[1] != expected:
                return WriteOutcome.CONFLICT
        for tp, (znode, expected) in sorted(updates.items()):
            self._set_state(tp, znode, expected + 1, writer)
        return WriteOutcome.OK

    def cas_state(
        self,
        session_id: int | None,
        tp: TopicPartition,
        znode: PartitionStateZnode,
        expected_version: int,
        writer: str,
    ) -> int | None:
        """A leader's ISR write (zk_isr.write_isr): the new version, or None if it lost."""
        current = self.states.get(tp)
        if not self.session_alive(session_id) or current is None or current[1] != expected_version:
            return None
        self._set_state(tp, znode, expected_version + 1, writer)
        return expected_version + 1

    def _set_state(
        self, tp: TopicPartition, znode: PartitionStateZnode, version: int, writer: str
    ) -> None:
        old = self.states.get(tp)
        self.states[tp] = (znode, version)
        self._zxid += 1
        self.state_mzxids[tp] = self._zxid
        write = StateWrite(tp, old, (znode, version), writer)
        for watcher in self.watches.state_written:
            watcher(write)

    # -- ISR change notifications ----------------------------------------------------------

    def publish_isr_changes(self, session_id: int | None, partitions: list[TopicPartition]) -> bool:
        if not self.session_alive(session_id):
            return False
        self._zxid += 1
        self._isr_notifications[self._zxid] = tuple(sorted(partitions))
        self._fire(self.watches.isr_notification)
        return True

    def take_isr_notifications(self) -> list[TopicPartition]:
        """Read and delete every notification (the controller's handler)."""
        partitions = sorted({tp for tps in self._isr_notifications.values() for tp in tps})
        self._isr_notifications.clear()
        return partitions

    def _fire(self, watchers: list[Callable[[], None]]) -> None:
        for watcher in list(watchers):
            watcher()
