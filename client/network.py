"""One TCP connection to a broker, in trio: pipelined requests, responses matched in order.

The thin shell around `protocol.client_protocol.ClientProtocol`. Several tasks may call
`request` at once: each writes its frame under the send lock, then whoever holds the receive
lock reads frames and hands each response to the task waiting for it. No background task is
needed, so a connection can be used from any nursery. A broken stream fails every waiter with
`BrokerConnectionError` and the connection stays broken; callers reconnect. When the broker
gives the SASL session a lifetime (KIP-368), the first request after
`reauthentication_delay_s` runs the SASL exchange again first, holding the send lock so that
nothing else goes out in between.

Used by the clients, and by brokers for controller requests and replica fetches (Kafka's
NetworkClient plays the same part for both).
"""

from __future__ import annotations

import math
import ssl
from collections.abc import Callable
from typing import Any

import trio

from client.deadlines import Timeout, request_deadlines
from client.errors import AuthenticationFailedError, BrokerConnectionError
from client.security import (
    PLAINTEXT_CLOSED_HINT,
    AuthenticationError,
    ClientSecurity,
    reauthentication_delay_s,
)
from client.settings import REQUEST_TIMEOUT_MS
from client.socket_io import LeanSocket
from protocol.client_protocol import ClientProtocol, ReceivedResponse
from protocol.errors import HighwaterError
from protocol.framing import NEED_DATA

__all__ = [
    "DEFAULT_REQUEST_TIMEOUT_MS",
    "AuthenticationFailedError",
    "BrokerConnection",
    "BrokerConnectionError",
    "connect",
]

DEFAULT_REQUEST_TIMEOUT_MS = REQUEST_TIMEOUT_MS
_RECEIVE_BYTES = 256 * 1024


async def connect(
    host: str,
    port: int,
    *,
    client_id: str | None = None,
    timeout_ms: int = 10_000,
    security: ClientSecurity | None = None,
) -> BrokerConnection:
    """A connection, once it is secured and authenticated as `security` says (None:
    PLAINTEXT); all of it within `timeout_ms`."""
    address = f"{host}:{port}"
    try:
        with trio.fail_after(timeout_ms / 1000):
            tcp = await trio.open_tcp_stream(host, port)
            if security is None or security.protocol == "PLAINTEXT":
                return BrokerConnection(tcp, address, client_id, closed_hint=PLAINTEXT_CLOSED_HINT)
            stream: trio.abc.Stream = tcp
            if security.uses_tls:
                stream = await _tls(tcp, host, security, address)
            connection = BrokerConnection(
                stream, address, client_id, socket_stream=None if stream is tcp else tcp
            )
            if security.uses_sasl:
                try:
                    lifetime_ms = await security.authenticate(connection, timeout_ms)
                    connection.reauthenticate_as(security, lifetime_ms)
                except AuthenticationError as exc:
                    connection.close_now()
                    raise AuthenticationFailedError(f"{address}: {exc}", exc.code) from None
                except BaseException:
                    connection.close_now()
                    raise
            return connection
    except AuthenticationFailedError:
        raise
    except (OSError, trio.TooSlowError) as exc:
        raise BrokerConnectionError(f"cannot connect to {address}: {exc or 'timed out'}") from exc


async def _tls(
    tcp: trio.SocketStream, host: str, security: ClientSecurity, address: str
) -> trio.SSLStream[trio.SocketStream]:
    tls = trio.SSLStream(tcp, security.ssl_context(), server_hostname=host)
    try:
        await tls.do_handshake()
    except trio.BrokenResourceError as exc:
        tcp.socket.close()
        reason = exc.__cause__ if isinstance(exc.__cause__, ssl.SSLError | OSError) else exc
        raise AuthenticationFailedError(f"{address}: TLS handshake failed: {reason}") from None
    except BaseException:
        tcp.socket.close()
        raise
    return tls


async def _acquire(lock: trio.Lock) -> None:
    """Take a free lock without trio.Lock.acquire's yield to the scheduler: each request takes
    two, and a request that waits for its answer yields there anyway."""
    try:
        lock.acquire_nowait()
    except trio.WouldBlock:
        await lock.acquire()


