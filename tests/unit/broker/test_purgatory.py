"""Purgatory: waiters parked under keys, woken by notify or by their deadline.

Virtual time (pytest-trio's `autojump_clock`, a MockClock(autojump_threshold=0)): a deadline
of an hour passes instantly.
"""

from __future__ import annotations

import pytest
import trio
from trio.testing import MockClock

from broker.core.actions import Actions
from broker.purgatory import Purgatory


@pytest.mark.parametrize("woken_by", ["a", "b", "c"])
async def test_notify_on_any_key_wakes_the_waiter(autojump_clock: MockClock, woken_by: str) -> None:
    purgatory = Purgatory()
    results: list[bool] = []
    woke_at: list[float] = []

    async def waiter() -> None:
        results.append(await purgatory.wait(["a", "b", "c"], trio.current_time() + 3600))
        woke_at.append(trio.current_time())

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(10)
        assert purgatory.watched_keys == 3
        purgatory.notify(woken_by)
    assert results == [True]
    assert woke_at[0] - start == pytest.approx(10)  # woken at once, not at the deadline
    assert purgatory.watched_keys == 0


async def test_deadline_returns_false(autojump_clock: MockClock) -> None:
    purgatory = Purgatory()
    start = trio.current_time()
    assert await purgatory.wait([("t", 0)], start + 5) is False
    assert trio.current_time() - start == pytest.approx(5)
    assert purgatory.watched_keys == 0


async def test_deadline_in_the_past_returns_false_at_once(
    autojump_clock: MockClock,
) -> None:
    purgatory = Purgatory()
    start = trio.current_time()
    assert await purgatory.wait(["k"], start - 1) is False
    assert trio.current_time() == start
    assert purgatory.watched_keys == 0


async def test_notify_of_another_key_does_not_wake(autojump_clock: MockClock) -> None:
    purgatory = Purgatory()
    results: list[bool] = []

    async def waiter() -> None:
        results.append(await purgatory.wait(["a"], trio.current_time() + 60))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(1)
        purgatory.notify("b")
        purgatory.notify(("a",))  # a different key that merely looks alike
        await trio.sleep(1)
        assert results == []
    assert results == [False]
    assert purgatory.watched_keys == 0


async def test_one_notify_wakes_every_waiter_on_the_key(
    autojump_clock: MockClock,
) -> None:
    purgatory = Purgatory()
    results: dict[str, bool] = {}

    async def waiter(name: str, keys: list[str]) -> None:
        results[name] = await purgatory.wait(keys, trio.current_time() + 60)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "one", ["shared"])
        nursery.start_soon(waiter, "two", ["shared", "other"])
        nursery.start_soon(waiter, "three", ["other"])
        await trio.sleep(1)
        assert purgatory.watched_keys == 2
        purgatory.notify("shared")
        await trio.sleep(1)
        assert results == {"one": True, "two": True}
        # "three" still watches "other"; "two" no longer does.
        assert purgatory.watched_keys == 1
        purgatory.notify("other")
    assert results == {"one": True, "two": True, "three": True}
    assert purgatory.watched_keys == 0


async def test_notify_before_wait_is_not_remembered(autojump_clock: MockClock) -> None:
    """A waiter re-checks its condition before parking; notify has no memory."""
    purgatory = Purgatory()
    purgatory.notify("k")
    assert purgatory.watched_keys == 0
    assert await purgatory.wait(["k"], trio.current_time() + 1) is False


async def test_cancelled_waiter_leaves_no_keys(autojump_clock: MockClock) -> None:
    purgatory = Purgatory()
    with trio.move_on_after(1):
        await purgatory.wait(["a", "b"], trio.current_time() + 3600)
    assert purgatory.watched_keys == 0
    purgatory.notify("a")  # nothing to wake; must not fail


async def test_duplicate_keys_in_one_wait(autojump_clock: MockClock) -> None:
    purgatory = Purgatory()
    results: list[bool] = []

    async def waiter() -> None:
        results.append(await purgatory.wait(["k", "k", "j"], trio.current_time() + 60))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(1)
        purgatory.notify("k")
    assert results == [True]
    assert purgatory.watched_keys == 0


async def test_keys_may_be_a_generator_or_dict(autojump_clock: MockClock) -> None:
    """Handlers pass dicts (produce) and lists; any iterable must register all its keys."""
    purgatory = Purgatory()
    results: list[bool] = []

    async def waiter() -> None:
        keys = {("t", 0): 5, ("t", 1): 7}
        results.append(await purgatory.wait(keys, trio.current_time() + 60))
        results.append(await purgatory.wait((k for k in "xy"), trio.current_time() + 60))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.sleep(1)
        purgatory.notify(("t", 1))
        await trio.sleep(1)
        assert purgatory.watched_keys == 2
        purgatory.notify("y")
    assert results == [True, True]
    assert purgatory.watched_keys == 0


async def test_many_waiters_then_deadlines_leave_no_keys(
    autojump_clock: MockClock,
) -> None:
    purgatory = Purgatory()
    async with trio.open_nursery() as nursery:
        for i in range(100):
            nursery.start_soon(purgatory.wait, [("t", i % 7), ("u", i)], trio.current_time() + i)
        await trio.sleep(0.5)
        purgatory.notify(("t", 3))
    assert purgatory.watched_keys == 0


async def test_a_shorter_deadline_after_a_longer_one_fires_on_time(
    autojump_clock: MockClock,
) -> None:
    """One reaper sleeps until the earliest deadline: a later wait with an earlier deadline
    must bring its wake-up forward."""
    purgatory = Purgatory()
    start = trio.current_time()
    ended: dict[str, float] = {}

    async def waiter(name: str, timeout_s: float) -> None:
        assert await purgatory.wait([name], trio.current_time() + timeout_s) is False
        ended[name] = trio.current_time() - start

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, "long", 100)
        await trio.sleep(1)
        nursery.start_soon(waiter, "short", 2)
    assert ended["short"] == pytest.approx(3)
    assert ended["long"] == pytest.approx(100)
    assert purgatory.timer_entries == 0


