"""Leader election strategies (Kafka's PartitionLeaderElectionAlgorithms)."""

from __future__ import annotations

import pytest

from controller.core.leader_choice import (
    LeaderAndIsr,
    controlled_shutdown_leader,
    elect_controlled_shutdown,
    elect_offline,
    offline_leader,
    preferred_replica_leader,
    reassign_leader,
    remove_replicas_from_isr,
)


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "unclean", "expected"),
    [
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, False, 1),
        ((1, 2, 3), (3, 2), {1, 2, 3}, False, 2),  # assignment order, not ISR order
        ((1, 2, 3), (1, 2, 3), {3}, False, 3),
        ((1, 2, 3), (1,), {2, 3}, False, None),  # only out-of-sync replicas live
        ((1, 2, 3), (1,), {2, 3}, True, 2),  # unclean: first live replica
        ((1, 2, 3), (1,), set(), True, None),
        ((), (), {1}, False, None),
    ],
)
def test_offline_leader(
    assignment: tuple[int, ...],
    isr: tuple[int, ...],
    live: set[int],
    unclean: bool,
    expected: int | None,
) -> None:
    assert offline_leader(assignment, isr, live, unclean=unclean) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "expected"),
    [
        ((1, 2), (1, 2), {1, 2}, 1),
        ((1, 2), (2,), {1, 2}, None),  # head not in sync
        ((1, 2), (1, 2), {2}, None),  # head not live
        ((), (), set(), None),
    ],
)
def test_preferred_replica_leader(
    assignment: tuple[int, ...], isr: tuple[int, ...], live: set[int], expected: int | None
) -> None:
    assert preferred_replica_leader(assignment, isr, live) == expected


@pytest.mark.parametrize(
    ("target", "isr", "live", "expected"),
    [
        ((4, 5), (1, 4, 5), {1, 4, 5}, 4),
        ((4, 5), (1, 5), {1, 4, 5}, 5),
        ((4, 5), (1,), {1, 4, 5}, None),
    ],
)
def test_reassign_leader(
    target: tuple[int, ...], isr: tuple[int, ...], live: set[int], expected: int | None
) -> None:
    assert reassign_leader(target, isr, live) == expected


@pytest.mark.parametrize(
    ("assignment", "isr", "live", "shutting_down", "expected"),
    [
        ((1, 2, 3), (1, 2, 3), {1, 2, 3}, {1}, 2),
        ((1, 2, 3), (1, 3), {1, 2, 3}, {1}, 3),
        ((1, 2, 3), (1,), {1, 2, 3}, {1}, None),
    ],
)
def test_controlled_shutdown_leader(
    assignment: tuple[int, ...],
    isr: tuple[int, ...],
    live: set[int],
    shutting_down: set[int],
    expected: int | None,
) -> None:
    assert controlled_shutdown_leader(assignment, isr, live, shutting_down) == expected


@pytest.mark.parametrize(
    ("current", "live", "shutting_down", "expected"),
    [
        # 1 leaves: 2 leads, every shutting-down broker leaves the ISR, epoch + 1
        (LeaderAndIsr(1, 4, (1, 2, 3)), {1, 2, 3}, {1}, LeaderAndIsr(2, 5, (2, 3))),
        (LeaderAndIsr(1, 4, (1, 2, 3)), {1, 2, 3}, {1, 2}, LeaderAndIsr(3, 5, (3,))),
        # the other ISR member is dead or also leaving: the last one keeps leading
        (LeaderAndIsr(1, 4, (1, 2)), {1}, {1}, None),
        (LeaderAndIsr(1, 4, (1, 2)), {1, 2}, {1, 2}, None),
        # live but out of sync: not a candidate
        (LeaderAndIsr(1, 4, (1,)), {1, 2, 3}, {1}, None),
    ],
)
def test_elect_controlled_shutdown(
    current: LeaderAndIsr, live: set[int], shutting_down: set[int], expected: LeaderAndIsr | None
) -> None:
    assert elect_controlled_shutdown(current, (1, 2, 3), live, shutting_down) == expected


@pytest.mark.parametrize(
    ("current", "assignment", "live", "unclean", "expected"),
    [
        # leader 1 gone, 2 in sync: 2 leads, ISR keeps only live members, epoch + 1
        (LeaderAndIsr(1, 4, (1, 2, 3)), (1, 2, 3), {2, 3}, False, LeaderAndIsr(2, 5, (2, 3))),
        # RF=1 leader gone: leaderless, ISR kept as its last member
        (LeaderAndIsr(1, 0, (1,)), (1,), set(), False, LeaderAndIsr(-1, 1, (1,))),
        # whole ISR gone: leaderless, never emptied
        (LeaderAndIsr(1, 2, (1, 2)), (1, 2, 3), {3}, False, LeaderAndIsr(-1, 3, (2,))),
        # already leaderless, nothing live: no change, no epoch bump
        (LeaderAndIsr(-1, 3, (2,)), (1, 2), set(), False, LeaderAndIsr(-1, 3, (2,))),
        # leaderless and the last ISR member returns: it leads
        (LeaderAndIsr(-1, 1, (2,)), (1, 2), {1, 2}, False, LeaderAndIsr(2, 2, (2,))),
        # unclean opt-in: an out-of-sync replica leads alone
        (LeaderAndIsr(-1, 1, (2,)), (1, 2), {1}, True, LeaderAndIsr(1, 2, (1,))),
    ],
)
def test_elect_offline(
    current: LeaderAndIsr,
    assignment: tuple[int, ...],
    live: set[int],
    unclean: bool,
    expected: LeaderAndIsr,
) -> None:
    assert elect_offline(current, assignment, live, unclean=unclean) == expected


@pytest.mark.parametrize(
    ("current", "removed", "expected"),
    [
        (LeaderAndIsr(1, 0, (1, 2, 3)), [3], LeaderAndIsr(1, 1, (1, 2))),
        (LeaderAndIsr(1, 0, (1, 2)), [1], LeaderAndIsr(-1, 1, (2,))),
        (LeaderAndIsr(1, 0, (1,)), [1], LeaderAndIsr(-1, 1, (1,))),
        (LeaderAndIsr(1, 0, (1, 2)), [4], LeaderAndIsr(1, 0, (1, 2))),  # not in ISR: no change
        (LeaderAndIsr(1, 0, (1, 2)), [], LeaderAndIsr(1, 0, (1, 2))),
    ],
)
def test_remove_replicas_from_isr(
    current: LeaderAndIsr, removed: list[int], expected: LeaderAndIsr
) -> None:
    assert remove_replicas_from_isr(current, removed) == expected
