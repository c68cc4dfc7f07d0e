"""The simulated clock and its event queue: the only source of time in a simulation.

Everything that happens later (a message arriving, a timer firing, a fault) is an event.
Events run one at a time in (time, insertion) order, so a run is a deterministic function of
its seed. Running one event is one step.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable
from dataclasses import dataclass, field

__all__ = ["Event", "Scheduler"]


@dataclass(order=True, slots=True)
class Event:
    at_ms: int
    seq: int
    label: str = field(compare=False)
    action: Callable[[], None] = field(compare=False)


class Scheduler:
    def __init__(self, start_ms: int) -> None:
        self.now_ms = start_ms
        self._queue: list[Event] = []
        self._seq = 0

    def at(self, at_ms: int, label: str, action: Callable[[], None]) -> None:
        """Run `action` at `at_ms` (never in the past)."""
        self._seq += 1
        heapq.heappush(self._queue, Event(max(at_ms, self.now_ms), self._seq, label, action))

    def after(self, delay_ms: int, label: str, action: Callable[[], None]) -> None:
        self.at(self.now_ms + max(delay_ms, 0), label, action)

    def pop(self) -> Event | None:
        """The next event, with the clock moved to its time; None when nothing is left."""
        if not self._queue:
            return None
        event = heapq.heappop(self._queue)
        self.now_ms = event.at_ms
        return event

    def __len__(self) -> int:
        return len(self._queue)
