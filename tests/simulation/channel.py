"""controller/channel.py in the simulation: one ordered queue per broker, one request in flight,
retried with backoff until answered (the controller's connections, faked)."""

from __future__ import annotations

import dataclasses
from collections import deque

from controller.core import LiveBroker
from controller.leading import BrokerRequest
from tests.simulation.process import SimProcess
from tests.simulation.world import World

__all__ = ["SimChannel"]


class SimChannel:
    def __init__(self, world: World, process: SimProcess, src: int, broker: LiveBroker) -> None:
        self.world, self.process, self.src, self.broker = world, process, src, broker
        self.stopped = False
        self._queue: deque[BrokerRequest] = deque()
        self._in_flight = False
        self._backoff_ms = world.config.controller_channel_backoff_ms[0]

    def send(self, request: BrokerRequest) -> None:
        self._queue.append(dataclasses.replace(request, broker_epoch=self.broker.epoch))
        self._pump()

    def _pump(self) -> None:
        if self.stopped or self._in_flight or not self._queue:
            return
        self._in_flight = True
        request, dst = self._queue[0], self.broker.broker_id
        self.world.net.request(
            self.src,
            dst,
            request,
            timeout_ms=self.world.config.request_timeout_ms,
            on_response=self._answered,
            on_timeout=self._failed,
            label=f"{type(request).__name__} b{self.src}->b{dst}",
        )

    def _answered(self, response: object) -> None:
        self._in_flight = False  # errors are only logged by the real channel
        if not self.stopped:
            self._queue.popleft()
            self._backoff_ms = self.world.config.controller_channel_backoff_ms[0]
            self._pump()

    def _failed(self) -> None:
        self._in_flight = False
        if not self.stopped:
            high = self.world.config.controller_channel_backoff_ms[1]
            delay_ms, self._backoff_ms = self._backoff_ms, min(self._backoff_ms * 2, high)
            self.process.after(delay_ms, "channel retry", self._pump)
