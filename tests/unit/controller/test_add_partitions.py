"""Replica assignment for partitions added to a topic: Kafka's round robin, continued."""

from __future__ import annotations

import pytest

from controller.assignment import assign_new_partitions, assign_replicas


def test_new_partitions_continue_the_round_robin() -> None:
    existing = assign_replicas([1, 2, 3], 3, 2, start_index=1, shift=1)
    added = assign_new_partitions([1, 2, 3], existing, 6)
    assert sorted(added) == [3, 4, 5]
    assert all(len(r) == 2 and len(set(r)) == 2 for r in added.values())
    # Preferred leaders go on where partition 0's left off: every broker leads two of six.
    leaders = [r[0] for r in {**existing, **added}.values()]
    assert sorted(leaders) == [1, 1, 2, 2, 3, 3]
    # The same as if the topic had been created with six partitions from that start.
    whole = assign_replicas([1, 2, 3], 6, 2, start_index=1, shift=1)
    assert [whole[p][0] for p in range(3, 6)] == [added[p][0] for p in range(3, 6)]


def test_new_partitions_use_brokers_that_joined_since() -> None:
    existing = {0: (1,), 1: (2,)}
    added = assign_new_partitions([1, 2, 3], existing, 5)
    assert {r[0] for r in added.values()} == {1, 2, 3}


@pytest.mark.parametrize("total", [1, 2])
def test_the_count_must_grow(total: int) -> None:
    with pytest.raises(ValueError, match="must be larger"):
        assign_new_partitions([1, 2], {0: (1,), 1: (2,)}, total)


def test_replication_factor_above_live_brokers_is_refused() -> None:
    with pytest.raises(ValueError, match="replication factor"):
        assign_new_partitions([1], {0: (1, 2)}, 2)
