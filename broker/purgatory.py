"""The purgatory: requests that wait for something to happen to some partitions.

Kafka parks a delayed fetch (or an acks=all produce) under "watch keys", its partitions, and
completes it when one of them changes or its deadline passes. Here a waiter is a task that
calls `wait(keys, deadline, kind)`; whoever changes a partition calls `notify(key)`. The waiter
then re-checks its condition itself, so a spurious wake-up is harmless. The time a request
spends here is its "remote" time (Kafka's RemoteTimeMs): added to the `RequestClock` that the
server binds to the connection's task, if any.

Deadlines are one timer heap and one reaper task for the whole purgatory, as Kafka's
DelayedOperationPurgatory has its SystemTimer and ExpiredOperationReaper, rather than a trio
cancel scope per wait: entering and leaving a scope with a deadline was about a tenth of a
busy leader's CPU (docs/performance.md, "The purgatory's deadlines").
"""

from __future__ import annotations

import heapq
import itertools
import math
import time
from collections.abc import Hashable, Iterable
from contextvars import ContextVar

import trio

__all__ = ["PURGATORY_KINDS", "Purgatory", "RequestClock", "current_request_clock"]

# What waits, as Kafka names its purgatories: acks=all produces, long-polling fetches, and
# CreateTopics/DeleteTopics/CreatePartitions waiting for the metadata ("topic").
PURGATORY_KINDS = ("produce", "fetch", "topic")

# The timer heap keeps the entries of waits that ended early until they reach its top; it is
# rebuilt from the live ones when it holds more than twice as many plus this.
_TIMER_SLACK = 1024


class RequestClock:
    """The request being served on this task: seconds it has waited in the purgatory."""

    __slots__ = ("remote_s",)

    def __init__(self) -> None:
        self.remote_s = 0.0


# Set once per connection task by the server (each trio task has its own context).
current_request_clock: ContextVar[RequestClock | None] = ContextVar(
    "current_request_clock", default=None
)


class _Waiter:
    """One parked task; `task` is None once it was woken, timed out or cancelled."""

    __slots__ = ("notified", "task")

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task: trio.lowlevel.Task | None = task
        self.notified = False

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
        self._timers: list[tuple[float, int, _Waiter]] = []  # (deadline, tie-breaker, waiter)
        self._order = itertools.count()
        self._reaper: trio.CancelScope | None = None  # the reaper's sleep, while it runs

    @property
    def watched_keys(self) -> int:
        return len(self._watchers)

    @property
    def timer_entries(self) -> int:
        """Entries in the timer heap, of waits still parked and of some that ended."""
        return len(self._timers)

    async def wait(self, keys: Iterable[Hashable], deadline: float, kind: str = "topic") -> bool:
        """Park until one of `keys` is notified (True) or `deadline` (trio time) passes (False).

        After `close()` it returns False at once: the caller answers with what it has.
        """
        if self._closed or deadline <= trio.current_time():
            await trio.lowlevel.checkpoint()
            return False
        waiter = _Waiter(trio.lowlevel.current_task())
        keys = list(keys)
        for key in keys:
            self._watchers.setdefault(key, set()).add(waiter)
        if deadline < math.inf:
            self._add_timer(deadline, waiter)
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
            self._drop_ended_timers()

    def close(self) -> None:
        """Shutting down: wake every waiter now and make later waits return at once."""
        self._closed = True
        for key in list(self._watchers):
            self.notify(key)

    def notify(self, key: Hashable) -> None:
        for waiter in self._watchers.pop(key, ()):
            waiter.wake(True)

    # ----- deadlines ------------------------------------------------------------------------

    def _add_timer(self, deadline: float, waiter: _Waiter) -> None:
        heapq.heappush(self._timers, (deadline, next(self._order), waiter))
        reaper = self._reaper
        if reaper is None:
            reaper = self._reaper = trio.CancelScope(deadline=deadline)
            trio.lowlevel.spawn_system_task(self._reap, reaper, name="purgatory reaper")
        elif deadline < reaper.deadline:
            reaper.deadline = deadline

    def _drop_ended_timers(self) -> None:
        """Forget the entries of waits that ended early: those at the top, and all of them when
        they outnumber the live ones (a bound on the heap, whatever the clients' timeouts)."""
        timers = self._timers
        while timers and timers[0][2].task is None:
            heapq.heappop(timers)
        size = len(timers)
        if size > _TIMER_SLACK and size > 2 * sum(self.waiting.values()) + _TIMER_SLACK:
            timers[:] = [entry for entry in timers if entry[2].task is not None]
            heapq.heapify(timers)

    async def _reap(self, scope: trio.CancelScope) -> None:
        """Wake each waiter whose deadline has passed (Kafka's ExpiredOperationReaper). A system
        task: it ends with the trio run, and a later run starts its own."""
        timers = self._timers
        try:
            while True:
                with scope:
                    await trio.sleep_forever()
                now = trio.current_time()
                while timers and timers[0][0] <= now:
                    heapq.heappop(timers)[2].wake(False)
                scope = trio.CancelScope(deadline=timers[0][0] if timers else math.inf)
                self._reaper = scope
        finally:
            self._reaper = None
