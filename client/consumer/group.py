"""The group member's trio shell (Kafka's HeartbeatRequestManager): a background task that
sends the heartbeats membership.py decides, at the coordinator's interval or at once when the
member has something to say, looks the coordinator up again when it moved, and leaves the
group when poll() was not called for max_poll_interval_ms. Reconciliation itself runs in
poll() (consumer.py), where the rebalance listener is awaited.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import trio

from client.clock import now_ms
from client.consumer.coordinator import Coordinator
from client.consumer.membership import Membership, MemberState, Outcome
from client.errors import HighwaterClientError
from client.log import client_logger
from client.network import BrokerConnectionError
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatResponse

__all__ = ["GroupMember", "RebalanceListener"]


class RebalanceListener:
    """Kafka's ConsumerRebalanceListener with async methods, awaited inside poll() (close(),
    unsubscribe()): no record of a revoked partition is returned after its revoke call.
    Override what you need; by default a lost partition is handled as a revoked one (Kafka's
    default). Revoked partitions' positions are committed first when auto-commit is on."""

    async def on_partitions_revoked(self, partitions: set[Any]) -> None:
        """These partitions go to other members: commit what you processed of them."""

    async def on_partitions_assigned(self, partitions: set[Any]) -> None:
        """These are now this member's; a seek() here overrides the committed offset."""

    async def on_partitions_lost(self, partitions: set[Any]) -> None:
        """These may already be another member's (this one was fenced): do not commit."""
        await self.on_partitions_revoked(partitions)


class GroupMember:
    def __init__(
        self,
        membership: Membership,
        coordinator: Coordinator,
        *,
        max_poll_interval_ms: int,
        on_change: Callable[[Outcome], None],
    ) -> None:
        self.membership = membership
        self.coordinator = coordinator
        self.max_poll_interval_ms = max_poll_interval_ms
        self._on_change = on_change
        self._wake = trio.Event()
        self._answered = trio.Event()
        self._last_poll_ms = 0.0  # set when run() starts (no clock outside trio)
        self._log = client_logger("consumer", group=membership.group_id)

    def polled(self) -> None:
        """poll() was called: the max_poll_interval_ms timer starts again."""
        self._last_poll_ms = now_ms()

    def wake(self) -> None:
        """Something to send now (a reconciliation done, a subscription, a leave)."""
        self._wake.set()

    async def wait_answered(self) -> None:
        """Until the next heartbeat's answer (or failure) has been handled."""
        await self._answered.wait()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        self._last_poll_ms = now_ms()
        task_status.started()
        m = self.membership
        while True:
            now = now_ms()
            poll_deadline = self._last_poll_ms + self.max_poll_interval_ms
            if m.in_group and m.member_id and now >= poll_deadline:
                self._log.warning(
                    "leaving the group: poll() was not called for max_poll_interval_ms",
                    max_poll_interval_ms=self.max_poll_interval_ms,
                )
                m.leave(now, poll_expired=True)
                self._on_change(Outcome(stop_fetching=m.owned))
            if m.session_lost(now):
                self._log.warning(
                    "partitions lost: no answer from the coordinator for the session timeout",
                    session_timeout_ms=m.session_timeout_ms,
                )
                self._on_change(Outcome(stop_fetching=m.owned, wake_poll=True))
            if m.heartbeat_due(now):
                await self._heartbeat(now)
                continue
            wake_at = min(m.next_heartbeat_ms(), poll_deadline if m.in_group else math.inf)
            with trio.move_on_at(wake_at / 1000):
                await self._wake.wait()
            self._wake = trio.Event()

    async def _heartbeat(self, at_ms: float) -> None:
        m = self.membership
        request = m.build_heartbeat(at_ms)
        try:
            # A short lookup: while there is no coordinator the member's own backoff retries,
            # and this task stays free to notice a close or an expired poll interval.
            response = await self.coordinator.request(
                request, find_timeout_ms=self.coordinator.retry_backoff_max_ms
            )
        except (BrokerConnectionError, HighwaterClientError) as exc:
            if isinstance(exc, HighwaterClientError) and not exc.retriable:
                outcome = m.on_response(_failed(exc), now_ms())
            else:
                outcome = m.on_failure(now_ms())
        else:
            before = m.state
            outcome = m.on_response(response, now_ms())
            self._log_transition(before, response.error_code)
        if outcome.find_coordinator:
            self.coordinator.invalidate()
        self._on_change(outcome)
        self._answered.set()
        self._answered = trio.Event()

    def _log_transition(self, before: MemberState, code: int) -> None:
        m = self.membership
        if m.state is before:
            return
        if m.state is MemberState.FENCED:
            self._log.warning(
                "fenced by the coordinator: partitions lost, rejoining", error_code=code
            )
        elif m.state is MemberState.FATAL and m.fatal_error is not None:
            self._log.error("the group refused this member", error_code=m.fatal_error[0])


def _failed(exc: HighwaterClientError) -> ConsumerGroupHeartbeatResponse:
    """A non-retriable lookup failure (e.g. INVALID_GROUP_ID) as a heartbeat answer."""
    code = int(exc.code) if exc.code is not None else -1
    return ConsumerGroupHeartbeatResponse(code, str(exc))
