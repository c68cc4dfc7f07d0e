"""broker/purgatory.py in simulated time: requests parked under keys until one is woken
(each re-checks as a later step, as its trio task would) or their deadline passes. `complete`
is Purgatory.complete: a delayed operation (broker.core.delayed) tried at each wake-up,
expired at its deadline after a last try (told whether a key was woken since the previous
one), each try's actions applied."""

from __future__ import annotations

import functools
from collections.abc import Callable, Hashable, Iterable
from dataclasses import dataclass
from typing import TypeVar

from broker.core.actions import Actions
from broker.core.delayed import DelayedOperation
from broker.core.state import BrokerState
from tests.simulation.process import SimProcess

__all__ = ["SimPurgatory"]

R = TypeVar("R")


@dataclass(eq=False, slots=True)
class _Parked:
    keys: frozenset[Hashable]
    # check(expired, woken): answer if it can; True once answered. `woken`: a key was woken
    # since the previous check.
    check: Callable[[bool, bool], bool]
    done: bool = False
    wake_pending: bool = False
    # Inside its own check: a wake then (its try's actions) is not for it, as a trio task
    # is off Purgatory's watchers while it tries and cannot be woken by its own notify.
    checking: bool = False


class SimPurgatory:
    def __init__(self, process: SimProcess) -> None:
        self._process = process
        self._parked: list[_Parked] = []

    def answer_or_park(
        self, keys: Iterable[Hashable], wait_ms: int | None, check: Callable[[bool, bool], bool]
    ) -> None:
        """Answer now if `check` can (or may wait no longer), else park (`wait_ms` None: with
        no deadline, as Purgatory.wait's infinite one)."""
        if check(wait_ms is not None and wait_ms <= 0, True):
            return
        parked = _Parked(frozenset(keys), check)
        self._parked.append(parked)
        if wait_ms is not None:
            self._process.after(wait_ms, "deadline", functools.partial(self._settle, parked, True))

    def complete(
        self,
        operation: DelayedOperation[R],
        state: BrokerState,
        wait_ms: int | None,
        apply: Callable[[Actions], None],
        answer: Callable[[R], None],
    ) -> None:
        """Try `operation` now and at each wake-up until it completes, or expire it after
        a last try once `wait_ms` passed; then `answer` its response."""

        def check(expired: bool, woken: bool) -> bool:
            done = operation.try_complete(state, self._process.now_ms, woken)
            apply(operation.take_actions())
            if not done:
                if not expired:
                    return False
                operation.expire(self._process.now_ms)
            answer(operation.response())
            return True

        self.answer_or_park(operation.watch_keys, wait_ms, check)

    def wake(self, keys: Iterable[Hashable]) -> None:
        woken = set(keys)
        for parked in self._parked:
            if parked.done or parked.wake_pending or parked.checking:
                continue
            if parked.keys & woken:
                parked.wake_pending = True
                self._process.after(0, "wakes", functools.partial(self._settle, parked, False))

    def _settle(self, parked: _Parked, expired: bool) -> None:
        # A deadline may come before a wake-up's settle: that wake still counts.
        woken = not expired or parked.wake_pending
        parked.wake_pending = False
        if parked.done:
            return
        parked.checking = True
        try:
            done = parked.check(expired, woken)
        finally:
            parked.checking = False
        if done:
            parked.done = True
            self._parked.remove(parked)
