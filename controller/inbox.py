"""The controller loop's inbox (trio): ZooKeeper events, ticks and requests, in arrival order.

Requests (ControlledShutdown, ElectLeaders, AlterPartitionReassignments) come from request
handlers on other tasks: `ask` queues one and waits, bounded, for its reply; the loop answers
through `Asked.answer`. When the term ends, `close` answers whoever still waits.
"""

from __future__ import annotations

import contextlib
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

import trio

from controller.core import (
    ControlledShutdownRequested,
    ElectLeadersRequested,
    ReassignmentsRequested,
)
from controller.leading import Reply
from controller.zk_types import ZkEvent

__all__ = ["Asked", "ImbalanceTick", "Inbox", "InboxItem", "RequestEvent"]

RequestEvent = ControlledShutdownRequested | ElectLeadersRequested | ReassignmentsRequested


@dataclass(frozen=True, slots=True)
class Asked:
    """A request waiting for the controller loop."""

    event: RequestEvent
    reply: trio.MemorySendChannel[Reply | None]
    deadline: float  # trio time after which the asker has given up

    def answer(self, reply: Reply | None) -> None:
        with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
            self.reply.send_nowait(reply)
        self.reply.close()


@dataclass(frozen=True, slots=True)
class ImbalanceTick:
    """Time for a leader imbalance check (Kafka's AutoPreferredReplicaLeaderElection)."""


InboxItem = ZkEvent | Asked | ImbalanceTick


class Inbox:
    def __init__(self) -> None:
        self._send, self._receive = trio.open_memory_channel[InboxItem](math.inf)
        self.pending: deque[Asked] = deque()  # taken from the channel, not answered yet

    async def ask(self, event: RequestEvent, timeout_s: float) -> Reply | Closed | None:
        """Queue `event` and wait for its reply: None if the loop gave no answer in time,
        CLOSED if the term ended first (or had already ended)."""
        reply, answer = trio.open_memory_channel[Reply | None](1)
        with answer:
            try:
                self._send.send_nowait(Asked(event, reply, trio.current_time() + timeout_s))
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return CLOSED
            with trio.move_on_after(timeout_s):
                try:
                    return await answer.receive()
                except trio.EndOfChannel:
                    return CLOSED
        return None

    def put(self, item: InboxItem) -> bool:
        """False once closed."""
        try:
            self._send.send_nowait(item)
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return False
        return True

    def end(self) -> None:
        """No more items: once the queued ones are taken, `receive` raises EndOfChannel."""
        self._send.close()

    async def receive(self) -> InboxItem:
        return await self._receive.receive()

    def close(self, refuse: Callable[[RequestEvent], Reply | None]) -> None:
        """End of the term: every waiting request gets `refuse(event)` (NOT_CONTROLLER)."""
        self._send.close()
        while True:
            try:
                item = self._receive.receive_nowait()
            except (trio.WouldBlock, trio.EndOfChannel):
                break
            if isinstance(item, Asked):
                self.pending.append(item)
        self._receive.close()
        while self.pending:
            asked = self.pending.popleft()
            asked.answer(refuse(asked.event))


class Closed:
    """The inbox's term ended before the request was answered."""


CLOSED = Closed()
