"""The purgatory: requests that wait for something to happen to some partitions.

Kafka parks a delayed fetch (or an acks=all produce) under "watch keys", its partitions, and
completes it when one of them changes or its deadline passes. Here a waiter is a task that
calls `wait(keys, deadline, kind)`; whoever changes a partition calls `notify(key)`. The waiter
then re-checks its condition itself, so a spurious wake-up is harmless. `complete` is that
loop once for every delayed operation (broker.core.delayed): park it, `try_complete` it at
each wake-up, `expire` it at the deadline, and apply each try's `Actions`. The time a request
spends here is its "remote" time (Kafka's RemoteTimeMs): added to the `RequestClock` that the
server binds to the connection's task, if any.

Deadlines are one timer heap and one reaper task for the whole purgatory
(client.deadlines), as Kafka's DelayedOperationPurgatory has its SystemTimer and
ExpiredOperationReaper, rather than a trio cancel scope per wait: entering and leaving a scope
with a deadline was about a tenth of a busy leader's CPU (docs/performance.md, "The
purgatory's deadlines").
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Hashable, Iterable
from contextvars import ContextVar
from typing import TypeVar

import trio

from broker.core.actions import Actions
from broker.core.delayed import DelayedOperation
from broker.core.state import BrokerState
from client.deadlines import Deadlines, Timeout

__all__ = ["PURGATORY_KINDS", "Purgatory", "RequestClock", "current_request_clock"]

R = TypeVar("R")

# What waits, as Kafka names its purgatories: acks=all produces, long-polling fetches,
# CreateTopics/DeleteTopics/CreatePartitions waiting for the metadata ("topic"), and a group
# coordinator's loaded offsets partition waiting for its HW ("load": DelayedLoad).
PURGATORY_KINDS = ("produce", "fetch", "topic", "load")


class RequestClock:
    """The request being served on this task: seconds it has waited in the purgatory."""

    __slots__ = ("remote_s",)

    def __init__(self) -> None:
        self.remote_s = 0.0


# Set once per connection task by the server (each trio task has its own context).
current_request_clock: ContextVar[RequestClock | None] = ContextVar(
    "current_request_clock", default=None
)


class _Waiter(Timeout):
    """One parked task; `task` is None once it was woken, timed out or cancelled."""

    __slots__ = ("notified", "task")

    def __init__(self, task: trio.lowlevel.Task) -> None:
        super().__init__()
        self.task: trio.lowlevel.Task | None = task
        self.notified = False

    def expire(self) -> None:
        self.wake(False)

    def wake(self, notified: bool) -> None:
        task = self.task
        if task is not None:
            self.task = None
            self.notified = notified
            trio.lowlevel.reschedule(task)

    def abort(self, _: object) -> trio.lowlevel.Abort:
        self.task = None  # cancelled from outside: nobody may reschedule it now
        return trio.lowlevel.Abort.SUCCEEDED


class Purgatory:
    def __init__(self) -> None:
        self._watchers: dict[Hashable, set[_Waiter]] = {}
        self._closed = False
        self.waiting = dict.fromkeys(PURGATORY_KINDS, 0)  # requests parked now, by kind
        self._deadlines = Deadlines("purgatory reaper")

    @property
    def watched_keys(self) -> int:
        return len(self._watchers)

    @property
    def timer_entries(self) -> int:
        """Entries in the timer heap, of waits still parked and of some that ended."""
        return self._deadlines.entries

    async def wait(self, keys: Iterable[Hashable], deadline: float, kind: str = "topic") -> bool:
        """Park until one of `keys` is notified (True) or `deadline` (trio time) passes (False).

        After `close()` it returns False at once: the caller answers with what it has.
        """
        if self._closed or deadline <= trio.current_time():
            await trio.lowlevel.checkpoint()
            return False
        waiter = _Waiter(trio.lowlevel.current_task())
        keys = list(keys)
        by_key = self._watchers
        for key in keys:  # an idle follower's fetch watches every partition of its session
            watching = by_key.get(key)
            if watching is None:
                by_key[key] = watching = set()
            watching.add(waiter)
        timed = deadline < math.inf
        if timed:
            self._deadlines.add(deadline, waiter)
        self.waiting[kind] += 1
        started = time.perf_counter()
        try:
            await trio.lowlevel.wait_task_rescheduled(waiter.abort)
            return waiter.notified and not self._closed
        finally:
            self.waiting[kind] -= 1
            clock = current_request_clock.get()
            if clock is not None:
                clock.remote_s += time.perf_counter() - started
            for key in keys:
                watchers = self._watchers.get(key)
                if watchers is not None:
                    watchers.discard(waiter)
                    if not watchers:
                        del self._watchers[key]
            if timed:
                self._deadlines.end(waiter)

    async def complete(
        self,
        operation: DelayedOperation[R],
        state: BrokerState,
        now_ms: Callable[[], int],
        deadline: float,
        kind: str,
        apply: Callable[[Actions], None],
    ) -> R:
        """Try `operation` now and at each wake-up of its keys until it completes; once
        `deadline` (trio time) passed, or at shutdown, one last try and then it expires.
        That last try is told whether a key was woken since the previous one
        (SimPurgatory.complete alike). Each try's actions are applied as they come.

        An accepted difference from the simulator, whose last try runs at the deadline: a
        notify that comes after the reaper expired the waiter but before its task runs is
        not counted as woken. The answer then reflects the state at the deadline; the
        client's next poll sees the change."""
        gave_up = False  # the deadline passed, or the broker is shutting down
        woken = True
        while True:
            done = operation.try_complete(state, now_ms(), woken)
            apply(operation.take_actions())
            if done:
                break
            if gave_up or trio.current_time() >= deadline:
                operation.expire(now_ms())
                break
            gave_up = not await self.wait(operation.watch_keys, deadline, kind)
            woken = not gave_up or self._closed  # at shutdown: as if woken, to be safe
        return operation.response()

    def close(self) -> None:
        """Shutting down: wake every waiter now and make later waits return at once."""
        self._closed = True
        for key in list(self._watchers):
            self.notify(key)

    def notify(self, key: Hashable) -> None:
        for waiter in self._watchers.pop(key, ()):
            waiter.wake(True)
