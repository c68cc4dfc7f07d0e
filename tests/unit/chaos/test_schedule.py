"""The nemesis's schedule (pure): what a step injects, and the ledger's overlap counting."""

from __future__ import annotations

import random

import pytest

from tests.chaos.schedule import (
    BROKER_KINDS,
    EXCLUSIVE,
    HOLD_S,
    KINDS,
    PAIRS,
    Ledger,
    can_pair,
    plan_step,
)

SESSION_S = 4.0


def steps(seed: int, kinds: tuple[str, ...] = KINDS, share: float = 0.5, n: int = 2000) -> list:
    rng = random.Random(seed)
    return [plan_step(rng, kinds, 3, overlap_share=share, session_s=SESSION_S) for _ in range(n)]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_pairs_second_fault_starts_while_the_first_surely_holds(seed: int) -> None:
    pairs = [s for s in steps(seed) if s.overlapping]
    assert pairs
    for step in pairs:
        first, second = step.faults
        assert len(step.faults) == 2
        assert first.delay_s == 0.0
        shortest = HOLD_S[first.kind][0] + (SESSION_S if first.kind == "expire" else 0.0)
        assert 0 < second.delay_s < max(shortest, 0.2), step


def test_corrupt_never_pairs_and_pairs_follow_the_rules() -> None:
    for step in steps(4):
        kinds = [f.kind for f in step.faults]
        if len(kinds) == 2:
            assert not set(kinds) & EXCLUSIVE, step
            assert can_pair(*kinds), step
            assert any(k in BROKER_KINDS for k in kinds), step
    assert not can_pair("corrupt", "pause")
    assert not can_pair("kill", "corrupt")
    assert not can_pair("reassign", "lose-acks")  # two cluster-wide faults
    assert can_pair("reassign", "expire")


def test_about_the_asked_share_of_steps_overlap_and_none_without_overlap() -> None:
    planned = steps(5)
    share = sum(s.overlapping for s in planned) / len(planned)
    assert 0.4 < share < 0.6, share
    assert not any(s.overlapping for s in steps(5, share=0.0))
    # One kind that pairs with nothing but itself being a broker kind: kill+kill on two brokers.
    assert all(s.name in ("kill", "kill+kill") for s in steps(6, kinds=("kill",)))
    assert all(not s.overlapping for s in steps(6, kinds=("corrupt",)))


def test_the_named_pairs_come_up_with_their_roles() -> None:
    named = {s.name: s for s in steps(7) if s.name in PAIRS}
    assert set(named) == set(PAIRS)
    paused, killed = named["follower-paused-leader-killed"].faults
    assert (paused.kind, paused.role, killed.kind, killed.role) == (
        "pause",
        "follower",
        "kill",
        "leader",
    )
    moving, expired = named["controller-expired-during-reassign"].faults
    assert (moving.kind, expired.kind, expired.role) == ("reassign", "expire", "controller")
    assert expired.hold_s > SESSION_S  # past the session: it does expire


def test_a_named_pair_needs_both_its_kinds() -> None:
    assert not any(s.name in PAIRS for s in steps(8, kinds=("kill", "reassign")))


def test_the_same_seed_plans_the_same_steps() -> None:
    assert steps(9, n=50) == steps(9, n=50)


def test_the_ledger_counts_a_fault_started_during_another_as_overlapping() -> None:
    ledger = Ledger()
    a = ledger.start("pause", "broker 2", 0.0)
    b = ledger.start("kill", "broker 1", 0.3)  # during a
    ledger.heal(a, 1.0)  # a healed first, b still down
    assert [e.number for e in ledger.active()] == [b]
    ledger.heal(b, 2.5)
    c = ledger.start("bounce", "broker 3", 3.0)  # alone
    ledger.heal(c, 4.0)
    assert ledger.overlapping == 1
    assert ledger.overlapping_pairs() == {"pause+kill": 1}
    assert ledger.by_kind() == {"bounce": 1, "kill": 1, "pause": 1}
    assert ledger.heal_order() == [a, b, c]
    assert not ledger.active()


def test_the_ledger_keeps_the_real_heal_order_when_the_second_heals_first() -> None:
    ledger = Ledger()
    reassign = ledger.start("reassign", "cluster", 0.0)
    expire = ledger.start("expire", "broker 1 (controller)", 0.4)
    ledger.heal(expire, 5.0)
    assert [e.kind for e in ledger.active()] == ["reassign"]
    ledger.heal(reassign, 9.0)
    assert ledger.heal_order() == [expire, reassign]
    assert ledger.overlapping_pairs() == {"reassign+expire": 1}


def test_healing_a_fault_twice_is_a_bug() -> None:
    ledger = Ledger()
    n = ledger.start("kill", "broker 1", 0.0)
    ledger.heal(n, 1.0)
    with pytest.raises(ValueError, match="healed twice"):
        ledger.heal(n, 2.0)


def test_a_fault_started_after_the_other_healed_does_not_overlap() -> None:
    ledger = Ledger()
    ledger.heal(ledger.start("kill", "broker 1", 0.0), 1.0)
    ledger.heal(ledger.start("pause", "broker 2", 1.0), 2.0)
    assert ledger.overlapping == 0
