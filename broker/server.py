"""The broker's TCP server: one task per connection, requests answered in order.

Like Kafka, a connection is served one request at a time (Kafka mutes the channel while a
request is in flight), so a client may pipeline and still get responses in order. A frame
that is too large or a request that cannot be decoded closes that connection only.

Shutdown (`stop`): stop accepting, close idle connections, let busy ones finish the request in
hand (bounded by `drain_timeout_s`), then return.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import structlog
import trio

from broker.context import BrokerContext
from broker.handlers import HANDLERS
from protocol.codec import RequestDecodeError, decode_request, encode_response
from protocol.errors import FrameError
from protocol.framing import NEED_DATA, FrameDecoder

__all__ = ["BrokerServer"]

_RECEIVE_BYTES = 256 * 1024
IDLE_TIMEOUT_S = 600.0  # Kafka's connections.max.idle.ms


@dataclass(eq=False)
class _Connection:
    peer: str
    scope: trio.CancelScope = field(default_factory=trio.CancelScope)
    busy: bool = False


class BrokerServer:
    def __init__(self, ctx: BrokerContext, host: str, port: int, max_frame_bytes: int) -> None:
        self.ctx = ctx
        self.host = host
        self.port = port
        self.max_frame_bytes = max_frame_bytes
        self._connections: set[_Connection] = set()
        self._accepting = trio.CancelScope()
        self._stopping = False
        self._drained = trio.Event()
        self._logger = structlog.get_logger("highwater.server")

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
        conn = _Connection(peer)
        self._connections.add(conn)
        try:
            with conn.scope:
                await self._serve_requests(stream, conn)
        except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
            pass  # the client went away
        except trio.TooSlowError:
            self._logger.warning("closing connection: client too slow to read", peer=peer)
        finally:
            self._connections.discard(conn)
            if self._stopping and not self._connections:
                self._drained.set()
            await trio.aclose_forcefully(stream)

    async def _serve_requests(self, stream: trio.SocketStream, conn: _Connection) -> None:
        decoder = FrameDecoder(self.max_frame_bytes)
        log = self._logger.bind(peer=conn.peer)
        while not self._stopping:
            try:
                frame_body = decoder.next_frame()
            except FrameError as exc:
                log.warning("closing connection: bad frame", error=str(exc))
                return
            if frame_body is NEED_DATA:
                with trio.move_on_after(IDLE_TIMEOUT_S) as idle:
                    data = await stream.receive_some(_RECEIVE_BYTES)
                if idle.cancelled_caught or not data:
                    return
                decoder.receive_data(data)
                continue
            assert isinstance(frame_body, bytes)
            try:
                request = decode_request(frame_body)
            except RequestDecodeError as exc:
                log.warning("closing connection: bad request", error=str(exc))
                return
            header = request.header
            handler = HANDLERS.get(header.api_key)
            if handler is None:
                log.warning("closing connection: api not served", api_key=header.api_key)
                return
            conn.busy = True
            try:
                response = await handler(self.ctx, header, request.body)
            except Exception:
                log.exception("request handler failed", api_key=header.api_key)
                return
            if response is not None:
                data = encode_response(
                    header.correlation_id, header.api_key, header.api_version, response
                )
                with trio.fail_after(_send_timeout_s(len(data))):
                    await stream.send_all(data)
            conn.busy = False


def _send_timeout_s(size: int) -> float:
    # A bounded wait for slow readers: 30 s plus 1 s per MiB.
    return 30.0 + size / (1024 * 1024) if size >= 0 else math.inf
