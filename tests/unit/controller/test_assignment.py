"""assign_replicas: Kafka's rack-unaware round robin."""

from __future__ import annotations

from collections import Counter

import pytest

from controller.assignment import assign_replicas

# Kafka's documented example (AdminUtils): 5 brokers, 10 partitions, RF 3, start 0, shift 0.
KAFKA_EXAMPLE = {
    0: (0, 1, 2),
    1: (1, 2, 3),
    2: (2, 3, 4),
    3: (3, 4, 0),
    4: (4, 0, 1),
    5: (0, 2, 3),
    6: (1, 3, 4),
    7: (2, 4, 0),
    8: (3, 0, 1),
    9: (4, 1, 2),
}


def test_kafka_documented_layout() -> None:
    assert assign_replicas(range(5), 10, 3, start_index=0, shift=0) == KAFKA_EXAMPLE


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf", "start", "shift", "expected"),
    [
        ([1], 2, 1, 0, 0, {0: (1,), 1: (1,)}),
        ([3, 1, 2], 3, 1, 1, 0, {0: (2,), 1: (3,), 2: (1,)}),  # sorted ids, start at index 1
        ([1, 2, 3], 3, 2, 0, 0, {0: (1, 2), 1: (2, 3), 2: (3, 1)}),
        ([1, 2, 3], 3, 2, 0, 1, {0: (1, 3), 1: (2, 1), 2: (3, 2)}),
        ([1, 2, 3], 4, 3, 2, 0, {0: (3, 1, 2), 1: (1, 2, 3), 2: (2, 3, 1), 3: (3, 2, 1)}),
    ],
)
def test_table(
    brokers: list[int],
    partitions: int,
    rf: int,
    start: int,
    shift: int,
    expected: dict[int, tuple[int, ...]],
) -> None:
    assert assign_replicas(brokers, partitions, rf, start_index=start, shift=shift) == expected


@pytest.mark.parametrize("start", range(4))
@pytest.mark.parametrize("shift", range(4))
def test_leaders_spread_evenly_and_replicas_distinct(start: int, shift: int) -> None:
    assignment = assign_replicas([10, 11, 12, 13], 8, 3, start_index=start, shift=shift)
    assert sorted(assignment) == list(range(8))
    assert all(len(set(r)) == 3 for r in assignment.values())
    assert set(Counter(r[0] for r in assignment.values()).values()) == {2}
    assert set(Counter(b for r in assignment.values() for b in r).values()) == {6}


@pytest.mark.parametrize(
    ("brokers", "partitions", "rf"),
    [([], 1, 1), ([1, 2], 0, 1), ([1, 2], 1, 0), ([1, 2], 1, 3)],
)
def test_invalid_requests_raise_value_error(brokers: list[int], partitions: int, rf: int) -> None:
    with pytest.raises(ValueError):
        assign_replicas(brokers, partitions, rf, start_index=0, shift=0)
