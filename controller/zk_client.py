"""An async (trio) facade over kazoo: the only module that imports kazoo.

Every call runs in a worker thread (`trio.to_thread.run_sync`), bounded by
`request_timeout_ms`; `run(script)` drives a ZooKeeper procedure (zk_script.py). Watches are
one-shot: `watch=True` on a read yields one `WatchEvent` at the next change; kazoo drops its
watches while suspended, so subscribers re-read after a CONNECTED `SessionEvent`. Watch and
session events reach trio through `TrioToken.run_sync_soon` and every `subscribe()` channel.
With `digest` the session logs in (ZooKeeper's digest scheme); with `set_acl` every znode it
creates gets the ACLs of controller/zk_security.py (Kafka's `zookeeper.set.acl`).
"""

from __future__ import annotations

import contextlib
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Protocol, TypeVar, assert_never

import trio
from kazoo import exceptions as kz
from kazoo.client import KazooClient, KazooState
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType, WatchedEvent
from kazoo.retry import KazooRetry
from kazoo.security import ACL, Id

from controller.zk_script import ZkScript, start, step
from controller.zk_security import Perm, ZnodeAcl, default_acls
from controller.zk_types import (
    BadVersionError,
    CheckOp,
    Create,
    CreateOp,
    Delete,
    DeleteOp,
    Exists,
    GetChildren,
    GetData,
    GetDataMany,
    Multi,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    SessionEvent,
    SessionState,
    SetData,
    SetOp,
    TransactionOp,
    WatchEvent,
    WatchKind,
    ZkConnectionError,
    ZkError,
    ZkEvent,
    ZkRequest,
    ZnodeStat,
)

__all__ = [
    "BadVersionError",
    "CheckOp",
    "CreateOp",
    "DeleteOp",
    "NoNodeError",
    "NodeExistsError",
    "NotEmptyError",
    "SessionEvent",
    "SessionState",
    "SetOp",
    "TransactionOp",
    "WatchEvent",
    "WatchKind",
    "ZkClient",
    "ZkConnectionError",
    "ZkError",
    "ZkEvent",
    "ZnodeAcl",
    "ZnodeStat",
    "run_each",
]

_T = TypeVar("_T")
_K = TypeVar("_K")
DEFAULT_REQUEST_TIMEOUT_MS = 10_000
# kazoo's reconnect delay starts at 0.1 s and doubles, up to an hour: once ZooKeeper has been
# away ~9 s the next attempt comes after zookeeper.connection.timeout.ms (or the session
# timeout) has run out. Capped, a server that is back is found within ~1 s (1.4 s with kazoo's
# jitter), as the Java client Kafka uses waits at most 1 s between attempts (ClientCnxn).
MAX_RECONNECT_DELAY_S = 1.0


def _translate(exc: BaseException, path: str | None, op_index: int | None = None) -> ZkError:
    message = f"{type(exc).__name__} on {path}" if path else type(exc).__name__
    if isinstance(exc, kz.NoNodeError):
        return NoNodeError(message, path=path, op_index=op_index)
    if isinstance(exc, kz.NodeExistsError):
        return NodeExistsError(message, path=path, op_index=op_index)
    if isinstance(exc, kz.BadVersionError):
        return BadVersionError(message, path=path, op_index=op_index)
    if isinstance(exc, kz.NotEmptyError):
        return NotEmptyError(message, path=path, op_index=op_index)
    if isinstance(exc, kz.NoAuthError):
        return ZkError(f"{message}: not allowed by the znode's ACL", path=path, op_index=op_index)
    if isinstance(exc, kz.ConnectionLoss | kz.SessionExpiredError | KazooTimeoutError):
        return ZkConnectionError(message, path=path, op_index=op_index)
    return ZkError(f"{message}: {exc}", path=path, op_index=op_index)


def _stat(stat: Any) -> ZnodeStat:
    return ZnodeStat(
        czxid=stat.czxid,
        mzxid=stat.mzxid,
        version=stat.version,
        cversion=stat.cversion,
        ephemeral_owner=stat.ephemeralOwner,
        data_length=stat.dataLength,
        num_children=stat.numChildren,
        ctime=stat.ctime,
    )


_WATCH_KINDS = {
    EventType.CREATED: WatchKind.CREATED,
    EventType.DELETED: WatchKind.DELETED,
    EventType.CHANGED: WatchKind.CHANGED,
    EventType.CHILD: WatchKind.CHILDREN,
}


# --- the client -------------------------------------------------------------------------------


