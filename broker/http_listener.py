"""The broker's HTTP listener (`metrics.listener`): /metrics, the status page, /api/cluster
and /api/history.

A starlette app served by hypercorn's trio machinery inside the broker's nursery: h11/h2 parse
HTTP, never this code. It shares the event loop with the Kafka listener, so it is bounded:
at most `metrics.max.connections` connections (more are closed when accepted), request heads
up to `metrics.max.header.bytes` (larger: 431), a client silent mid-request for
`metrics.read.timeout.ms` is dropped, idle keep-alives after 5 s, no request bodies (every
route is GET, read-only), and on shutdown every connection is closed, however stuck.

`https://` wraps each connection in TLS (broker/tls.py's `https_context`); with basic
authentication (broker/http_auth.py) every route needs a SCRAM user's password and shows what
that user may DESCRIBE.
"""

from __future__ import annotations

import logging
import ssl
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
from broker.core.http_basic import REALM
from broker.core.principal import Principal
from broker.core.status_history import StatusHistory
from broker.core.visible_cluster import MayDescribe, visible_snapshot
from protocol.acl import CLUSTER_NAME, AclOperation, ResourceType

if TYPE_CHECKING:
    from broker.config.broker_config import BrokerConfig
    from broker.http_auth import HttpAccess

__all__ = ["HttpListener", "build_app"]

KEEP_ALIVE_TIMEOUT_S = 5.0


def _page() -> str:
    return resources.files("broker").joinpath("ui/status.html").read_text(encoding="utf-8")


def build_app(
    registry: CollectorRegistry,
    view: ClusterView,
    access: HttpAccess | None = None,
    history: StatusHistory | None = None,
) -> Starlette:
    """The routes; with `access` (basic authentication), each request needs a user's
    password (else 401), /metrics needs DESCRIBE on the cluster (else 403), and /api/cluster
    and /api/history show only the topics and groups the user may DESCRIBE."""
    page = _page()
    kept = history if history is not None else StatusHistory()

    async def caller(request: Request) -> tuple[Principal, str] | Response | None:
        """(principal, host); None on an open listener; a 401 to send back."""
        if access is None:
            return None
        host = request.client.host if request.client else ""
        principal = await access.authenticate(request.headers.get("authorization"), host)
        if principal is None:
            return Response(
                "authentication required\n",
                status_code=401,
                headers={"WWW-Authenticate": f'Basic realm="{REALM}", charset="UTF-8"'},
            )
        return principal, host

    async def metrics(request: Request) -> Response:
        who = await caller(request)
        if isinstance(who, Response):
            return who
        if who is not None and access is not None:
            principal, host = who
            # Figures of every topic and group: for those who may describe the cluster.
            if not access.may(
                principal, host, AclOperation.DESCRIBE, ResourceType.CLUSTER, CLUSTER_NAME
            ):
                return Response("DESCRIBE on the cluster required\n", status_code=403)
        # The groups this broker coordinates need their partitions' HWs from the leaders.
        await view.refresh_group_high_watermarks()
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def status_page(request: Request) -> Response:
        who = await caller(request)
        if isinstance(who, Response):
            return who
        return HTMLResponse(page, headers={"Cache-Control": "no-store"})

    def describable(who: tuple[Principal, str] | None) -> MayDescribe | None:
        """What the caller may DESCRIBE; None: everything (an open listener)."""
        if who is None or access is None:
            return None
        principal, host = who
        # Filtering, not refusing: no denial logged per hidden topic (Metadata's way).
        return lambda kind, name: access.may(
            principal, host, AclOperation.DESCRIBE, kind, name, log_denied=False
        )

    async def cluster(request: Request) -> Response:
        who = await caller(request)
        if isinstance(who, Response):
            return who
        snapshot = await view.snapshot()
        may_describe = describable(who)
        if may_describe is not None:
            snapshot = visible_snapshot(snapshot, may_describe)
        return JSONResponse(snapshot, headers={"Cache-Control": "no-store"})

    # The whole history as sent, by the samples taken: it changes once a sample, and
    # encoding 100 topics' hour takes tens of ms of the event loop.
    encoded: dict[int, bytes] = {}

    async def history_json(request: Request) -> Response:
        who = await caller(request)
        if isinstance(who, Response):
            return who
        headers = {"Cache-Control": "no-store"}
        may_describe = describable(who)
        if may_describe is not None:
            return JSONResponse(kept.to_json(may_describe), headers=headers)
        taken = kept.topics.taken
        if taken not in encoded:
            encoded.clear()
            encoded[taken] = bytes(JSONResponse(kept.to_json()).body)
        return Response(encoded[taken], media_type="application/json", headers=headers)

    return Starlette(
        routes=[
            Route("/", status_page, methods=["GET"]),
            Route("/metrics", metrics, methods=["GET"]),
            Route("/api/cluster", cluster, methods=["GET"]),
            Route("/api/history", history_json, methods=["GET"]),
        ]
    )


class HttpListener:
    """Serves `app` on (host, port) until cancelled; `port` is the bound one once started."""

    def __init__(
        self,
        app: Starlette,
        config: BrokerConfig,
        host: str,
        port: int,
        tls: ssl.SSLContext | None = None,
    ) -> None:
        """`tls`: serve https with this context (None: http)."""
        self.host = host
        self.port = port
        self._tls = tls
        self.max_connections = config.metrics_max_connections
        self.closed_by_limit = 0
        self._streams: set[trio.SocketStream] = set()
        hc = Config()
        hc.h11_max_incomplete_size = config.metrics_max_header_bytes
        hc.h2_max_header_list_size = config.metrics_max_header_bytes
        hc.h2_max_concurrent_streams = 8
        hc.read_timeout = max(1, config.metrics_read_timeout_ms // 1000)
        # A client that stalls its TLS handshake is dropped as one silent mid-request is.
        hc.ssl_handshake_timeout = hc.read_timeout
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
                scheme = "https" if self._tls is not None else "http"
                self._log.info("metrics listener on %s://%s:%d", scheme, self.host, self.port)
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
            if self._tls is None:
                await serve(ConnectionState({}), stream)
            else:
                # hypercorn's TCPServer does the handshake (bounded) and reads the ALPN choice.
                tls = trio.SSLStream(stream, self._tls, server_side=True, https_compatible=True)
                await serve(ConnectionState({}), tls)
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
