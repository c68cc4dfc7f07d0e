"""Deadlines of many waits: one timer heap and one reaper task, as Kafka's SystemTimer and
ExpiredOperationReaper, rather than a trio cancel scope with a deadline around each wait.

Entering and leaving such a scope cost 9-13 µs of CPU on the development machine, in a hot
loop; a heap entry costs about 1 µs (docs/performance.md, "Deadlines without cancel scopes").
The broker's purgatory keeps its parked requests' deadlines here, and every client connection
its requests' timeouts (`request_deadlines`, one `Deadlines` per trio run).
"""

from __future__ import annotations

import heapq
import itertools
import math

import trio

from client.log import client_logger

__all__ = ["Deadlines", "Timeout", "request_deadlines"]

# The heap keeps the entries of waits that ended early until they reach its top; it is
# rebuilt from the live ones when it holds more than twice as many plus this.
_SLACK = 1024


class Timeout:
    """One wait's deadline. `expire` runs at the deadline unless the wait ended first; it
    runs in the reaper's task, so it must not wait. If it raises, the reaper logs the error
    and goes on: an exception in a system task would end the whole trio run."""

    __slots__ = ("ended",)

    def __init__(self) -> None:
        self.ended = False

    def expire(self) -> None:
        raise NotImplementedError


class Deadlines:
    def __init__(self, name: str) -> None:
        self._name = name
        self._heap: list[tuple[float, int, Timeout]] = []  # (deadline, tie-breaker, timeout)
        self._order = itertools.count()
        self._live = 0
        self._reaper: trio.CancelScope | None = None  # the reaper's sleep, while it runs

    @property
    def entries(self) -> int:
        """Entries in the heap, of waits still under way and of some that ended."""
        return len(self._heap)

    def add(self, deadline: float, timeout: Timeout) -> None:
        """Expire `timeout` at `deadline` (trio time) unless `end` comes first."""
        heapq.heappush(self._heap, (deadline, next(self._order), timeout))
        self._live += 1
        reaper = self._reaper
        if reaper is None:
            reaper = self._reaper = trio.CancelScope(deadline=deadline)
            trio.lowlevel.spawn_system_task(self._reap, reaper, name=self._name)
        elif deadline < reaper.deadline:
            reaper.deadline = deadline

    def end(self, timeout: Timeout) -> None:
        """The wait ended (or expired: then this does nothing)."""
        if timeout.ended:
            return
        timeout.ended = True
        self._live -= 1
        heap = self._heap
        while heap and heap[0][2].ended:
            heapq.heappop(heap)
        if len(heap) > 2 * self._live + _SLACK:
            heap[:] = [entry for entry in heap if not entry[2].ended]
            heapq.heapify(heap)

    async def _reap(self, scope: trio.CancelScope) -> None:
        """Expire each timeout whose deadline has passed. A system task: it ends with the trio
        run, and a later run starts its own."""
        heap = self._heap
        try:
            while True:
                with scope:
                    await trio.sleep_forever()
                now = trio.current_time()
                while heap and heap[0][0] <= now:
                    timeout = heapq.heappop(heap)[2]
                    if not timeout.ended:
                        timeout.ended = True
                        self._live -= 1
                        try:
                            timeout.expire()
                        except Exception:
                            client_logger("deadlines", deadlines=self._name).exception(
                                "expiring a deadline failed"
                            )
                scope = trio.CancelScope(deadline=heap[0][0] if heap else math.inf)
                self._reaper = scope
        finally:
            self._reaper = None


_REQUEST_DEADLINES: trio.lowlevel.RunVar[Deadlines] = trio.lowlevel.RunVar("request_deadlines")


def request_deadlines() -> Deadlines:
    """This trio run's deadlines for client requests."""
    try:
        return _REQUEST_DEADLINES.get()
    except LookupError:
        deadlines = Deadlines("request timeouts")
        _REQUEST_DEADLINES.set(deadlines)
        return deadlines
