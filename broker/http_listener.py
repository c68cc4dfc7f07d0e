"""The broker's HTTP listener (`metrics.listener`): /metrics, the status page, /api/cluster.

A starlette app served by hypercorn's trio machinery inside the broker's nursery: h11/h2 parse
HTTP, never this code. It shares the event loop with the Kafka listener, so it is bounded:
at most `metrics.max.connections` connections (more are closed when accepted), request heads
up to `metrics.max.header.bytes` (larger: 431), a client silent mid-request for
`metrics.read.timeout.ms` is dropped, idle keep-alives after 5 s, no request bodies (every
route is GET, read-only), and on shutdown every connection is closed, however stuck.
"""

from __future__ import annotations

import logging
from functools import partial
from importlib import resources
from typing import TYPE_CHECKING

import trio
from hypercorn.config import Config
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState
from hypercorn.utils import wrap_app
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from broker.cluster_view import ClusterView

if TYPE_CHECKING:
    from broker.config import BrokerConfig

__all__ = ["HttpListener", "build_app"]

KEEP_ALIVE_TIMEOUT_S = 5.0


def _page() -> str:
    return resources.files("broker").joinpath("ui/status.html").read_text(encoding="utf-8")


def build_app(registry: CollectorRegistry, view: ClusterView) -> Starlette:
    page = _page()

    async def metrics(request: Request) -> Response:
        # The groups this broker coordinates need their partitions' HWs from the leaders.
        await view.refresh_group_high_watermarks()
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def status_page(request: Request) -> Response:
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    async def cluster(request: Request) -> Response:
        return JSONResponse(await view.snapshot(), headers={"Cache-Control": "no-store"})

    return Starlette(
        routes=[
            Route("/", status_page, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/api/cluster", cluster, methods=["GET"]),
        ]
    )


class HttpListener:
    """Serves `app` on (host, port) until cancelled; `port` is the bound one once started."""

    def __init__(self, app: Starlette, config: BrokerConfig, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self.max_connections = config.metrics_max_connections
        self.closed_by_limit = 0
        self._streams: set[trio.SocketStream] = set()
        hc = Config()
        hc.h11_max_incomplete_size = config.metrics_max_header_bytes
        hc.h2_max_header_list_size = config.metrics_max_header_bytes
        hc.h2_max_concurrent_streams = 8
        hc.read_timeout = max(1, config.metrics_read_timeout_ms // 1000)
        hc.keep_alive_timeout = KEEP_ALIVE_TIMEOUT_S
        hc.accesslog = None
        hc.errorlog = logging.getLogger("highwater.http")
        hc.include_server_header = False
        self._hypercorn = hc
        # Starlette is an ASGI 3 app; hypercorn's type names its own scope classes.
        self._app = wrap_app(app, hc.wsgi_max_body_size, "asgi")  # type: ignore[arg-type]
        self._log = logging.getLogger("highwater.http")

    @property
    def connection_count(self) -> int:
        return len(self._streams)

    async def run(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        listeners = await trio.open_tcp_listeners(self.port, host=self.host or None)
        self.port = listeners[0].socket.getsockname()[1]
        context = WorkerContext(None)
        serve = partial(TCPServer, self._app, self._hypercorn, context)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._close_all_when_cancelled)
                task_status.started(self.port)
                self._log.info("metrics listener on http://%s:%d", self.host, self.port)
                await trio.serve_listeners(
                    partial(self._serve, serve), listeners, handler_nursery=nursery
                )
        finally:
            for listener in listeners:
                listener.socket.close()

    async def _serve(self, serve: partial[TCPServer], stream: trio.SocketStream) -> None:
        if len(self._streams) >= self.max_connections:
            self.closed_by_limit += 1
            await trio.aclose_forcefully(stream)
            return
        self._streams.add(stream)
        try:
            await serve(ConnectionState({}), stream)
        finally:
            self._streams.discard(stream)

    async def _close_all_when_cancelled(self) -> None:
        """hypercorn shields its writes: a client that never reads could hold a connection
        (and the broker's shutdown) for ever. Closing the sockets ends those writes."""
        try:
            await trio.sleep_forever()
        finally:
            for stream in list(self._streams):
                stream.socket.close()
