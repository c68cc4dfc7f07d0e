"""The server-side assignors: uniform balances within one partition and moves as few as
balance needs when a member joins; range gives each topic's subscribers contiguous ranges."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from broker.core.group.assignors import assign
from protocol.topic_partition import TopicPartition


def tps(topic: str, *partitions: int) -> frozenset[TopicPartition]:
    return frozenset(TopicPartition(topic, p) for p in partitions)


@given(members=st.integers(1, 9), partitions=st.integers(0, 40))
def test_uniform_balances_a_homogeneous_group(members: int, partitions: int) -> None:
    subs = {f"m{i}": frozenset({"t"}) for i in range(members)}
    result = assign("uniform", subs, {"t": partitions}, {})
    sizes = [len(a) for a in result.values()]
    assert max(sizes) - min(sizes) <= 1
    assert frozenset().union(*result.values()) == tps("t", *range(partitions))
    assert sum(sizes) == partitions  # nothing twice


@given(members=st.integers(1, 8), partitions=st.integers(1, 40))
def test_uniform_moves_only_what_a_new_member_needs(members: int, partitions: int) -> None:
    subs = {f"m{i}": frozenset({"t"}) for i in range(members)}
    before = assign("uniform", subs, {"t": partitions}, {})
    after = assign("uniform", {**subs, "new": frozenset({"t"})}, {"t": partitions}, before)
    moved = sum(len(before[m] - after[m]) for m in before)
    assert moved == len(after["new"])  # everything the newcomer got came from someone
    assert len(after["new"]) == partitions // (members + 1)


def test_uniform_keeps_each_member_to_its_topics() -> None:
    subs = {"a": frozenset({"x"}), "b": frozenset({"x", "y"})}
    result = assign("uniform", subs, {"x": 2, "y": 4}, {})
    assert result["a"] <= tps("x", 0, 1)
    assert tps("y", 0, 1, 2, 3) <= result["b"]


def test_range_gives_contiguous_ranges_per_topic() -> None:
    subs = {"a": frozenset({"t"}), "b": frozenset({"t"}), "c": frozenset({"t"})}
    result = assign("range", subs, {"t": 7}, {})
    assert result == {"a": tps("t", 0, 1, 2), "b": tps("t", 3, 4), "c": tps("t", 5, 6)}
