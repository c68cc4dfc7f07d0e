"""broker/purgatory.py in simulated time: requests parked under keys until one is woken
(each re-checks as a later step, as its trio task would) or their deadline passes."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass

from tests.simulation.process import SimProcess

__all__ = ["SimPurgatory"]


@dataclass(eq=False, slots=True)
class _Parked:
    keys: frozenset[Hashable]
    check: Callable[[bool], bool]  # check(expired): answer if it can; True once answered
    done: bool = False
    wake_pending: bool = False


class SimPurgatory:
    def __init__(self, process: SimProcess) -> None:
        self._process = process
        self._parked: list[_Parked] = []

    def answer_or_park(
        self, keys: Iterable[Hashable], wait_ms: int, check: Callable[[bool], bool]
    ) -> None:
        """Answer now if `check` can (or may wait no longer), else park."""
        if check(wait_ms <= 0):
            return
        parked = _Parked(frozenset(keys), check)
        self._parked.append(parked)
        self._process.after(wait_ms, "deadline", functools.partial(self._settle, parked, True))

    def wake(self, keys: Iterable[Hashable]) -> None:
        woken = set(keys)
        for parked in self._parked:
            if not parked.done and not parked.wake_pending and parked.keys & woken:
                parked.wake_pending = True
                self._process.after(0, "wakes", functools.partial(self._settle, parked, False))

    def _settle(self, parked: _Parked, expired: bool) -> None:
        parked.wake_pending = False
        if not parked.done and parked.check(expired):
            parked.done = True
            self._parked.remove(parked)
