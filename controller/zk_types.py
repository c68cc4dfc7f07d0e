"""ZooKeeper's values, requests, errors and events, as plain data. Pure.

The ZooKeeper procedures (`zk_script.py` and the `zk_*` modules) are written against these,
so the trio shell (`zk_client.ZkClient`, over kazoo) and the simulator's in-memory ZooKeeper
execute the very same procedures.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

__all__ = [
    "BadVersionError",
    "CheckOp",
    "Create",
    "CreateOp",
    "Delete",
    "DeleteOp",
    "Exists",
    "GetChildren",
    "GetData",
    "GetDataMany",
    "Multi",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionEvent",
    "SessionState",
    "SetData",
    "SetOp",
    "TransactionOp",
    "WatchEvent",
    "WatchKind",
    "ZkConnectionError",
    "ZkError",
    "ZkEvent",
    "ZkRequest",
    "ZnodeStat",
]


# --- errors -----------------------------------------------------------------------------------


class ZkError(Exception):
    """A ZooKeeper operation failed. `op_index` is set for a failed transaction operation."""

    def __init__(self, message: str, *, path: str | None = None, op_index: int | None = None):
        super().__init__(message)
        self.path = path
        self.op_index = op_index


class NoNodeError(ZkError):
    pass


class NodeExistsError(ZkError):
    pass


class BadVersionError(ZkError):
    pass


class NotEmptyError(ZkError):
    pass


class ZkConnectionError(ZkError):
    """Not connected, connection lost mid-request, session expired, or the request timed out."""


# --- values -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ZnodeStat:
    czxid: int
    mzxid: int
    version: int  # data version: the compare-and-set token
    cversion: int
    ephemeral_owner: int  # session id of the owner, 0 for a persistent node
    data_length: int
    num_children: int
    ctime: int = 0  # when it was created (ms since the epoch, the server's clock)


# --- transaction (multi) operations -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class CheckOp:
    path: str
    version: int


@dataclass(frozen=True, slots=True)
class CreateOp:
    """Creates `path` (with `sequence`, a sequential child: its path is the op's result)."""

    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False


@dataclass(frozen=True, slots=True)
class SetOp:
    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class DeleteOp:
    path: str
    version: int = -1


TransactionOp = CheckOp | CreateOp | SetOp | DeleteOp


# --- requests: what a ZooKeeper procedure asks its driver to do -------------------------------


@dataclass(frozen=True, slots=True)
class GetData:
    """-> (data, stat), or None if missing (with `watch`, the node's creation is watched)."""

    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class GetDataMany:
    """-> per path, (data, stat) or None if missing; no watches. A driver may send them all
    before the first answer comes back (ZooKeeper answers one session's requests in order), as
    Kafka's KafkaZkClient.getTopicPartitionStates pipelines its GetData requests: a new
    controller then reads N partition states in about one round trip, not N."""

    paths: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Exists:
    """-> stat or None."""

    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class GetChildren:
    """-> sorted child names; NoNodeError if `path` is missing."""

    path: str
    watch: bool = False


@dataclass(frozen=True, slots=True)
class Create:
    """-> the created path (with the sequence suffix, if any)."""

    path: str
    data: bytes = b""
    ephemeral: bool = False
    sequence: bool = False
    makepath: bool = False


@dataclass(frozen=True, slots=True)
class SetData:
    """-> the new stat."""

    path: str
    data: bytes
    version: int = -1


@dataclass(frozen=True, slots=True)
class Delete:
    """-> None."""

    path: str
    version: int = -1


@dataclass(frozen=True, slots=True)
class Multi:
    """One atomic transaction. -> per op: the created path (CreateOp), the new stat (SetOp) or
    None. On failure nothing is applied and the first failing op's error is raised with its
    `op_index`."""

    ops: tuple[TransactionOp, ...]


ZkRequest = GetData | GetDataMany | Exists | GetChildren | Create | SetData | Delete | Multi


# --- events -----------------------------------------------------------------------------------


class WatchKind(enum.Enum):
    CREATED = "created"
    DELETED = "deleted"
    CHANGED = "changed"
    CHILDREN = "children"
    RESET = "reset"  # the client dropped its watches (connection suspended/lost): re-read


@dataclass(frozen=True, slots=True)
class WatchEvent:
    kind: WatchKind
    path: str | None


class SessionState(enum.Enum):
    CONNECTED = "connected"
    SUSPENDED = "suspended"  # connection lost; the session may still be alive
    LOST = "lost"  # session expired (ephemeral nodes gone) or client closed


@dataclass(frozen=True, slots=True)
class SessionEvent:
    state: SessionState
    session_id: int | None
    new_session: bool = False  # CONNECTED with a session id other than the previous one


ZkEvent = WatchEvent | SessionEvent