class ZkClient:
    """One ZooKeeper session (kazoo re-creates it after expiry: watch for `new_session`)."""

    absent = False  # broker.services.ZkAccess: a session, though it may be disconnected now

    def __init__(
        self,
        kazoo: KazooClient,
        hosts: str,
        session_timeout_ms: int,
        request_timeout_ms: int,
        token: trio.lowlevel.TrioToken,
        *,
        set_acl: bool = False,
    ) -> None:
        self._kazoo = kazoo
        self.hosts = hosts
        self.set_acl = set_acl
        self.session_timeout_ms = session_timeout_ms
        self.request_timeout_ms = request_timeout_ms
        self._token = token
        self._subscribers: list[trio.MemorySendChannel[ZkEvent]] = []
        self._last_session_id: int | None = None
        self._state_lock = threading.Lock()
        self._closed = False
        # For the metrics (Kafka's ZooKeeperClientMetrics): the session's state as kazoo last
        # reported it, and counts of disconnections, expired sessions and reconnections.
        self.session_state = SessionState.CONNECTED
        self.disconnects = 0
        self.expirations = 0
        self.reconnects = 0

    @classmethod
    async def connect(
        cls,
        hosts: str,
        session_timeout_ms: int,
        *,
        timeout_ms: int | None = None,
        request_timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        digest: tuple[str, str] | None = None,
        set_acl: bool = False,
    ) -> ZkClient:
        """Connect within `timeout_ms` (None: the session timeout, Kafka's default for
        zookeeper.connection.timeout.ms); a chroot suffix ("h:p/chroot") is created first if
        missing, as Kafka does. `digest` (user, password): the session's login; `set_acl`:
        znodes created get controller/zk_security.py's ACLs (it needs the login)."""
        if timeout_ms is None:
            timeout_ms = session_timeout_ms
        if set_acl and digest is None:
            raise ZkError("ZooKeeper ACLs (zookeeper.set.acl) need a digest login")
        auth = _auth_data(digest)
        base_hosts, slash, chroot = hosts.partition("/")
        if slash and chroot.strip("/"):
            await _ensure_chroot(
                base_hosts, "/" + chroot.strip("/"), session_timeout_ms, timeout_ms, auth, set_acl
            )
        kazoo = _kazoo_client(hosts, session_timeout_ms, auth_data=auth)
        client = cls(
            kazoo,
            hosts,
            session_timeout_ms,
            request_timeout_ms,
            trio.lowlevel.current_trio_token(),
            set_acl=set_acl,
        )
        kazoo.add_listener(client._on_state_change)
        try:
            await trio.to_thread.run_sync(
                lambda: kazoo.start(timeout=timeout_ms / 1000), abandon_on_cancel=True
            )
        except (kz.KazooException, KazooTimeoutError) as exc:
            await trio.to_thread.run_sync(_stop_quietly, kazoo)
            raise ZkConnectionError(
                f"cannot connect to ZooKeeper at {hosts} within {timeout_ms} ms: {exc}"
            ) from exc
        except BaseException:  # cancelled (a broker told to stop while it waits): stop trying
            with trio.CancelScope(shield=True):
                await client.close()
            raise
        client._last_session_id = kazoo.client_id[0] if kazoo.client_id else None
        return client

    # --- session ------------------------------------------------------------------------

    @property
    def session_id(self) -> int | None:
        client_id = self._kazoo.client_id
        return int(client_id[0]) if client_id else None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def connected(self) -> bool:
        return bool(self._kazoo.connected)

    async def close(self) -> None:
        """Close the session: its ephemeral nodes disappear at once. Bounded by the request
        timeout: without a connection the session cannot be closed, and kazoo's stop waits
        for its connection thread (a connection attempt in progress) before giving up."""
        self._closed = True
        self.session_state = SessionState.LOST
        with trio.move_on_after(self.request_timeout_ms / 1000):
            await trio.to_thread.run_sync(_stop_quietly, self._kazoo, abandon_on_cancel=True)
        for subscriber in self._subscribers:
            subscriber.close()
        self._subscribers.clear()

    async def force_session_expiry(self) -> None:
        """Expire this session from outside (tests, chaos): a second client with the same
        session id and password closes it; this client then sees SUSPENDED -> LOST and kazoo
        establishes a new session."""
        client_id = self._kazoo.client_id
        if client_id is None:
            raise ZkConnectionError("no session to expire")
        base_hosts = self.hosts.partition("/")[0]

        def expire() -> None:
            other = _kazoo_client(base_hosts, self.session_timeout_ms, client_id=client_id)
            other.start(timeout=self.request_timeout_ms / 1000)
            _stop_quietly(other)

        await self._run(expire, None)

    def subscribe(self) -> trio.MemoryReceiveChannel[ZkEvent]:
        """A channel receiving every watch and session event from now on (close it when done)."""
        send, receive = trio.open_memory_channel[ZkEvent](math.inf)
        self._subscribers.append(send)
        return receive

    # --- reads --------------------------------------------------------------------------

    async def get(self, path: str, *, watch: bool = False) -> tuple[bytes, ZnodeStat] | None:
        watcher = self._on_watch if watch else None

        def call() -> tuple[bytes, ZnodeStat] | None:
            try:
                data, stat = self._kazoo.get(path, watch=watcher)
            except kz.NoNodeError:
                if watch:  # like Kafka: watch for the node's creation instead
                    self._kazoo.exists(path, watch=watcher)
                return None
            return bytes(data or b""), _stat(stat)

        return await self._run(call, path)

    async def get_many(self, paths: Sequence[str]) -> list[tuple[bytes, ZnodeStat] | None]:
        """`get` of each path, unwatched: every request sent before the first answer is
        awaited (kazoo's async calls share the session's one connection, answered in order)."""

        def call() -> list[tuple[bytes, ZnodeStat] | None]:
            pending = [self._kazoo.get_async(path) for path in paths]
            found: list[tuple[bytes, ZnodeStat] | None] = []
            for result in pending:
                try:
                    data, stat = result.get()
                except kz.NoNodeError:
                    found.append(None)
                    continue
                found.append((bytes(data or b""), _stat(stat)))
            return found

        return await self._run(call, paths[0] if paths else None)

    async def exists(self, path: str, *, watch: bool = False) -> ZnodeStat | None:
        watcher = self._on_watch if watch else None

        def call() -> ZnodeStat | None:
            stat = self._kazoo.exists(path, watch=watcher)
            return None if stat is None else _stat(stat)

        return await self._run(call, path)

    async def get_children(self, path: str, *, watch: bool = False) -> list[str]:
        """Children names, sorted; raises NoNodeError when `path` does not exist."""
        watcher = self._on_watch if watch else None
        children = await self._run(lambda: self._kazoo.get_children(path, watch=watcher), path)
        return sorted(children)

    # --- writes -------------------------------------------------------------------------

    async def create(
        self,
        path: str,
        data: bytes = b"",
        *,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
    ) -> str:
        """Create a node; returns its path (with the sequence suffix if any)."""
        acl = self._acl_for(path)

        def call() -> str:
            if makepath and acl is not None:
                self._ensure_parents(path)  # each with its own ACL, not the child's
            return str(
                self._kazoo.create(
                    path, data, acl=acl, ephemeral=ephemeral, sequence=sequence, makepath=makepath
                )
            )

        return await self._run(call, path)

    async def set(self, path: str, data: bytes, version: int = -1) -> ZnodeStat:
        stat = await self._run(lambda: self._kazoo.set(path, data, version=version), path)
        return _stat(stat)

    async def delete(self, path: str, *, version: int = -1, recursive: bool = False) -> None:
        await self._run(
            lambda: self._kazoo.delete(path, version=version, recursive=recursive), path
        )

    async def transaction(self, ops: Sequence[TransactionOp]) -> list[str | ZnodeStat | None]:
        """One atomic multi-op. Success: per op, the created path (CreateOp), the new stat
        (SetOp) or None (CheckOp, DeleteOp). Failure: nothing is applied and the first failing
        op's error is raised (a failed CheckOp raises BadVersionError or NoNodeError) with
        `op_index` set."""
        if not ops:
            return []

        def call() -> list[Any]:
            tx = self._kazoo.transaction()
            for op in ops:
                if isinstance(op, CheckOp):
                    tx.check(op.path, op.version)
                elif isinstance(op, CreateOp):
                    tx.create(
                        op.path,
                        op.data,
                        acl=self._acl_for(op.path),
                        ephemeral=op.ephemeral,
                        sequence=op.sequence,
                    )
                elif isinstance(op, SetOp):
                    tx.set_data(op.path, op.data, version=op.version)
                else:
                    tx.delete(op.path, version=op.version)
            return list(tx.commit())

        results = await self._run(call, None)
        for index, result in enumerate(results):
            if isinstance(result, BaseException) and not isinstance(result, kz.RolledBackError):
                raise _translate(result, ops[index].path, index)
        if any(isinstance(result, BaseException) for result in results):
            raise ZkError("transaction rolled back", op_index=None)
        out: list[str | ZnodeStat | None] = []
        for op, result in zip(ops, results, strict=True):
            if isinstance(op, CreateOp):
                out.append(str(result))
            elif isinstance(op, SetOp):
                out.append(_stat(result))
            else:
                out.append(None)
        return out

    # --- ACLs ---------------------------------------------------------------------------

    async def get_acls(self, path: str) -> tuple[list[ZnodeAcl], ZnodeStat]:
        acls, stat = await self._run(lambda: self._kazoo.get_acls(path), path)
        return [_znode_acl(acl) for acl in acls], _stat(stat)

    async def set_acls(self, path: str, acls: Sequence[ZnodeAcl], version: int = -1) -> ZnodeStat:
        """Replace the node's ACLs (scheme "auth": this session's login)."""
        kazoo_acls = [_kazoo_acl(acl) for acl in acls]
        stat = await self._run(
            lambda: self._kazoo.set_acls(path, kazoo_acls, version=version), path
        )
        return _stat(stat)

    def _acl_for(self, path: str) -> list[ACL] | None:
        """The ACLs a node created at `path` gets; None: kazoo's default, world ALL."""
        if not self.set_acl:
            return None
        return [_kazoo_acl(acl) for acl in default_acls(path, secure=True)]

    def _ensure_parents(self, path: str) -> None:
        """Blocking (in a worker thread): create the missing ancestors of `path`, each with
        the ACLs of its own path (kazoo's makepath would give them the child's: a sensitive
        child would hide its non-sensitive parents)."""
        parts = path.strip("/").split("/")[:-1]
        for depth in range(1, len(parts) + 1):
            parent = "/" + "/".join(parts[:depth])
            if self._kazoo.exists(parent) is not None:
                continue
            with contextlib.suppress(kz.NodeExistsError):
                self._kazoo.create(parent, b"", acl=self._acl_for(parent))

    # --- scripts ------------------------------------------------------------------------

    async def run(self, script: ZkScript[_T]) -> _T:
        """Run a ZooKeeper procedure (see zk_script.py), each request bounded as above."""
        request, result = start(script)
        while request is not None:
            try:
                answer, error = await self.execute(request), None
            except ZkError as exc:
                answer, error = None, exc
            request, result = step(script, answer, error)
        return result  # type: ignore[return-value]  # T may be None

    async def execute(self, request: ZkRequest) -> object:
        match request:
            case GetData(path, watch):
                return await self.get(path, watch=watch)
            case GetDataMany(paths):
                return await self.get_many(paths)
            case Exists(path, watch):
                return await self.exists(path, watch=watch)
            case GetChildren(path, watch):
                return await self.get_children(path, watch=watch)
            case Create(path, data, ephemeral, sequence, makepath):
                return await self.create(
                    path, data, ephemeral=ephemeral, sequence=sequence, makepath=makepath
                )
            case SetData(path, data, version):
                return await self.set(path, data, version)
            case Delete(path, version):
                await self.delete(path, version=version)
                return None
            case Multi(ops):
                return await self.transaction(ops)
            case _:
                assert_never(request)

    # --- plumbing -----------------------------------------------------------------------

    async def _run(self, fn: Callable[[], _T], path: str | None) -> _T:
        """Run a blocking kazoo call in a thread, bounded; kazoo errors become ours."""
        if self._closed:
            raise ZkConnectionError("ZooKeeper client closed", path=path)
        try:
            with trio.fail_after(self.request_timeout_ms / 1000):
                return await trio.to_thread.run_sync(fn, abandon_on_cancel=True)
        except trio.TooSlowError as exc:
            raise ZkConnectionError(
                f"ZooKeeper request timed out after {self.request_timeout_ms} ms", path=path
            ) from exc
        except (kz.KazooException, KazooTimeoutError) as exc:
            raise _translate(exc, path) from exc

    def _deliver(self, event: ZkEvent) -> None:
        """Runs in the trio thread: fan out to subscribers, dropping closed ones."""
        alive: list[trio.MemorySendChannel[ZkEvent]] = []
        for subscriber in self._subscribers:
            try:
                subscriber.send_nowait(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                continue
            alive.append(subscriber)
        self._subscribers[:] = alive

    def _post(self, event: ZkEvent) -> None:
        """From a kazoo thread into trio; a finished trio run just drops the event."""
        with contextlib.suppress(trio.RunFinishedError):
            self._token.run_sync_soon(self._deliver, event)

    def _on_watch(self, event: WatchedEvent) -> None:
        kind = _WATCH_KINDS.get(event.type, WatchKind.RESET)
        self._post(WatchEvent(kind, event.path if kind is not WatchKind.RESET else None))

    def _on_state_change(self, state: str) -> None:
        # kazoo calls listeners on its connection thread: no blocking calls here.
        with self._state_lock:
            if state == KazooState.CONNECTED:
                client_id = self._kazoo.client_id
                session_id = int(client_id[0]) if client_id else None
                new_session = (
                    self._last_session_id is not None and session_id != self._last_session_id
                )
                self._last_session_id = session_id
                event = SessionEvent(SessionState.CONNECTED, session_id, new_session)
                if self.session_state is not SessionState.CONNECTED:
                    self.reconnects += 1
            elif state == KazooState.SUSPENDED:
                event = SessionEvent(SessionState.SUSPENDED, self._last_session_id)
                self.disconnects += 1
            else:
                event = SessionEvent(SessionState.LOST, self._last_session_id)
                if not self._closed:
                    self.expirations += 1
            self.session_state = event.state
        self._post(event)


def _auth_data(digest: tuple[str, str] | None) -> list[tuple[str, str]] | None:
    return None if digest is None else [("digest", f"{digest[0]}:{digest[1]}")]


def _kazoo_acl(acl: ZnodeAcl) -> ACL:
    return ACL(int(acl.perms), Id(acl.scheme, acl.id))


def _znode_acl(acl: Any) -> ZnodeAcl:
    return ZnodeAcl(Perm(acl.perms), acl.id.scheme, acl.id.id)


def _kazoo_client(hosts: str, session_timeout_ms: int, **kwargs: Any) -> KazooClient:
    return KazooClient(
        hosts=hosts,
        timeout=session_timeout_ms / 1000,
        connection_retry=KazooRetry(max_tries=-1, max_delay=MAX_RECONNECT_DELAY_S),
        **kwargs,
    )


def _stop_quietly(kazoo: KazooClient) -> None:
    with contextlib.suppress(kz.KazooException, KazooTimeoutError):
        kazoo.stop()
        kazoo.close()


async def _ensure_chroot(
    base_hosts: str,
    chroot: str,
    session_timeout_ms: int,
    timeout_ms: int,
    auth_data: list[tuple[str, str]] | None,
    set_acl: bool,
) -> None:
    # Kafka's createChrootIfNecessary: the chroot gets the default ACLs of a non-sensitive path.
    acl = [_kazoo_acl(a) for a in default_acls(chroot, secure=True)] if set_acl else None

    def call() -> None:
        kazoo = _kazoo_client(base_hosts, session_timeout_ms, auth_data=auth_data)
        try:
            kazoo.start(timeout=timeout_ms / 1000)
            kazoo.ensure_path(chroot, acl=acl)
        finally:
            _stop_quietly(kazoo)

    try:
        await trio.to_thread.run_sync(call, abandon_on_cancel=True)
    except (kz.KazooException, KazooTimeoutError) as exc:
        raise ZkConnectionError(
            f"cannot create chroot {chroot} on {base_hosts} within {timeout_ms} ms: {exc}"
        ) from exc


class ScriptRunner(Protocol):
    async def run(self, script: ZkScript[_T]) -> _T: ...


async def run_each(
    zk: ScriptRunner,
    scripts: Mapping[_K, ZkScript[_T]],
    *,
    tolerate: tuple[type[Exception], ...] = (),
    concurrency: int = 16,
) -> tuple[dict[_K, _T], dict[_K, Exception]]:
    """Run independent scripts concurrently: kazoo pipelines their requests on the one
    session, so N reads over a slow link cost about one round trip, not N. Returns the
    results and the `tolerate`d errors by key; any other error is raised (the first)."""
    results: dict[_K, _T] = {}
    failed: dict[_K, Exception] = {}
    limiter = trio.CapacityLimiter(concurrency)

    async def one(key: _K, script: ZkScript[_T]) -> None:
        async with limiter:
            try:
                results[key] = await zk.run(script)
            except Exception as exc:  # raised below, outside the nursery (no groups)
                failed[key] = exc

    async with trio.open_nursery() as nursery:
        for key, script in scripts.items():
            nursery.start_soon(one, key, script)
    for exc in failed.values():
        if not isinstance(exc, tolerate):
            raise exc
    return results, failed
