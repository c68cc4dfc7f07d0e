"""A follower's fetcher in the simulation: replica_fetcher._ReplicaFetcher's loop around the
same `broker.core.follower.Follower`, with one request in flight over the simulated network."""

from __future__ import annotations

from typing import TYPE_CHECKING

from broker.core.follower import Follower

if TYPE_CHECKING:
    from tests.simulation.broker_base import SimBrokerBase

__all__ = ["SimFetcher"]


class SimFetcher:
    def __init__(self, broker: SimBrokerBase, follower: Follower) -> None:
        self.broker = broker
        self.follower = follower
        self.stopped = False
        self._in_flight = False
        self._wake_at_ms: int | None = None

    @property
    def in_flight(self) -> bool:
        return self._in_flight

    def wake(self, delay_ms: int) -> None:
        at_ms = self.broker.now_ms + max(delay_ms, 0)
        if self._wake_at_ms is not None and self._wake_at_ms <= at_ms:
            return
        self._wake_at_ms = at_ms

        def run() -> None:
            if self._wake_at_ms == at_ms:
                self._wake_at_ms = None
            self._run_once()

        self.broker.after(delay_ms, f"fetcher->b{self.follower.leader.node_id} runs", run)

    def _run_once(self) -> None:
        if self.stopped or self._in_flight:
            return
        now_ms = self.broker.now_ms
        sent = self.follower.poll(now_ms)
        if sent is None:
            ready_ms = self.follower.next_ready_ms()
            if ready_ms is not None:
                self.wake(ready_ms - now_ms)
            return
        self._in_flight = True
        leader = self.follower.leader.node_id
        world = self.broker.world

        def answered(response: object) -> None:
            self._in_flight = False
            if not self.stopped:
                self.follower.on_response(  # type: ignore[arg-type]
                    sent, response, self.broker.now_ms, wall_ms=self.broker.wall_ms
                )
                self.wake(0)

        def failed() -> None:  # "fetcher connection failed": again after the backoff
            self._in_flight = False
            if not self.stopped:
                self.follower.request_failed()
                self.wake(world.config.replica_fetch_backoff_ms)

        world.net.request(
            self.broker.broker_id,
            leader,
            sent.request,
            timeout_ms=sent.timeout_ms,
            on_response=answered,
            on_timeout=failed,
            label=f"{type(sent.request).__name__} b{self.broker.broker_id}->b{leader}",
        )
