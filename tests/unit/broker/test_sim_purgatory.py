"""SimPurgatory (tests/simulation/purgatory.py) runs a delayed operation as Purgatory.complete
does: a try on arrival, one at each wake-up, a last one at the deadline told whether a key
was woken since the previous try (tests/unit/broker/test_purgatory.py, the trio driver)."""

from __future__ import annotations

from tests.simulation.process import SimProcess
from tests.simulation.purgatory import SimPurgatory
from tests.simulation.scheduler import Scheduler
from tests.unit.broker.test_purgatory import _Countdown


def _run(
    wakes_at_ms: list[int], deadline_ms: int, *, tries_wake: bool = False
) -> tuple[_Countdown, list[tuple[int, bool]]]:
    """`tries_wake`: each try's actions wake the operation's own key (as an append does)."""
    scheduler = Scheduler(0)
    process = SimProcess(scheduler, "broker")
    process.alive = True
    purgatory = SimPurgatory(process)
    operation = _Countdown(tries=100)
    answers: list[tuple[int, bool]] = []
    for at_ms in wakes_at_ms:  # before the deadline's timer: at the same time, first
        scheduler.at(at_ms, "wake", lambda: purgatory.wake(["k"]))
    purgatory.complete(
        operation,
        None,  # type: ignore[arg-type]
        deadline_ms,
        (lambda _: purgatory.wake(["k"])) if tries_wake else (lambda _: None),
        answers.append,
    )
    while (event := scheduler.pop()) is not None:
        event.action()
    return operation, answers


def test_the_last_try_at_the_deadline_is_told_nothing_woke() -> None:
    operation, answers = _run([], 500)
    assert answers == [(2, True)]
    assert operation.unwoken_tries == 1


def test_the_last_try_after_a_wake_up_is_told_nothing_woke_since() -> None:
    operation, answers = _run([100], 500)
    assert answers == [(3, True)]
    assert operation.unwoken_tries == 1


def test_a_wake_up_at_the_deadline_counts() -> None:
    operation, answers = _run([500], 500)  # woken, its try not yet run when the deadline comes
    assert answers == [(2, True)]
    assert operation.unwoken_tries == 0


def test_a_try_does_not_wake_itself() -> None:
    """As a trio task, off the watchers while it tries: its own actions' wake is not for it
    (else it would be tried again at once, and again, until done)."""
    operation, answers = _run([100], 500, tries_wake=True)
    assert answers == [(3, True)]  # on arrival, at the wake-up, at the deadline
    assert operation.unwoken_tries == 1
