"""The broker's TCP server: one task per connection, requests answered in order.

One request at a time per connection (Kafka mutes the channel), so a client may pipeline. A
bad frame, an undecodable request, an unencodable response or a failing handler closes that
connection only. Limits: `connections.max.idle.ms`, `max.connections`, and a response not
taken within 30 s + 1 s per MiB. `stop` stops accepting and drains in-flight requests.
docs/architecture.md ("A request's life") has the details.
"""

from __future__ import annotations

import dataclasses
import math
import time
from dataclasses import dataclass, field
from typing import Any, cast

import structlog
import trio

from broker.context import CLIENT_HOST, BrokerContext
from broker.handlers import HANDLERS
from broker.purgatory import RequestClock, current_request_clock
from broker.request_stats import RequestStats
from broker.settings import default_of
from protocol.apis import ApiKey, supported_versions
from protocol.codec import RequestDecodeError, RequestHeader, decode_request, encode_response
from protocol.errors import ErrorCode, FrameError, HighwaterError
from protocol.framing import NEED_DATA, FrameDecoder
from protocol.messages.api_versions import ApiVersionsResponse

__all__ = ["BrokerServer"]

_RECEIVE_BYTES = 256 * 1024
IDLE_TIMEOUT_S = cast(int, default_of("connections.max.idle.ms")) / 1000
MAX_CONNECTIONS = cast(int, default_of("max.connections"))
_MESSAGE_CHARS = 1000  # an error message cut to this when the whole response is too big


@dataclass(eq=False)
class _Connection:
    peer: str
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    busy: bool = False


class BrokerServer:
    def __init__(
        self,
        ctx: BrokerContext,
        host: str,
        port: int,
        max_frame_bytes: int,
        *,
        idle_timeout_s: float | None = None,
        max_connections: int | None = None,
        request_stats: RequestStats | None = None,
    ) -> None:
        self.ctx = ctx
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self.idle_timeout_s = idle_timeout_s  # None: IDLE_TIMEOUT_S
        self.max_connections = max_connections  # None: MAX_CONNECTIONS
        self._connections: set[_Connection] = set()
        self._accepting = trio.CancelScope()
        self._stopping = False
        self._drained = trio.Event()
        self._logger = structlog.get_logger("highwater.server")
        # For the metrics: per-API figures (None: not recorded), connections accepted, and
        # closed by a limit (max.connections, idle, too slow to read).
        self.request_stats = request_stats
        self.accepted = 0
        self.closed_by_limit = {"max_connections": 0, "idle": 0, "slow_reader": 0}

    @property
    def connection_count(self) -> int:
        return len(self._connections)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host=self.host)
        self.port = listeners[0].socket.getsockname()[1]
        async with trio.open_nursery() as connections:
            with self._accepting:
                task_status.started(self.port)
                self._logger.info("listening", host=self.host, port=self.port)
                await trio.serve_listeners(self._serve, listeners, handler_nursery=connections)
            for listener in listeners:
                await listener.aclose()

    async def stop(self, drain_timeout_s: float = 10.0) -> None:
        """Stop accepting; finish in-flight requests; close every connection."""
        self._stopping = True
        self._accepting.cancel()
        self.ctx.purgatory.close()  # parked requests answer now with what they have
        for conn in list(self._connections):
            if not conn.busy:
                conn.scope.cancel()
        with trio.move_on_after(drain_timeout_s):
            if self._connections:
                await self._drained.wait()  # set by the last connection to finish
        for conn in list(self._connections):
            conn.scope.cancel()

    async def _serve(self, stream: trio.SocketStream) -> None:
        try:
            host, port = stream.socket.getpeername()[:2]
            peer = f"{host}:{port}"
        except OSError:
            return
        self.accepted += 1
        limit = MAX_CONNECTIONS if self.max_connections is None else self.max_connections
        if len(self._connections) >= limit:
            self.closed_by_limit["max_connections"] += 1
            self._logger.warning("closing connection: max.connections reached", peer=peer)
            await trio.aclose_forcefully(stream)
            return
        conn = _Connection(peer)
        CLIENT_HOST.set(host)  # this connection's task and the handlers it calls
        self._connections.add(conn)
        try:
            with conn.scope:
                await self._serve_requests(stream, conn)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the client went away
        except trio.TooSlowError:
            self.closed_by_limit["slow_reader"] += 1
            self._logger.warning("closing connection: client too slow to read", peer=peer)
        finally:
            self._connections.discard(conn)
            if self._stopping and not self._connections:
                self._drained.set()
            await trio.aclose_forcefully(stream)

    async def _serve_requests(self, stream: trio.SocketStream, conn: _Connection) -> None:
        decoder = FrameDecoder(self.max_frame_bytes)
        log = self._logger.bind(peer=conn.peer)
        stats = self.request_stats
        clock = RequestClock()
        if stats is not None:
            current_request_clock.set(clock)  # this task's context: the purgatory adds to it
        while not self._stopping:
            try:
                frame_body = decoder.next_frame()
            except FrameError as exc:
                log.warning("closing connection: bad frame", error=str(exc))
                return
            if frame_body is NEED_DATA:
                idle_s = IDLE_TIMEOUT_S if self.idle_timeout_s is None else self.idle_timeout_s
                with trio.move_on_after(idle_s) as idle:
                    data = await stream.receive_some(_RECEIVE_BYTES)
                if idle.cancelled_caught:
                    self.closed_by_limit["idle"] += 1
                    return
                if not data:
                    return
                decoder.receive_data(data)
                continue
            assert isinstance(frame_body, bytes)
            received = time.perf_counter()
            try:
                request = decode_request(frame_body)
            except RequestDecodeError as exc:
                if _unsupported_api_versions(exc.header, exc.code):
                    assert exc.header is not None
                    await self._send(stream, _api_versions_fallback(exc.header))
                    continue
                log.warning("closing connection: bad request", error=str(exc))
                return
            header = request.header
            handler = HANDLERS.get(header.api_key)
            if handler is None:
                log.warning("closing connection: api not served", api_key=header.api_key)
                return
            conn.busy = True
            clock.remote_s = 0.0
            started = time.perf_counter()
            try:
                response = await handler(self.ctx, header, request.body)
            except Exception:
                log.exception("request handler failed", api_key=header.api_key)
                return
            handled = time.perf_counter()
            size = 0
            if response is not None:
                try:
                    data = _encode(header, response)
                except Exception:
                    # A bug in that handler, which must not take the broker down.
                    log.exception("response could not be encoded", api_key=header.api_key)
                    return
                size = len(data)
                await self._send(stream, data)
            conn.busy = False
            if stats is not None:
                remote_s = clock.remote_s
                stats.record(
                    header.api_key,
                    started - received,
                    handled - started - remote_s,
                    remote_s,
                    time.perf_counter() - handled,
                    len(frame_body) + 4,
                    size,
                    response,
                )

    async def _send(self, stream: trio.SocketStream, data: bytes) -> None:
        with trio.fail_after(_send_timeout_s(len(data))):
            await stream.send_all(data)


