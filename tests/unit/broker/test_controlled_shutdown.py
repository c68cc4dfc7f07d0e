"""broker.core.controlled_shutdown: attempts, waits and stops within the deadline; and the
script that finds the controller (run on the simulator's ZooKeeper)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from broker.core.controlled_shutdown import (
    CONNECT_TIMEOUT_MS,
    Ask,
    ShutdownAttempts,
    Stop,
    StopReason,
    Wait,
)
from controller import zk_data
from controller.zk_brokers import try_register
from controller.zk_controller_election import controller_registration, try_elect
from tests.simulation.zk import SimZk

KAFKA_DEFAULTS = {"max_retries": 3, "retry_backoff_ms": 5000, "request_timeout_ms": 30_000}


def attempts(now_ms: int = 0, timeout_ms: int = 10_000, **overrides: int) -> ShutdownAttempts:
    return ShutdownAttempts.start(
        now_ms, **{**KAFKA_DEFAULTS, "timeout_ms": timeout_ms, **overrides}
    )


def test_accepted_at_the_first_attempt() -> None:
    plan = attempts(now_ms=1000)
    step = plan.next_step(1000, zk_connected=True)
    # A third of the 10 s each: the attempts share the deadline.
    assert step == Ask(1, 3334, CONNECT_TIMEOUT_MS)
    plan.attempt_accepted()
    assert plan.next_step(1200, zk_connected=True) == Stop(StopReason.ACCEPTED)
    assert Stop(StopReason.ACCEPTED).accepted


def test_nothing_is_tried_without_a_zookeeper_session() -> None:
    plan = attempts()
    stop = plan.next_step(0, zk_connected=False)
    assert stop == Stop(StopReason.ZOOKEEPER_DISCONNECTED)
    assert not stop.accepted
    assert plan.attempts == 0


def test_a_disconnection_after_a_failed_attempt_stops_without_waiting() -> None:
    plan = attempts()
    assert isinstance(plan.next_step(0, zk_connected=True), Ask)
    plan.attempt_failed(10)
    assert plan.next_step(10, zk_connected=False) == Stop(StopReason.ZOOKEEPER_DISCONNECTED)


def test_fast_failures_wait_the_backoff_but_never_past_the_attempts_share() -> None:
    """Connection refused at once, three times (the controller is stopping too): Kafka's 5 s
    backoff is cut to the end of each attempt's share, and all ends within 10 s."""
    plan = attempts()
    assert plan.next_step(0, zk_connected=True) == Ask(1, 3334, CONNECT_TIMEOUT_MS)
    plan.attempt_failed(5)
    assert plan.next_step(5, zk_connected=True) == Wait(3329)
    assert plan.next_step(3334, zk_connected=True) == Ask(2, 3333, CONNECT_TIMEOUT_MS)
    plan.attempt_failed(3340)
    assert plan.next_step(3340, zk_connected=True) == Wait(3327)
    assert plan.next_step(6667, zk_connected=True) == Ask(3, 3333, CONNECT_TIMEOUT_MS)
    plan.attempt_failed(6670)
    assert plan.next_step(6670, zk_connected=True) == Stop(StopReason.RETRIES_EXHAUSTED)


def test_a_short_backoff_retries_sooner_and_later_attempts_get_more_time() -> None:
    plan = attempts(retry_backoff_ms=100)
    assert isinstance(plan.next_step(0, zk_connected=True), Ask)
    plan.attempt_failed(0)
    assert plan.next_step(0, zk_connected=True) == Wait(100)
    assert plan.next_step(100, zk_connected=True) == Ask(2, 4950, CONNECT_TIMEOUT_MS)


def test_attempts_that_get_no_answer_use_their_share_and_end_by_the_deadline() -> None:
    plan = attempts(timeout_ms=9000)
    now = 0
    for attempt in (1, 2, 3):
        step = plan.next_step(now, zk_connected=True)
        assert step == Ask(attempt, 3000, CONNECT_TIMEOUT_MS)
        now += step.timeout_ms  # timed out
        plan.attempt_failed(now)
    assert now == 9000
    assert plan.next_step(now, zk_connected=True) == Stop(StopReason.RETRIES_EXHAUSTED)


def test_request_timeout_bounds_an_attempt_when_the_share_is_larger() -> None:
    plan = attempts(timeout_ms=60_000, request_timeout_ms=2000)
    assert plan.next_step(0, zk_connected=True) == Ask(1, 2000, 2000)
    plan.attempt_failed(2000)
    assert plan.next_step(2000, zk_connected=True) == Wait(5000)


def test_the_deadline_ends_attempts_that_ran_long() -> None:
    plan = attempts(timeout_ms=1000)
    assert isinstance(plan.next_step(0, zk_connected=True), Ask)
    plan.attempt_failed(2500)  # the shell overran (a slow event loop)
    assert plan.next_step(2500, zk_connected=True) == Stop(StopReason.DEADLINE)


def test_no_retries_means_no_attempt() -> None:
    plan = attempts(max_retries=0)
    assert plan.next_step(0, zk_connected=True) == Stop(StopReason.RETRIES_EXHAUSTED)


@settings(max_examples=300, deadline=None)
@given(
    max_retries=st.integers(0, 6),
    retry_backoff_ms=st.integers(0, 20_000),
    request_timeout_ms=st.integers(0, 40_000),
    timeout_ms=st.integers(1, 40_000),
    fractions=st.lists(st.floats(0, 1), min_size=6, max_size=6),
)
def test_everything_ends_by_the_deadline(
    max_retries: int,
    retry_backoff_ms: int,
    request_timeout_ms: int,
    timeout_ms: int,
    fractions: list[float],
) -> None:
    """Whatever the settings and however long each failing attempt takes (up to its timeout),
    no attempt or wait reaches past the deadline, and there are at most max.retries attempts."""
    plan = attempts(
        max_retries=max_retries,
        retry_backoff_ms=retry_backoff_ms,
        request_timeout_ms=request_timeout_ms,
        timeout_ms=timeout_ms,
    )
    now, asks = 0, 0
    for _ in range(100):
        step = plan.next_step(now, zk_connected=True)
        if isinstance(step, Stop):
            assert step.reason in (StopReason.RETRIES_EXHAUSTED, StopReason.DEADLINE)
            break
        if isinstance(step, Wait):
            assert step.delay_ms > 0
            now += step.delay_ms
        else:
            assert step.connect_timeout_ms <= step.timeout_ms <= max(request_timeout_ms, 0)
            now += int(step.timeout_ms * fractions[asks])
            asks += 1
            plan.attempt_failed(now)
        assert now <= timeout_ms
    else:
        raise AssertionError("no Stop after 100 steps")
    assert asks <= max_retries


def test_controller_registration_names_the_controller_and_where_it_listens() -> None:
    zk = SimZk()
    session = zk.open_session(owner=2)
    assert zk.run(session, controller_registration()) is None  # none elected
    assert zk.run(session, try_elect(2, session, wall_ms=0)) is not None
    assert zk.run(session, controller_registration()) == (2, None)  # not registered (yet)
    registration = zk_data.BrokerRegistration("broker-2", 9093, None, 0)
    assert zk.run(session, try_register(2, registration, session)) is not None
    assert zk.run(session, controller_registration()) == (2, registration)
    zk.expire_session(session)
    other = zk.open_session(owner=3)
    assert zk.run(other, controller_registration()) is None
