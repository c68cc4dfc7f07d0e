"""Controller -> broker requests (Kafka's ControllerChannelManager), over client.network.

One queue and one sender task per live broker: requests to a broker go out in the order the
controller decided them, one at a time, and a slow or dead broker never holds up the others
or the controller's event loop. A failed send is retried with backoff for as long as the
broker stays live; when it leaves (or re-registers with a new broker epoch) its sender and
queue are dropped: the controller sends a rejoined broker everything it needs anyway.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from dataclasses import dataclass

import structlog
import trio

from client.network import BrokerConnection, BrokerConnectionError, connect
from client.security import ClientSecurity
from controller.core import LiveBroker
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest

__all__ = ["ControllerChannel", "ControllerRequest"]

ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


@dataclass
class _Sender:
    broker: LiveBroker
    queue: trio.MemorySendChannel[ControllerRequest]
    cancel_scope: trio.CancelScope


class ControllerChannel:
    def __init__(
        self,
        nursery: trio.Nursery,
        *,
        controller_id: int,
        request_timeout_ms: int,
        connect_timeout_ms: int = 5_000,
        backoff_ms: tuple[int, int] = (50, 2_000),
        security: ClientSecurity | None = None,
        listener_name: str | None = None,
    ) -> None:
        """`listener_name`: the brokers' listener to reach (control.plane.listener.name; None:
        the inter-broker one, each broker's registered host and port); `security`: how (None:
        PLAINTEXT)."""
        self._nursery = nursery
        self._security = security
        self._listener_name = listener_name
        self._client_id = f"controller-{controller_id}"
        self._request_timeout_ms = request_timeout_ms
        self._connect_timeout_ms = connect_timeout_ms
        self._backoff_ms = backoff_ms
        self._senders: dict[int, _Sender] = {}
        self._log = structlog.get_logger(__name__).bind(controller_id=controller_id)

    def update_brokers(self, brokers: Mapping[int, LiveBroker]) -> None:
        """Follow the live broker set: start senders for new brokers, stop those gone."""
        for broker_id in list(self._senders):
            if brokers.get(broker_id) != self._senders[broker_id].broker:
                self._stop(broker_id)
        for broker_id, broker in brokers.items():
            if broker_id not in self._senders:
                self._start(broker)

    def send(self, broker_id: int, request: ControllerRequest) -> None:
        """Queue `request` for `broker_id` (stamped with its broker epoch); dropped if the
        broker is not live."""
        sender = self._senders.get(broker_id)
        if sender is None:
            self._log.debug("request dropped: broker not live", broker_id=broker_id)
            return
        sender.queue.send_nowait(dataclasses.replace(request, broker_epoch=sender.broker.epoch))

    def close(self) -> None:
        for broker_id in list(self._senders):
            self._stop(broker_id)

    def _address(self, broker: LiveBroker) -> tuple[str, int]:
        """The broker's control-plane listener if one is named and registered, else its
        inter-broker listener (a broker that has none refuses the requests, and says so)."""
        for endpoint in broker.endpoints:
            if endpoint.listener == self._listener_name:
                return endpoint.host, endpoint.port
        return broker.host, broker.port

    def _start(self, broker: LiveBroker) -> None:
        send, receive = trio.open_memory_channel[ControllerRequest](math.inf)
        scope = trio.CancelScope()
        self._senders[broker.broker_id] = _Sender(broker, send, scope)
        self._nursery.start_soon(self._run_sender, broker, receive, scope)

    def _stop(self, broker_id: int) -> None:
        sender = self._senders.pop(broker_id)
        sender.queue.close()
        sender.cancel_scope.cancel()

    async def _run_sender(
        self,
        broker: LiveBroker,
        queue: trio.MemoryReceiveChannel[ControllerRequest],
        scope: trio.CancelScope,
    ) -> None:
        log = self._log.bind(broker_id=broker.broker_id)
        connection: BrokerConnection | None = None
        with scope, queue:
            try:
                async for request in queue:
                    connection = await self._deliver(broker, request, connection, log)
            finally:
                if connection is not None:
                    with trio.CancelScope(shield=True), trio.move_on_after(1):
                        await connection.aclose()

    async def _deliver(
        self,
        broker: LiveBroker,
        request: ControllerRequest,
        connection: BrokerConnection | None,
        log: structlog.typing.FilteringBoundLogger,
    ) -> BrokerConnection | None:
        """Send until answered (retrying while the broker is live); returns the connection."""
        backoff_ms = self._backoff_ms[0]
        while True:
            try:
                if connection is None or connection.broken:
                    host, port = self._address(broker)
                    connection = await connect(
                        host,
                        port,
                        client_id=self._client_id,
                        timeout_ms=self._connect_timeout_ms,
                        security=self._security,
                    )
                response = await connection.request(request, timeout_ms=self._request_timeout_ms)
            except BrokerConnectionError as exc:
                log.info(
                    "controller request failed, retrying",
                    request=type(request).__name__,
                    error=str(exc),
                    backoff_ms=backoff_ms,
                )
                if connection is not None:
                    await connection.aclose()
                    connection = None
                await trio.sleep(backoff_ms / 1000)
                backoff_ms = min(backoff_ms * 2, self._backoff_ms[1])
                continue
            error_code = getattr(response, "error_code", 0)
            if error_code != 0:
                log.warning(
                    "controller request rejected",
                    request=type(request).__name__,
                    error_code=error_code,
                )
            return connection