def _encode(header: RequestHeader, response: object) -> bytes:
    """Encode; if that fails, again with every error_message cut short: a message quoting a
    client's oversized input (a 32 KiB topic name) must not cost the client its answer."""
    try:
        return encode_response(header.correlation_id, header.api_key, header.api_version, response)
    except HighwaterError:
        short = _short_messages(response)
        return encode_response(header.correlation_id, header.api_key, header.api_version, short)


def _short_messages(value: Any) -> Any:
    if isinstance(value, tuple):
        return tuple(_short_messages(v) for v in value)
    if not dataclasses.is_dataclass(value) or isinstance(value, type):
        return value
    changes: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        item = getattr(value, f.name)
        if f.name == "error_message" and isinstance(item, str) and len(item) > _MESSAGE_CHARS:
            changes[f.name] = item[:_MESSAGE_CHARS] + "..."
        elif isinstance(item, tuple) or dataclasses.is_dataclass(item):
            changes[f.name] = _short_messages(item)
    return dataclasses.replace(value, **changes) if changes else value


def _unsupported_api_versions(header: RequestHeader | None, code: int) -> bool:
    return (
        header is not None
        and header.api_key == ApiKey.API_VERSIONS
        and code == ErrorCode.UNSUPPORTED_VERSION
    )


def _api_versions_fallback(header: RequestHeader) -> bytes:
    """Kafka's answer to ApiVersions at a version it does not speak: v0, UNSUPPORTED_VERSION,
    and the supported ranges."""
    body = ApiVersionsResponse(ErrorCode.UNSUPPORTED_VERSION, supported_versions())
    return encode_response(header.correlation_id, ApiKey.API_VERSIONS, 0, body)


def _send_timeout_s(size: int) -> float:
    # A bounded wait for slow readers: 30 s plus 1 s per MiB.
    return 30.0 + size / (1024 * 1024) if size >= 0 else math.inf