class BrokerConnection:
    def __init__(
        self,
        stream: trio.abc.Stream,
        address: str,
        client_id: str | None,
        *,
        socket_stream: trio.SocketStream | None = None,
        closed_hint: str = "",
    ) -> None:
        """`socket_stream`: the TCP stream under `stream` when that is a TLS stream;
        `closed_hint`: said when the broker closes the connection before its first answer."""
        self.address = address
        # Plain TCP (PLAINTEXT, SASL_PLAINTEXT): the socket itself, driven without trio's
        # per-call overhead (client.socket_io); TLS: trio's SSLStream over `socket_stream`.
        self._stream: trio.abc.Stream | LeanSocket
        if isinstance(stream, trio.SocketStream):
            self._stream = LeanSocket(stream)
        else:
            assert socket_stream is not None, "a TLS stream needs its TCP stream"
            self._stream = stream
        self._socket = socket_stream
        self._protocol = ClientProtocol(client_id)
        self._send_lock = trio.Lock()
        self._receive_lock = trio.Lock()
        self._arrived: dict[int, ReceivedResponse] = {}
        self._waiting: set[int] = set()
        self._broken: BrokerConnectionError | None = None
        self._closed_hint = closed_hint
        self._answered = False
        self._security: ClientSecurity | None = None  # SASL with a session lifetime
        self._reauth_at = math.inf  # trio time to re-authenticate at
        self._reauthenticating = False

    @property
    def broken(self) -> bool:
        return self._broken is not None

    def reauthenticate_as(self, security: ClientSecurity, session_lifetime_ms: int) -> None:
        """Authenticated as `security` says, for `session_lifetime_ms` (0: unlimited)."""
        self._security = security
        self._reauth_at = trio.current_time() + reauthentication_delay_s(session_lifetime_ms)

    async def request(
        self,
        body: object,
        api_version: int | None = None,
        *,
        timeout_ms: int = DEFAULT_REQUEST_TIMEOUT_MS,
        expect_response: bool = True,
        on_sent: Callable[[], object] | None = None,
    ) -> Any:
        """Send `body` and return the response body (None when no response is expected).
        `on_sent` is called once the request is on the wire (a caller pipelining requests
        waits for that, not for the answer).

        A timeout breaks the connection: the late response would otherwise be read by nobody
        and every later request would wait behind it.
        """
        self._raise_if_broken()
        if (
            self._reauth_at != math.inf
            and not self._reauthenticating
            and trio.current_time() >= self._reauth_at
        ):
            await self._reauthenticate(timeout_ms)
        # The timeout is an entry in the run's deadline heap, not a cancel scope around the
        # request (client.deadlines): at the deadline it breaks the connection, which wakes
        # this task wherever it waits (the socket, or a lock whose holder waits on it).
        timeout = None
        if timeout_ms >= 0:
            deadlines = request_deadlines()
            timeout = _RequestTimeout(self)
            deadlines.add(trio.current_time() + timeout_ms / 1000, timeout)
        try:
            await _acquire(self._send_lock)
            try:
                self._raise_if_broken()
                correlation_id, data = self._protocol.send_request(
                    body, api_version, expect_response=expect_response
                )
                if expect_response:
                    self._waiting.add(correlation_id)
                await self._send(data)
            finally:
                self._send_lock.release()
            if on_sent is not None:
                on_sent()
            if not expect_response:
                return None
            return await self._wait_for(correlation_id)
        finally:
            if timeout is not None:
                deadlines.end(timeout)

    async def _reauthenticate(self, timeout_ms: int) -> None:
        """The SASL exchange again (KIP-368), with nothing else sent until it is done: the
        broker takes only SASL requests in the middle of it. AuthenticationFailedError (the
        connection broken) if the broker refuses now."""
        assert self._security is not None
        self._reauthenticating = True
        timeout = None
        if timeout_ms >= 0:
            deadlines = request_deadlines()
            timeout = _RequestTimeout(self)
            deadlines.add(trio.current_time() + timeout_ms / 1000, timeout)
        try:
            await _acquire(self._send_lock)
            try:
                exchange = self._security.sasl_exchange()
                request = next(exchange)
                while True:
                    self._raise_if_broken()
                    correlation_id, data = self._protocol.send_request(request, None)
                    self._waiting.add(correlation_id)
                    await self._send(data)
                    response = await self._wait_for(correlation_id)
                    try:
                        request = exchange.send(response)
                    except StopIteration as done:
                        lifetime_ms = int(done.value)
                        break
            except AuthenticationError as exc:
                self._break(BrokerConnectionError(f"{self.address}: re-authentication: {exc}"))
                raise AuthenticationFailedError(f"{self.address}: {exc}", exc.code) from None
            except BaseException:
                # Cancelled or broken halfway: the broker expects the rest of the exchange.
                self._break(BrokerConnectionError(f"{self.address}: re-authentication cut off"))
                raise
            finally:
                self._send_lock.release()
        finally:
            self._reauthenticating = False
            if timeout is not None:
                deadlines.end(timeout)
        self._reauth_at = trio.current_time() + reauthentication_delay_s(lifetime_ms)

    async def _send(self, data: bytes) -> None:
        try:
            await self._stream.send_all(data)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
            self._break(BrokerConnectionError(f"{self.address}: send failed: {exc}"))
            raise self._broken from exc  # type: ignore[misc]
        except trio.Cancelled:
            # Cancelled mid-frame (the caller's own cancel scope): part of the frame may be on
            # the wire, so the stream is unusable; the next request would corrupt it.
            self._break(BrokerConnectionError(f"{self.address}: send cancelled"))
            raise

    async def _wait_for(self, correlation_id: int) -> Any:
        try:
            while correlation_id not in self._arrived:
                await _acquire(self._receive_lock)
                try:
                    while correlation_id not in self._arrived:
                        self._raise_if_broken()
                        await self._receive_one()
                finally:
                    self._receive_lock.release()
            return self._arrived.pop(correlation_id).body
        finally:
            self._waiting.discard(correlation_id)
            self._arrived.pop(correlation_id, None)

    async def _receive_one(self) -> None:
        """Read until at least one response is decoded; stash each for its waiter."""
        while True:
            try:
                response = self._protocol.next_response()
            except HighwaterError as exc:
                self._break(BrokerConnectionError(f"{self.address}: bad response: {exc}"))
                raise self._broken from exc  # type: ignore[misc]
            if response is not NEED_DATA:
                assert isinstance(response, ReceivedResponse)
                self._answered = True
                if response.correlation_id in self._waiting:  # else its caller gave up
                    self._arrived[response.correlation_id] = response
                return
            stream = self._stream
            try:
                if isinstance(stream, LeanSocket):  # a large response is read in place
                    count = await stream.receive_frames(self._protocol, _RECEIVE_BYTES)
                else:  # TLS: trio's SSLStream has no recv_into
                    data = await stream.receive_some(_RECEIVE_BYTES)
                    count = len(data)
                    if data:
                        self._protocol.receive_data(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError, OSError) as exc:
                count = 0
                reason = str(exc)
            else:
                reason = "closed by the broker" + ("" if self._answered else self._closed_hint)
            if not count:
                self._break(BrokerConnectionError(f"{self.address}: connection {reason}"))
                raise self._broken  # type: ignore[misc]

    def _raise_if_broken(self) -> None:
        if self._broken is not None:
            raise self._broken

    def _break(self, error: BrokerConnectionError) -> None:
        if self._broken is None:
            self._broken = error
            # Wakes any task blocked in receive_some.
            if isinstance(self._stream, LeanSocket):
                self._stream.close()
            else:
                assert self._socket is not None
                self._socket.socket.close()

    def close_now(self) -> None:
        """Close without waiting (for connection pools dropping a connection from sync code)."""
        self._break(BrokerConnectionError(f"{self.address}: connection closed"))

    async def aclose(self) -> None:
        if self._broken is None:
            self._broken = BrokerConnectionError(f"{self.address}: connection closed")
        if isinstance(self._stream, LeanSocket):
            self._stream.close()
            await trio.lowlevel.checkpoint()
        else:
            await self._stream.aclose()


class _RequestTimeout(Timeout):
    """A request's deadline: when it passes, the connection breaks, as Kafka's NetworkClient
    disconnects on a request timeout (a late answer would hold up every later one)."""

    __slots__ = ("connection",)

    def __init__(self, connection: BrokerConnection) -> None:
        super().__init__()
        self.connection = connection

    def expire(self) -> None:
        connection = self.connection
        connection._break(BrokerConnectionError(f"{connection.address}: request timed out"))
