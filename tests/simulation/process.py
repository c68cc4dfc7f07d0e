"""A simulated process's clock: timers that die with the process (the scheduler's view of one
incarnation), as trio's `sleep` in a cancelled nursery."""

from __future__ import annotations

from collections.abc import Callable

from tests.simulation.scheduler import Scheduler

__all__ = ["SimProcess"]


class SimProcess:
    def __init__(self, scheduler: Scheduler, name: str) -> None:
        self.scheduler = scheduler
        self.name = name
        self.alive = False
        self.incarnation = 0  # a new one at every start and every death

    @property
    def now_ms(self) -> int:
        return self.scheduler.now_ms

    def after(self, delay_ms: int, label: str, action: Callable[[], None]) -> None:
        """Run `action` later, unless this process has died by then."""
        incarnation = self.incarnation

        def guarded() -> None:
            if self.alive and self.incarnation == incarnation:
                action()

        self.scheduler.after(delay_ms, f"{self.name} {label}", guarded)

    def every(self, interval_ms: int, label: str, action: Callable[[], None]) -> None:
        def tick() -> None:
            action()
            self.after(interval_ms, label, tick)

        self.after(interval_ms, label, tick)