async def test_waits_that_end_early_do_not_pile_up_in_the_timer_heap(
    autojump_clock: MockClock,
) -> None:
    """Waits woken long before their deadline (acks=all with a 30 s timeout, woken in ms)
    leave entries behind; the heap is bounded by the live waits, not by the timeouts."""
    purgatory = Purgatory()

    async def waiter(key: int) -> None:
        assert await purgatory.wait([key], trio.current_time() + 3600) is True

    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter, -1)  # one wait parked throughout, at the heap's top
        await trio.sleep(1)
        for key in range(20_000):
            nursery.start_soon(waiter, key)
            await trio.sleep(0.001)
            purgatory.notify(key)
        assert purgatory.timer_entries <= 2 * 1 + 1024 + 1
        purgatory.notify(-1)
    assert purgatory.watched_keys == 0


async def test_a_cancelled_wait_is_not_woken_later(autojump_clock: MockClock) -> None:
    purgatory = Purgatory()
    with trio.move_on_after(1):
        await purgatory.wait(["k"], trio.current_time() + 2)
    await trio.sleep(5)  # past the cancelled wait's deadline: the reaper finds it ended
    with trio.fail_after(10):  # the reaper, asleep with nothing to time, wakes for this one
        assert await purgatory.wait(["k"], trio.current_time() + 1) is False
    assert purgatory.timer_entries == 0


def test_a_purgatory_outlives_a_trio_run() -> None:
    """Its reaper is a system task of the run it started in; a later run starts another."""
    purgatory = Purgatory()

    async def timed_out() -> bool:
        with trio.fail_after(5):  # without a reaper it would never return
            return await purgatory.wait(["k"], trio.current_time() + 0.01)

    assert trio.run(timed_out) is False
    assert trio.run(timed_out) is False


class _Countdown:
    """A delayed operation done after `tries` tries; records what the purgatory did."""

    def __init__(self, tries: int) -> None:
        self.tries_left = tries
        self.tried = 0
        self.expired = False
        self.unwoken_tries = 0
        self.watch_keys = ["k"]

    def try_complete(self, state: object, now_ms: int, woken: bool = True) -> bool:
        self.tried += 1
        self.unwoken_tries += not woken
        self.tries_left -= 1
        return self.tries_left <= 0

    def expire(self, now_ms: int) -> None:
        self.expired = True

    def take_actions(self) -> Actions:
        return Actions((f"woken by try {self.tried}",))  # type: ignore[arg-type]

    def response(self) -> tuple[int, bool]:
        return self.tried, self.expired


async def test_complete_tries_at_each_wake_up_until_done(autojump_clock: MockClock) -> None:
    purgatory = Purgatory()
    operation = _Countdown(tries=3)
    applied: list[Actions] = []
    results: list[tuple[int, bool]] = []

    async def parked() -> None:
        results.append(
            await purgatory.complete(
                operation,
                None,
                lambda: 0,
                trio.current_time() + 60,
                "produce",
                applied.append,  # type: ignore[arg-type]
            )
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(parked)
        for _ in range(2):
            await trio.sleep(1)
            assert purgatory.waiting["produce"] == 1
            purgatory.notify("k")
    assert results == [(3, False)]
    assert operation.unwoken_tries == 0
    assert [list(a.complete_keys) for a in applied] == [
        ["woken by try 1"],
        ["woken by try 2"],
        ["woken by try 3"],
    ]


async def test_complete_expires_after_a_last_try_at_the_deadline(
    autojump_clock: MockClock,
) -> None:
    purgatory = Purgatory()
    operation = _Countdown(tries=100)
    start = trio.current_time()
    result = await purgatory.complete(
        operation,
        None,
        lambda: 0,
        start + 5,
        "fetch",
        lambda _: None,  # type: ignore[arg-type]
    )
    assert result == (2, True)  # tried on arrival and once more at the deadline
    assert operation.unwoken_tries == 1  # the last try: no key was woken since the first
    assert trio.current_time() - start == pytest.approx(5)
    assert purgatory.watched_keys == 0


async def test_the_last_try_after_a_wake_up_is_told_nothing_woke_since(
    autojump_clock: MockClock,
) -> None:
    purgatory = Purgatory()
    operation = _Countdown(tries=100)
    start = trio.current_time()
    results: list[tuple[int, bool]] = []

    async def parked() -> None:
        results.append(
            await purgatory.complete(
                operation,
                None,
                lambda: 0,
                start + 5,
                "fetch",
                lambda _: None,  # type: ignore[arg-type]
            )
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(parked)
        await trio.sleep(1)
        purgatory.notify("k")
    assert results == [(3, True)]  # on arrival, at the wake-up, at the deadline
    assert operation.unwoken_tries == 1


async def test_the_last_try_at_shutdown_counts_as_woken(autojump_clock: MockClock) -> None:
    purgatory = Purgatory()
    operation = _Countdown(tries=100)
    results: list[tuple[int, bool]] = []

    async def parked() -> None:
        results.append(
            await purgatory.complete(
                operation,
                None,
                lambda: 0,
                trio.current_time() + 60,
                "fetch",
                lambda _: None,  # type: ignore[arg-type]
            )
        )

    async with trio.open_nursery() as nursery:
        nursery.start_soon(parked)
        await trio.sleep(1)
        purgatory.close()
    assert results == [(2, True)]
    assert operation.unwoken_tries == 0
