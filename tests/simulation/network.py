"""The simulated network: requests and responses between nodes, with delay, drop and cuts.

Each (source, destination) link is FIFO, like the TCP connection it stands for; delays are
drawn per message. A dropped message is a broken connection: the request is never answered
and its sender times out, so a request can also be handled while its response is lost (and
then retried: a duplicate). A node cut off from its peers exchanges nothing with other
brokers; the client node is never cut. A message only reaches the incarnation of a node it
was sent to (or from): a restarted process never sees its predecessor's connections.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass

from tests.simulation.scheduler import Scheduler

__all__ = ["CLIENT_NODE", "Envelope", "Network"]

CLIENT_NODE = -100  # the producer's node id


@dataclass(frozen=True, slots=True)
class Envelope:
    src: int
    src_incarnation: int
    dst: int
    dst_incarnation: int
    request_id: int
    payload: object
    is_response: bool = False


ResponseHandler = Callable[[object], None]


class Network:
    def __init__(
        self,
        scheduler: Scheduler,
        rng: random.Random,
        *,
        delay_ms: tuple[int, int],
        drop_probability: float,
        incarnation_of: Callable[[int], int | None],
        deliver_request: Callable[[Envelope], None],
    ) -> None:
        self._scheduler = scheduler
        self._rng = rng
        self._delay_ms = delay_ms
        self.drop_probability = drop_probability
        self._incarnation_of = incarnation_of  # None: the node is down
        self._deliver_request = deliver_request
        self._link_free_at: dict[tuple[int, int], int] = {}
        self._pending: dict[int, tuple[int, int, ResponseHandler]] = {}
        self._next_request_id = 0
        self.cut: set[int] = set()  # brokers cut off from their peers
        self.sent = 0
        self.dropped = 0

    def can_reach(self, src: int, dst: int) -> bool:
        if src == dst or CLIENT_NODE in (src, dst):
            return True
        return src not in self.cut and dst not in self.cut

    # -- requests and responses ------------------------------------------------------------

    def request(
        self,
        src: int,
        dst: int,
        payload: object,
        *,
        timeout_ms: int,
        on_response: ResponseHandler,
        on_timeout: Callable[[], None],
        label: str,
    ) -> int:
        """Send `payload` from `src` to `dst`; exactly one of the callbacks runs later, and
        only while `src` is still the same incarnation."""
        src_incarnation = self._incarnation_of(src)
        assert src_incarnation is not None, f"node {src} is down and cannot send"
        self._next_request_id += 1
        request_id = self._next_request_id
        self._pending[request_id] = (src, src_incarnation, on_response)

        def expire() -> None:
            pending = self._pending.pop(request_id, None)
            if pending is not None and self._incarnation_of(src) == src_incarnation:
                on_timeout()

        self._scheduler.after(timeout_ms, f"timeout {label} #{request_id}", expire)
        dst_incarnation = self._incarnation_of(dst)
        if dst_incarnation is not None:
            self._send(
                Envelope(src, src_incarnation, dst, dst_incarnation, request_id, payload), label
            )
        return request_id

    def respond(self, request: Envelope, payload: object) -> None:
        reply = Envelope(
            request.dst,
            request.dst_incarnation,
            request.src,
            request.src_incarnation,
            request.request_id,
            payload,
            is_response=True,
        )
        self._send(reply, f"{type(payload).__name__} {request.dst}->{request.src}")

    # -- transport -------------------------------------------------------------------------

    def _send(self, envelope: Envelope, label: str) -> None:
        self.sent += 1
        if not self.can_reach(envelope.src, envelope.dst) or (
            envelope.src != envelope.dst and self._rng.random() < self.drop_probability
        ):
            self.dropped += 1
            return
        link = (envelope.src, envelope.dst)
        now = self._scheduler.now_ms
        at = max(now + self._rng.randint(*self._delay_ms), self._link_free_at.get(link, now))
        self._link_free_at[link] = at
        self._scheduler.at(at, f"deliver {label}", lambda: self._arrive(envelope))

    def _arrive(self, envelope: Envelope) -> None:
        if not self.can_reach(envelope.src, envelope.dst):
            self.dropped += 1  # cut while in flight
            return
        if self._incarnation_of(envelope.dst) != envelope.dst_incarnation:
            return  # the process it was meant for is gone
        if not envelope.is_response:
            self._deliver_request(envelope)
            return
        pending = self._pending.pop(envelope.request_id, None)
        if pending is not None:
            _, _, on_response = pending
            on_response(envelope.payload)
