"""When a stopping broker asks the controller to move its leaderships, and for how long
(Kafka's KafkaServer.controlledShutdown, with a deadline Kafka does not have).

`controlled.shutdown.max.retries` attempts, `controlled.shutdown.retry.backoff.ms` apart, all
within `controlled.shutdown.timeout.ms`: each attempt gets an equal share of the time left
(at most `request.timeout.ms`), and the wait after a failure ends with that share. Nothing is
tried while the ZooKeeper session is disconnected: no controller could act on the request.
The trio shell is broker/controlled_shutdown.py.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Final

__all__ = [
    "CONNECT_TIMEOUT_MS",
    "Ask",
    "ShutdownAttempts",
    "Step",
    "Stop",
    "StopReason",
    "Wait",
]

# Connecting to the controller: on a LAN a connection is set up in milliseconds or refused; a
# hanging one (a stopped host's address, SYNs unanswered) would otherwise take the attempt's
# whole share. 3 s covers a lost SYN (Linux retransmits it after 1 s, then after 3 s more).
CONNECT_TIMEOUT_MS: Final = 3_000


class StopReason(enum.Enum):
    ACCEPTED = "accepted"
    ZOOKEEPER_DISCONNECTED = "ZooKeeper session not connected"
    RETRIES_EXHAUSTED = "no attempt left (controlled.shutdown.max.retries)"
    DEADLINE = "controlled.shutdown.timeout.ms elapsed"


@dataclass(frozen=True, slots=True)
class Ask:
    """Find the controller and ask it, within `timeout_ms` in all."""

    attempt: int  # 1, 2, ...
    timeout_ms: int
    connect_timeout_ms: int


@dataclass(frozen=True, slots=True)
class Wait:
    delay_ms: int


@dataclass(frozen=True, slots=True)
class Stop:
    reason: StopReason

    @property
    def accepted(self) -> bool:
        return self.reason is StopReason.ACCEPTED


Step = Ask | Wait | Stop


@dataclass(slots=True)
class ShutdownAttempts:
    """One controlled shutdown: call `next_step`, do it, report an attempt's outcome."""

    max_retries: int
    retry_backoff_ms: int
    request_timeout_ms: int
    deadline_ms: int
    attempts: int = 0
    accepted: bool = False
    _share_ends_ms: int = 0  # the end of the running attempt's share of the time
    _retry_at_ms: int = 0

    @classmethod
    def start(
        cls,
        now_ms: int,
        *,
        max_retries: int,
        retry_backoff_ms: int,
        request_timeout_ms: int,
        timeout_ms: int,
    ) -> ShutdownAttempts:
        return cls(max_retries, retry_backoff_ms, request_timeout_ms, now_ms + timeout_ms)

    def next_step(self, now_ms: int, *, zk_connected: bool) -> Step:
        if self.accepted:
            return Stop(StopReason.ACCEPTED)
        if not zk_connected:
            return Stop(StopReason.ZOOKEEPER_DISCONNECTED)
        attempts_left = self.max_retries - self.attempts
        if attempts_left <= 0:
            return Stop(StopReason.RETRIES_EXHAUSTED)
        if now_ms < self._retry_at_ms:
            return Wait(self._retry_at_ms - now_ms)
        remaining_ms = self.deadline_ms - now_ms
        if remaining_ms <= 0:
            return Stop(StopReason.DEADLINE)
        share_ms = -(-remaining_ms // attempts_left)  # rounded up: never 0
        self.attempts += 1
        self._share_ends_ms = now_ms + share_ms
        timeout_ms = min(self.request_timeout_ms, share_ms)
        return Ask(self.attempts, timeout_ms, min(CONNECT_TIMEOUT_MS, timeout_ms))

    def attempt_failed(self, now_ms: int) -> None:
        """The attempt failed (no controller, unreachable, an error, no answer in time)."""
        self._retry_at_ms = min(now_ms + self.retry_backoff_ms, self._share_ends_ms)

    def attempt_accepted(self) -> None:
        self.accepted = True
