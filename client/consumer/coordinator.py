"""A group's coordinator (Kafka's CoordinatorRequestManager): found with FindCoordinator at
any broker, retried while it is unknown, moving or loading (docs/groups.md), and reached over
a connection of its own, as Kafka's consumer does, so a heartbeat never waits behind a
long-polling Fetch on the broker's shared connection. Used by the consumer and the admin.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import trio

from client.errors import HighwaterClientError, HighwaterTimeoutError, error_for_code
from client.metadata import BrokerInfo, ClusterMetadata
from client.network import BrokerConnection, BrokerConnectionError, connect
from client.settings import REQUEST_TIMEOUT_MS, RETRY_BACKOFF_MAX_MS, RETRY_BACKOFF_MS
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse

__all__ = ["COORDINATOR_ERRORS", "Coordinator"]

COORDINATOR_ERRORS: Final = frozenset(
    {
        ErrorCode.NOT_COORDINATOR,
        ErrorCode.COORDINATOR_NOT_AVAILABLE,
        ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    }
)


class Coordinator:
    def __init__(
        self,
        metadata: ClusterMetadata,
        group_id: str,
        *,
        request_timeout_ms: int = REQUEST_TIMEOUT_MS,
        retry_backoff_ms: int = RETRY_BACKOFF_MS,
        retry_backoff_max_ms: int = RETRY_BACKOFF_MAX_MS,
    ) -> None:
        self.metadata = metadata
        self.group_id = group_id
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.retry_backoff_max_ms = max(retry_backoff_ms, retry_backoff_max_ms)
        self.node: BrokerInfo | None = None
        self._conn: BrokerConnection | None = None
        self._lock = trio.Lock()  # one lookup or connect at a time

    def invalidate(self) -> None:
        """Forget the coordinator (it moved, or its connection broke): look it up again."""
        self.node = None
        if self._conn is not None:
            self._conn.close_now()
            self._conn = None

    async def aclose(self) -> None:
        self.invalidate()
        await trio.lowlevel.checkpoint()

    async def find(self, timeout_ms: float) -> BrokerInfo:
        """The coordinator, asking FindCoordinator (any broker) until one is named, with
        backoff; HighwaterTimeoutError (COORDINATOR_NOT_AVAILABLE) after timeout_ms."""
        async with self._lock:
            if self.node is not None:
                return self.node
            deadline = trio.current_time() + timeout_ms / 1000
            failures = 0
            problem = "no answer"
            while True:
                try:
                    node = await self._find_once()
                except (BrokerConnectionError, HighwaterClientError) as exc:
                    if isinstance(exc, HighwaterClientError) and not exc.retriable:
                        raise
                    problem = str(exc)
                else:
                    self.node = node
                    return node
                failures += 1
                remaining = deadline - trio.current_time()
                if remaining <= 0:
                    raise HighwaterTimeoutError(
                        f"COORDINATOR_NOT_AVAILABLE: no coordinator for group {self.group_id!r} "
                        f"within {timeout_ms:.0f} ms ({problem})",
                        ErrorCode.COORDINATOR_NOT_AVAILABLE,
                    )
                await trio.sleep(min(remaining, self._backoff_s(failures)))

    async def _find_once(self) -> BrokerInfo:
        conn = await self.metadata.any_connection()
        try:
            response: FindCoordinatorResponse = await conn.request(
                FindCoordinatorRequest((self.group_id,)), timeout_ms=self.request_timeout_ms
            )
        except BrokerConnectionError:
            self.metadata.request_update()
            raise
        for found in response.coordinators:
            if found.key != self.group_id:
                continue
            if found.error_code != ErrorCode.NONE:
                raise error_for_code(
                    found.error_code,
                    f"find the coordinator of group {self.group_id!r}",
                    found.error_message,
                )
            return BrokerInfo(found.node_id, found.host, found.port)
        raise HighwaterClientError(
            f"COORDINATOR_NOT_AVAILABLE: FindCoordinator did not answer for {self.group_id!r}",
            ErrorCode.COORDINATOR_NOT_AVAILABLE,
        )

    async def request(self, body: object, find_timeout_ms: float) -> Any:
        """`body` to the coordinator, looking it up first if needed (within find_timeout_ms).
        A failed connection forgets the coordinator and raises BrokerConnectionError."""
        node = await self.find(find_timeout_ms)
        conn = await self._connection(node)
        try:
            return await conn.request(body, timeout_ms=self.request_timeout_ms)
        except BrokerConnectionError:
            if self._conn is conn:
                self.invalidate()
            raise

    async def call(
        self,
        make_request: Callable[[], object],
        coordinator_error: Callable[[Any], int],
        timeout_ms: float,
        what: str,
    ) -> Any:
        """Send `make_request()` until an answer whose `coordinator_error` is not one of
        NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, COORDINATOR_LOAD_IN_PROGRESS (the
        coordinator is looked up again after each, docs/groups.md) and the connection holds;
        HighwaterTimeoutError after timeout_ms."""
        deadline = trio.current_time() + timeout_ms / 1000
        failures = 0
        problem = "no answer"
        code: ErrorCode | None = None
        while True:
            remaining_ms = (deadline - trio.current_time()) * 1000
            try:
                response = await self.request(make_request(), max(remaining_ms, 1.0))
            except BrokerConnectionError as exc:
                problem = str(exc)
            else:
                error = coordinator_error(response)
                if error not in COORDINATOR_ERRORS:
                    return response
                code = ErrorCode(error)
                problem = code.name
                self.invalidate()
            failures += 1
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                raise HighwaterTimeoutError(
                    f"{(code or ErrorCode.REQUEST_TIMED_OUT).name}: {what}: the coordinator of "
                    f"group {self.group_id!r} did not answer within {timeout_ms:.0f} ms "
                    f"({problem})",
                    code or ErrorCode.REQUEST_TIMED_OUT,
                )
            await trio.sleep(min(remaining, self._backoff_s(failures)))

    async def _connection(self, node: BrokerInfo) -> BrokerConnection:
        async with self._lock:
            if self._conn is not None and not self._conn.broken:
                return self._conn
            try:
                self._conn = await connect(
                    node.host,
                    node.port,
                    client_id=self.metadata.client_id,
                    timeout_ms=self.metadata.connect_timeout_ms,
                    security=self.metadata.security,
                )
            except BrokerConnectionError:
                self.node = None
                raise
            return self._conn

    def _backoff_s(self, failures: int) -> float:
        wait_ms = min(
            self.retry_backoff_max_ms, self.retry_backoff_ms * (1 << min(failures - 1, 16))
        )
        return wait_ms / 1000
