"""The broker's TCP server: its named listeners, one task per connection (broker.connection_task,
around the connection's state machine, broker.core.connection), requests answered in order.

One request at a time per connection (Kafka mutes the channel), so a client may pipeline. A
bad frame, an undecodable request, an unencodable response or a failing handler closes that
connection only. Limits: `connections.max.idle.ms`, a response not taken within 30 s + 1 s per
MiB, and the connection counts and creation rate of broker.core.connection_quotas
(`max.connections`, per listener, per address). On SSL and SASL listeners a connection first
does its TLS handshake and SASL exchange (broker.core.sasl) within
`connections.authentication.timeout.ms`, with frames of at most `sasl.server.max.receive.size`
until then; PLAIN's password hashing runs in a thread, and a failed authentication is answered
after `connection.failed.authentication.delay.ms`. An authenticated SASL session lasts
`connections.max.reauth.ms` (KIP-368: broker.core.sasl_session; a SaslHandshake re-runs the
exchange), and `close_sessions_of` closes the connections of users whose credentials were
deleted or changed. `stop` stops accepting and drains in-flight requests.
docs/architecture.md ("A request's life") has the details.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import ipaddress
import math
import secrets
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import structlog
import trio

from broker.config.settings import default_of
from broker.connection_task import Channel, Connection, ConnectionTasks
from broker.context import CLIENT_HOST, SESSION, BrokerContext, Session
from broker.core.connection import ServerConnection
from broker.core.connection_quotas import ConnectionLimits, ConnectionQuotas, Refusal
from broker.core.principal import USER_TYPE, Principal
from broker.core.sasl import SaslAuthenticator
from broker.core.sasl_session import SaslSession
from broker.handlers import HANDLERS
from broker.kafka.wire import NATIVE_WIRE, Wire
from broker.listeners import SecurityProtocol
from broker.request_stats import RequestStats
from broker.tls import certificate_subject
from client.socket_io import LeanSocket

__all__ = ["BrokerServer", "ServedListener"]

IDLE_TIMEOUT_S = cast(int, default_of("connections.max.idle.ms")) / 1000
MAX_CONNECTIONS = cast(int, default_of("max.connections"))
FAILED_AUTHENTICATION_DELAY_MS = cast(int, default_of("connection.failed.authentication.delay.ms"))
# PLAIN password checks (PBKDF2, milliseconds each) run at most this many at once, in threads
# (hashlib lets go of the GIL while it hashes): a flood of logins queues here, and the event
# loop keeps serving everyone else. Kafka runs them on its num.network.threads.
PASSWORD_CHECK_THREADS = 2
# accept() failures that mean "out of descriptors or memory for now" (trio.serve_listeners').
_ACCEPT_CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
_ACCEPT_RETRY_S = 0.1


@dataclass(frozen=True, slots=True)
class ServedListener:
    """One named listener as the server runs it."""

    name: str
    security_protocol: SecurityProtocol
    host: str
    port: int  # 0: any free port
    ssl_context: ssl.SSLContext | None = None  # SSL and SASL_SSL
    sasl_mechanisms: tuple[str, ...] = ()  # SASL_PLAINTEXT and SASL_SSL
    wire: Wire = NATIVE_WIRE  # listener.wire.protocol.map: Highwater's msgpack or Kafka's
    # listener.name.<name>.<mechanism>.connections.max.reauth.ms: (mechanism, ms) each.
    max_reauth_ms: tuple[tuple[str, int], ...] = ()


class BrokerServer:
    def __init__(
        self,
        ctx: BrokerContext,
        host: str,
        port: int,
        max_frame_bytes: int,
        *,
        listeners: Sequence[ServedListener] = (),
        idle_timeout_s: float | None = None,
        max_connections: int | None = None,
        limits: ConnectionLimits | None = None,
        failed_authentication_delay_ms: int = FAILED_AUTHENTICATION_DELAY_MS,
        auth_frame_bytes: int = cast(int, default_of("sasl.server.max.receive.size")),
        auth_timeout_s: float = cast(int, default_of("connections.authentication.timeout.ms"))
        / 1000,
        request_stats: RequestStats | None = None,
        max_reauth_ms: int = 0,
    ) -> None:
        """`listeners` (empty: one PLAINTEXT listener at host:port); `port` then reports
        the first one's bound port, `ports` every listener's. `limits`: the connection
        limits but max.connections, which is `max_connections` (None: its default)."""
        self.ctx = ctx
        self.listeners = tuple(listeners) or (
            ServedListener("PLAINTEXT", SecurityProtocol.PLAINTEXT, host, port),
        )
        self.host = self.listeners[0].host
        self.port = self.listeners[0].port
        self.ports: dict[str, int] = {}
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout_s = idle_timeout_s  # None: IDLE_TIMEOUT_S
        self.quotas = ConnectionQuotas(
            dataclasses.replace(
                limits or ConnectionLimits(),
                max_connections=MAX_CONNECTIONS if max_connections is None else max_connections,
            ),
            [served.name for served in self.listeners],
        )
        self.failed_authentication_delay_s = failed_authentication_delay_ms / 1000
        self.auth_frame_bytes = auth_frame_bytes
        self.auth_timeout_s = auth_timeout_s
        self.max_reauth_ms = max_reauth_ms  # connections.max.reauth.ms
        self._connections: set[Connection] = set()
        self._accepting = trio.CancelScope()
        self._stopping = False
        self._drained = trio.Event()
        self._logger = structlog.get_logger("highwater.server")
        # Salts the made-up SCRAM credentials of unknown users (broker.core.sasl).
        self._fake_salt_key = secrets.token_bytes(32)
        self.tasks = ConnectionTasks(
            ctx, request_stats, trio.CapacityLimiter(PASSWORD_CHECK_THREADS)
        )
        # For the metrics: per-API figures (None: not recorded), connections accepted, and
        # closed by a limit (a Refusal of the quotas, idle, too slow to read).
        self.request_stats = request_stats
        self.accepted = 0
        self.accept_throttled_s = 0.0  # waits before accepting (max.connection.creation.rate)
        self.closed_by_limit = dict.fromkeys(
            [*(refusal.value for refusal in Refusal), "idle", "slow_reader"], 0
        )

    @property
    def throttled_s(self) -> float:
        """The time connections were muted for client quotas (KIP-219)."""
        return self.tasks.throttled_s

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        opened = []
        try:
            for served in self.listeners:
                sockets = await trio.open_tcp_listeners(served.port, host=served.host)
                opened.append((served, sockets))
                self.ports[served.name] = sockets[0].socket.getsockname()[1]
        except BaseException:
            for _, sockets in opened:
                for socket_listener in sockets:
                    await socket_listener.aclose()
            raise
        self.port = self.ports[self.listeners[0].name]
        async with trio.open_nursery() as connections:
            with self._accepting:
                async with trio.open_nursery() as accepting:
                    accepting.start_soon(self._close_idle_connections)
                    for served, sockets in opened:
                        self._logger.info(
                            "listening",
                            listener=served.name,
                            security_protocol=str(served.security_protocol),
                            host=served.host,
                            port=self.ports[served.name],
                        )
                        for socket_listener in sockets:
                            accepting.start_soon(self._accept, served, socket_listener, connections)
                    task_status.started(self.port)
            for _, sockets in opened:
                for socket_listener in sockets:
                    await socket_listener.aclose()

    async def stop(self, drain_timeout_s: float = 10.0) -> None:
        """Stop accepting; finish in-flight requests; close every connection."""
        self._stopping = self.tasks.stopping = True
        self._accepting.cancel()
        self.ctx.purgatory.close()  # parked requests answer now with what they have
        for conn in list(self._connections):
            if not conn.machine.busy:
                conn.scope.cancel()
        with trio.move_on_after(drain_timeout_s):
            if self._connections:
                await self._drained.wait()  # set by the last connection to finish
        for conn in list(self._connections):
            conn.scope.cancel()

    async def _close_idle_connections(self) -> None:
        """Close connections idle for connections.max.idle.ms, in one sweep every quarter of
        it (as Kafka's Selector), rather than with a timer around every read."""
        while True:
            idle_s = IDLE_TIMEOUT_S if self.idle_timeout_s is None else self.idle_timeout_s
            await trio.sleep(max(idle_s / 4, 0.01))
            now = trio.current_time()
            for conn in list(self._connections):
                if not conn.machine.busy and now - conn.waiting_since >= idle_s:
                    self.closed_by_limit["idle"] += 1
                    conn.waiting_since = math.inf  # counted once
                    conn.scope.cancel()

    async def _accept(
        self,
        served: ServedListener,
        socket_listener: trio.SocketListener,
        connections: trio.Nursery,
    ) -> None:
        """Accept connections on one socket, each served in `connections`; past
        max.connection.creation.rate, wait before the next accept (Kafka's acceptor
        throttling: the client waits in the kernel's backlog)."""
        quotas = self.quotas
        while True:
            delay_s = quotas.accept_delay_s(served.name, trio.current_time())
            if delay_s > 0:
                self.accept_throttled_s += delay_s
                await trio.sleep(delay_s)
                continue
            try:
                stream = await socket_listener.accept()
            except OSError as exc:
                if exc.errno not in _ACCEPT_CAPACITY_ERRNOS:
                    raise
                self._logger.warning(
                    "cannot accept a connection now", listener=served.name, error=str(exc)
                )
                await trio.sleep(_ACCEPT_RETRY_S)
                continue
            quotas.accepted(served.name, trio.current_time())
            connections.start_soon(self._serve, served, stream)

    async def _serve(self, served: ServedListener, stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            await trio.aclose_forcefully(stream)
            return
        self.accepted += 1
        quota_host = _unmapped(host)
        refusal = self.quotas.admit(served.name, quota_host)
        if refusal is not None:
            self.closed_by_limit[refusal.value] += 1
            self._logger.warning(
                f"closing connection: {_REFUSALS[refusal]} reached",
                peer=peer,
                listener=served.name,
            )
            await trio.aclose_forcefully(stream)
            return
        now_s = trio.current_time()
        auth_deadline = now_s + self.auth_timeout_s
        conn = Connection(peer, served.name, quota_host, self._machine(served, now_s))
        CLIENT_HOST.set(host)  # this connection's task and the handlers it calls
        SESSION.set(Session(client_host=host, listener=served.name))
        self._connections.add(conn)
        log = self._logger.bind(peer=peer, listener=served.name)
        channel: Channel | trio.SocketStream = stream
        try:
            with conn.scope:
                if served.ssl_context is None:
                    channel = LeanSocket(stream)
                if served.security_protocol is not SecurityProtocol.PLAINTEXT:
                    if served.ssl_context is not None:
                        tls = await self._tls_handshake(stream, served, auth_deadline, log)
                        if tls is None:
                            return
                        channel = tls
                    log = log.bind(principal=str(SESSION.get().principal))
                assert not isinstance(channel, trio.SocketStream)
                await self.tasks.serve(channel, conn, log)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the client went away
        except trio.TooSlowError:
            self.closed_by_limit["slow_reader"] += 1
            log.warning("closing connection: client too slow to read")
        finally:
            self._connections.discard(conn)
            self.quotas.release(conn.listener, conn.host)
            if self._stopping and not self._connections:
                self._drained.set()
            if isinstance(channel, LeanSocket):
                channel.close()
            else:
                await trio.aclose_forcefully(channel)

    def _machine(self, served: ServedListener, now_s: float) -> ServerConnection:
        """A new connection's state machine; on a SASL listener it authenticates first."""
        sasl, session = None, None
        if served.security_protocol.uses_sasl:
            session = SaslSession(self.max_reauth_ms, dict(served.max_reauth_ms))
            sasl = SaslAuthenticator(
                served.sasl_mechanisms,
                lambda user, mechanism: self.ctx.credentials.get((user, mechanism)),
                fake_salt_key=self._fake_salt_key,
            )
        return ServerConnection(
            served.wire,
            max_frame_bytes=self.max_frame_bytes,
            served_api_keys=HANDLERS.keys(),
            idle_timeout_s=IDLE_TIMEOUT_S if self.idle_timeout_s is None else self.idle_timeout_s,
            sasl=sasl,
            session=session,
            auth_frame_bytes=self.auth_frame_bytes,
            auth_timeout_s=self.auth_timeout_s,
            failed_authentication_delay_s=self.failed_authentication_delay_s,
            now_s=now_s,
        )

    async def _tls_handshake(
        self,
        stream: trio.SocketStream,
        served: ServedListener,
        deadline: float,
        log: structlog.typing.FilteringBoundLogger,
    ) -> trio.SSLStream[trio.SocketStream] | None:
        """The TLS handshake, by the deadline; on an SSL listener the principal is then the
        client certificate's subject (ANONYMOUS without one), as Kafka's default builder."""
        assert served.ssl_context is not None
        tls = trio.SSLStream(stream, served.ssl_context, server_side=True)
        with trio.move_on_at(deadline):
            try:
                await tls.do_handshake()
            except trio.BrokenResourceError as exc:
                reason = exc.__cause__ or exc
                log.info("closing connection: TLS handshake failed", error=str(reason))
                return None
            subject = certificate_subject(tls.getpeercert())
            if subject is not None and served.security_protocol is SecurityProtocol.SSL:
                principal = Principal(USER_TYPE, subject)
                SESSION.set(dataclasses.replace(SESSION.get(), principal=principal))
                structlog.contextvars.bind_contextvars(principal=str(principal))
                log.info("authenticated", principal=str(principal), mechanism="SSL")
            return tls
        log.info("closing connection: no TLS handshake within the authentication timeout")
        return None

    def close_sessions_of(self, users: frozenset[str]) -> None:
        """Close the SASL connections authenticated as one of `users` (their credentials were
        deleted or changed): at once if idle, else once the request in hand is answered."""
        for conn in list(self._connections):
            session = conn.machine.session
            if session is not None and session.user() in users:
                self._logger.info(
                    "closing connection: the user's credentials were deleted or changed",
                    peer=conn.peer,
                    listener=conn.listener,
                    principal=str(session.principal),
                )
                conn.machine.revoke()
                if not conn.machine.busy:
                    conn.scope.cancel()


_REFUSALS = {
    Refusal.MAX_CONNECTIONS: "max.connections",
    Refusal.LISTENER_MAX_CONNECTIONS: "the listener's max.connections",
    Refusal.MAX_CONNECTIONS_PER_IP: "max.connections.per.ip",
}


def _unmapped(host: str) -> str:
    """An IPv4 client of a dual-stack listener as its IPv4 address (::ffff:10.0.0.7 is
    10.0.0.7), so that max.connections.per.ip and its overrides see one address."""
    if host.startswith("::ffff:"):
        with contextlib.suppress(ValueError):
            mapped = ipaddress.IPv6Address(host).ipv4_mapped
            if mapped is not None:
                return str(mapped)
    return host
