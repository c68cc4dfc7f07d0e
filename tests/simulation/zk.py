"""An in-memory ZooKeeper that runs the same ZooKeeper scripts as the brokers' kazoo client.

Znodes with data, versions, czxid/mzxid from one zxid counter, ephemeral owners and sequence
nodes; sessions that expire (taking their ephemeral nodes); one-shot data and child watches
per session; atomic multi-ops. `run(session, script)` executes a script (controller/zk_*.py)
at once (a step is atomic; callers model latency around it). Read-only views (`brokers`,
`states`, `controller`, ...) decode Kafka's znodes for the invariants and scenario tests.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from controller import zk_data, zk_script
from controller import zk_types as zt
from protocol.topic_partition import TopicPartition

__all__ = ["Registration", "SimZk", "StateWrite"]

T = TypeVar("T")


@dataclass(slots=True)
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    version: int = 0
    cversion: int = 0
    owner: int = 0  # the session of an ephemeral node
    children: set[str] = field(default_factory=set)
    next_sequence: int = 0
    ctime: int = 0

    def stat(self) -> zt.ZnodeStat:
        return zt.ZnodeStat(
            self.czxid,
            self.mzxid,
            self.version,
            self.cversion,
            self.owner,
            len(self.data),
            len(self.children),
            self.ctime,
        )


@dataclass(frozen=True, slots=True)
class Registration:
    broker_id: int
    epoch: int  # czxid
    session_id: int
    incarnation: int  # the czxid of the registering process's first registration


@dataclass(frozen=True, slots=True)
class StateWrite:
    """A partition state znode written (for the invariants)."""

    tp: TopicPartition
    old: tuple[zk_data.PartitionStateZnode, int] | None
    new: tuple[zk_data.PartitionStateZnode, int]
    session: int


class SimZk:
    def __init__(self) -> None:
        self._nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0)}
        self._zxid = 0
        self._next_session = 0
        self.sessions: dict[int, int] = {}  # live session -> the broker (or client) it serves
        self._watches: dict[tuple[str, str], set[int]] = {}  # ("data"|"child", path) -> sessions
        # Hooks: a fired watch (session, event), for the simulation to deliver; every
        # partition state written, for the invariants.
        self.deliver: Callable[[int, zt.WatchEvent], None] = lambda session, event: None
        self.on_state_written: list[Callable[[StateWrite], None]] = []
        # Fired watches and state writes of the request in hand: told once it succeeded.
        self._pending: list[tuple[int, zt.WatchEvent]] = []
        self._written: list[StateWrite] = []
        self._assignments: tuple[int, dict[str, dict[int, tuple[int, ...]]]] = (-1, {})
        # The server's clock (new znodes' ctime, which notification purges compare with the
        # brokers' wall clock): the simulation's once it is set.
        self.clock: Callable[[], int] = lambda: 0

    # -- sessions --------------------------------------------------------------------------

    def open_session(self, owner: int) -> int:
        self._next_session += 1
        self.sessions[self._next_session] = owner
        return self._next_session

    def session_alive(self, session: int | None) -> bool:
        return session is not None and session in self.sessions

    def expire_session(self, session: int) -> None:
        """The session ends: its ephemeral nodes go (their watchers hear of it)."""
        if self.sessions.pop(session, None) is None:
            return
        for key in list(self._watches):
            self._watches[key].discard(session)
        for path in sorted(p for p, n in self._nodes.items() if n.owner == session):
            self._delete(path, session)
        self._flush_watches()

    # -- running requests ------------------------------------------------------------------

    def run(self, session: int | None, script: zk_script.ZkScript[T]) -> T:
        return zk_script.run_sync(script, lambda request: self.execute(session, request))

    def execute(self, session: int | None, request: zt.ZkRequest) -> object:
        if session is None or session not in self.sessions:
            raise zt.ZkConnectionError("session expired")
        try:
            return self._execute(session, request)
        finally:
            self._flush_watches()
            written, self._written = self._written, []
            for write in written:
                for hook in self.on_state_written:
                    hook(write)

    def _execute(self, session: int, request: zt.ZkRequest) -> object:
        match request:
            case zt.GetData(path, watch):
                node = self._nodes.get(path)
                if watch:
                    self._watch("data", path, session)
                return None if node is None else (node.data, node.stat())
            case zt.GetDataMany(paths):
                nodes = [self._nodes.get(path) for path in paths]
                return [None if node is None else (node.data, node.stat()) for node in nodes]
            case zt.Exists(path, watch):
                node = self._nodes.get(path)
                if watch:
                    self._watch("data", path, session)
                return None if node is None else node.stat()
            case zt.GetChildren(path, watch):
                node = self._nodes.get(path)
                if node is None:
                    raise zt.NoNodeError(f"no node {path}", path=path)
                if watch:
                    self._watch("child", path, session)
                return sorted(node.children)
            case zt.Create(path, data, ephemeral, sequence, makepath):
                if makepath:
                    self._make_parents(path, session)
                return self._create(path, data, session if ephemeral else 0, sequence, session)
            case zt.SetData(path, data, version):
                return self._set(path, data, version, session)
            case zt.Delete(path, version):
                self._check_delete(path, version)
                self._delete(path, session)
                return None
            case zt.Multi(ops):
                return self._multi(ops, session)

    def _multi(
        self, ops: tuple[zt.CheckOp | zt.CreateOp | zt.SetOp | zt.DeleteOp, ...], session: int
    ) -> object:
        saved = copy.deepcopy(
            (self._nodes, self._zxid, self._watches, self._pending, self._written)
        )
        results: list[object] = []
        for index, op in enumerate(ops):
            try:
                results.append(self._apply_op(op, session))
            except zt.ZkError as exc:
                self._nodes, self._zxid, self._watches, self._pending, self._written = saved
                exc.op_index = index
                raise
        return results

    def _apply_op(self, op: zt.TransactionOp, session: int) -> object:
        match op:
            case zt.CheckOp(path, version):
                node = self._nodes.get(path)
                if node is None:
                    raise zt.NoNodeError(f"no node {path}", path=path)
                if node.version != version:
                    raise zt.BadVersionError(f"bad version of {path}", path=path)
                return None
            case zt.CreateOp(path, data, ephemeral, sequence):
                return self._create(path, data, session if ephemeral else 0, sequence, session)
            case zt.SetOp(path, data, version):
                return self._set(path, data, version, session)
            case zt.DeleteOp(path, version):
                self._check_delete(path, version)
                self._delete(path, session)
                return None

    # -- writes ----------------------------------------------------------------------------

    def _create(self, path: str, data: bytes, owner: int, sequence: bool, session: int) -> str:
        parent_path, _, name = path.rpartition("/")
        parent = self._nodes.get(parent_path or "/")
        if parent is None:
            raise zt.NoNodeError(f"no parent for {path}", path=path)
        if sequence:
            name += f"{parent.next_sequence:010d}"
            parent.next_sequence += 1
            path = f"{parent_path}/{name}"
        if path in self._nodes:
            raise zt.NodeExistsError(f"{path} exists", path=path)
        self._zxid += 1
        self._nodes[path] = _Node(data, self._zxid, self._zxid, owner=owner, ctime=self.clock())
        parent.children.add(name)
        parent.cversion += 1
        self._trigger("data", path, zt.WatchKind.CREATED)
        self._trigger("child", parent_path or "/", zt.WatchKind.CHILDREN)
        self._state_written(path, None, session)
        return path

    def _set(self, path: str, data: bytes, version: int, session: int) -> zt.ZnodeStat:
        node = self._nodes.get(path)
        if node is None:
            raise zt.NoNodeError(f"no node {path}", path=path)
        if version != -1 and node.version != version:
            raise zt.BadVersionError(f"bad version of {path}", path=path)
        old = (node.data, node.version)
        self._zxid += 1
        node.data, node.version, node.mzxid = data, node.version + 1, self._zxid
        self._trigger("data", path, zt.WatchKind.CHANGED)
        self._state_written(path, old, session)
        return node.stat()

    def _check_delete(self, path: str, version: int) -> None:
        node = self._nodes.get(path)
        if node is None:
            raise zt.NoNodeError(f"no node {path}", path=path)
        if version != -1 and node.version != version:
            raise zt.BadVersionError(f"bad version of {path}", path=path)
        if node.children:
            raise zt.NotEmptyError(f"{path} has children", path=path)

    def _delete(self, path: str, session: int) -> None:
        del self._nodes[path]
        parent_path, _, name = path.rpartition("/")
        parent = self._nodes[parent_path or "/"]
        parent.children.discard(name)
        parent.cversion += 1
        self._trigger("data", path, zt.WatchKind.DELETED)
        self._trigger("child", path, zt.WatchKind.DELETED)
        self._trigger("child", parent_path or "/", zt.WatchKind.CHILDREN)

    def _make_parents(self, path: str, session: int) -> None:
        parts = path.strip("/").split("/")[:-1]
        for i in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:i])
            if parent not in self._nodes:
                self._create(parent, b"", 0, False, session)

    # -- watches ---------------------------------------------------------------------------

    def _watch(self, kind: str, path: str, session: int) -> None:
        self._watches.setdefault((kind, path), set()).add(session)

    def _trigger(self, kind: str, path: str, event_kind: zt.WatchKind) -> None:
        for session in sorted(self._watches.pop((kind, path), ())):
            self._pending.append((session, zt.WatchEvent(event_kind, path)))

    def _flush_watches(self) -> None:
        pending, self._pending = self._pending, []
        for session, event in pending:
            if session in self.sessions:
                self.deliver(session, event)

    def _state_written(self, path: str, old: tuple[bytes, int] | None, session: int) -> None:
        tp = _state_path_tp(path)
        if tp is None or not self.on_state_written:
            return
        node = self._nodes[path]
        new = (zk_data.PartitionStateZnode.decode(node.data), node.version)
        before = None if old is None else (zk_data.PartitionStateZnode.decode(old[0]), old[1])
        self._written.append(StateWrite(tp, before, new, session))

    # -- views for the invariants and scenario tests ---------------------------------------

    def data(self, path: str) -> bytes | None:
        node = self._nodes.get(path)
        return None if node is None else node.data

    def children(self, path: str) -> list[str]:
        node = self._nodes.get(path)
        return [] if node is None else sorted(node.children)

    @property
    def controller(self) -> tuple[int, int] | None:
        """(broker id, session) of the controller, or None."""
        node = self._nodes.get(zk_data.CONTROLLER_PATH)
        if node is None:
            return None
        return zk_data.ControllerZnode.decode(node.data).broker_id, node.owner

    @property
    def controller_epoch(self) -> int:
        data = self.data(zk_data.CONTROLLER_EPOCH_PATH)
        return 0 if data is None else zk_data.decode_controller_epoch(data)

    @property
    def brokers(self) -> dict[int, Registration]:
        out = {}
        for child in self.children(zk_data.BROKER_IDS_PATH):
            node = self._nodes[f"{zk_data.BROKER_IDS_PATH}/{child}"]
            registration = zk_data.BrokerRegistration.decode(node.data)
            incarnation = registration.incarnation_of(node.czxid)
            out[int(child)] = Registration(int(child), node.czxid, node.owner, incarnation)
        return out

    @property
    def assignments(self) -> dict[str, dict[int, tuple[int, ...]]]:
        if self._assignments[0] != self._zxid:  # decoded once per change
            out = {}
            for topic in self.children(zk_data.TOPICS_PATH):
                data = self.data(zk_data.topic_path(topic))
                if data:
                    out[topic] = dict(zk_data.TopicAssignment.decode(data).partitions)
            self._assignments = (self._zxid, out)
        return self._assignments[1]

    @property
    def states(self) -> dict[TopicPartition, tuple[zk_data.PartitionStateZnode, int]]:
        out = {}
        for topic, partitions in self.assignments.items():
            for partition in partitions:
                node = self._nodes.get(zk_data.partition_state_path(topic, partition))
                if node is not None:
                    znode = zk_data.PartitionStateZnode.decode(node.data)
                    out[TopicPartition(topic, partition)] = (znode, node.version)
        return out

    def state(self, tp: TopicPartition) -> tuple[zk_data.PartitionStateZnode, int] | None:
        node = self._nodes.get(zk_data.partition_state_path(*tp))
        return (
            None if node is None else (zk_data.PartitionStateZnode.decode(node.data), node.version)
        )


def _state_path_tp(path: str) -> TopicPartition | None:
    parts = path.split("/")  # "", brokers, topics, <t>, partitions, <p>, state
    if len(parts) == 7 and parts[1:3] == ["brokers", "topics"] and parts[6] == "state":
        return TopicPartition(parts[3], int(parts[5]))
    return None
