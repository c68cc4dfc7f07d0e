"""One blocking connection to a broker, without trio: for a few questions from plain code.

The Spark driver's questions go over it (client.spark.cluster). Spark's streaming source
runner imports the source in a fresh process before every query and waits for it; importing
trio is about 50 ms of that wait (docs/spark.md, "Measuring"). One request at a time, with the
same sans-IO `ClientProtocol`, security settings and SASL exchange as `client.network`,
re-authentication included (KIP-368: the first request after `reauthentication_delay_s`).
"""

from __future__ import annotations

import math
import socket
import time
from typing import TYPE_CHECKING, Any

from client.errors import AuthenticationFailedError, BrokerConnectionError
from client.security import (
    PLAINTEXT_CLOSED_HINT,
    AuthenticationError,
    ClientSecurity,
    reauthentication_delay_s,
)
from protocol.client_protocol import ClientProtocol, ReceivedResponse
from protocol.errors import HighwaterError
from protocol.framing import NEED_DATA

if TYPE_CHECKING:
    import ssl

__all__ = ["SyncBrokerConnection", "connect_sync"]

_RECEIVE_BYTES = 256 * 1024


def connect_sync(
    host: str,
    port: int,
    *,
    client_id: str | None = None,
    timeout_ms: int = 10_000,
    security: ClientSecurity | None = None,
) -> SyncBrokerConnection:
    """A connection, once it is secured and authenticated as `security` says (None:
    PLAINTEXT); all of it within `timeout_ms`."""
    address = f"{host}:{port}"
    deadline = time.monotonic() + timeout_ms / 1000
    try:
        sock = socket.create_connection((host, port), timeout=timeout_ms / 1000)
    except OSError as exc:
        raise BrokerConnectionError(f"cannot connect to {address}: {exc or 'timed out'}") from exc
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if security is None or security.protocol == "PLAINTEXT":
        return SyncBrokerConnection(sock, address, client_id, closed_hint=PLAINTEXT_CLOSED_HINT)
    if security.uses_tls:
        sock = _tls(sock, host, security, address)
    connection = SyncBrokerConnection(sock, address, client_id)
    if security.uses_sasl:
        connection.authenticate(security, deadline)
    return connection


def _tls(sock: socket.socket, host: str, security: ClientSecurity, address: str) -> ssl.SSLSocket:
    import ssl  # here: ssl is about 10 ms of the source runner's import, and only TLS needs it

    try:
        return security.ssl_context().wrap_socket(sock, server_hostname=host)
    except (ssl.SSLError, ConnectionError) as exc:
        sock.close()
        raise AuthenticationFailedError(f"{address}: TLS handshake failed: {exc}") from None
    except OSError as exc:
        sock.close()
        raise BrokerConnectionError(f"cannot connect to {address}: {exc or 'timed out'}") from exc


class SyncBrokerConnection:
    def __init__(
        self, sock: socket.socket, address: str, client_id: str | None, *, closed_hint: str = ""
    ) -> None:
        """`closed_hint`: said when the broker closes the connection before its first answer."""
        self.address = address
        self._socket = sock
        self._protocol = ClientProtocol(client_id)
        self._broken: BrokerConnectionError | None = None
        self._closed_hint = closed_hint
        self._answered = False
        self._security: ClientSecurity | None = None  # SASL with a session lifetime
        self._reauth_at = math.inf  # time.monotonic() to re-authenticate at

    @property
    def broken(self) -> bool:
        return self._broken is not None

    def authenticate(self, security: ClientSecurity, deadline: float) -> None:
        """The SASL exchange, by `deadline` (time.monotonic()); again at the first request
        after `reauthentication_delay_s` of the session's lifetime. AuthenticationFailedError
        if refused; the connection is then closed."""
        self._security, self._reauth_at = None, math.inf  # its requests go out as they are
        try:
            exchange = security.sasl_exchange()
            request = next(exchange)
            while True:
                remaining_ms = max(1, int((deadline - time.monotonic()) * 1000))
                response = self.request(request, timeout_ms=remaining_ms)
                try:
                    request = exchange.send(response)
                except StopIteration as done:
                    lifetime_ms = int(done.value)
                    break
        except AuthenticationError as exc:
            self.close()
            raise AuthenticationFailedError(f"{self.address}: {exc}", exc.code) from None
        except BaseException:
            self.close()
            raise
        self._security = security
        self._reauth_at = time.monotonic() + reauthentication_delay_s(lifetime_ms)

    def request(self, body: object, api_version: int | None = None, *, timeout_ms: int) -> Any:
        """Send `body`, wait for its response body. A failure or a timeout breaks the
        connection (BrokerConnectionError): a late answer would be read as the next one's."""
        if self._broken is not None:
            raise self._broken
        if self._security is not None and time.monotonic() >= self._reauth_at:
            self.authenticate(self._security, time.monotonic() + timeout_ms / 1000)
        deadline = time.monotonic() + timeout_ms / 1000
        _, data = self._protocol.send_request(body, api_version)
        try:
            self._socket.settimeout(timeout_ms / 1000)
            self._socket.sendall(data)
            while True:
                response = self._protocol.next_response()
                if response is not NEED_DATA:
                    assert isinstance(response, ReceivedResponse)
                    self._answered = True
                    return response.body
                self._socket.settimeout(max(0.001, deadline - time.monotonic()))
                received = self._socket.recv(_RECEIVE_BYTES)
                if not received:
                    hint = "" if self._answered else self._closed_hint
                    raise self._break(f"connection closed by the broker{hint}")
                self._protocol.receive_data(received)
        except TimeoutError:
            raise self._break("request timed out") from None
        except OSError as exc:
            raise self._break(f"connection {exc}") from exc
        except HighwaterError as exc:
            raise self._break(f"bad response: {exc}") from exc

    def _break(self, reason: str) -> BrokerConnectionError:
        if self._broken is None:
            self._broken = BrokerConnectionError(f"{self.address}: {reason}")
            self._socket.close()
        return self._broken

    def close(self) -> None:
        self._break("connection closed")
