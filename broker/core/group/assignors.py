"""Server-side assignors (KIP-848): `uniform` (Kafka's UniformAssignor: balanced and sticky,
partitions stay where they were unless balance needs them elsewhere) and `range` (Kafka's
RangeAssignor: each topic's partitions in contiguous ranges over its subscribers)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from broker.core.group.model import Assignment
from protocol.topic_partition import TopicPartition

__all__ = ["ASSIGNORS", "DEFAULT_ASSIGNOR", "assign"]

DEFAULT_ASSIGNOR: Final = "uniform"
ASSIGNORS: Final = ("uniform", "range")


def assign(
    assignor: str,
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    """member id -> its target partitions. `subscriptions`: member -> topics it subscribes to
    (resolved regexes included); `partition_counts`: topic -> partitions (existing topics)."""
    if assignor == "range":
        return _range(subscriptions, partition_counts)
    return _uniform(subscriptions, partition_counts, previous)


def _subscribers(subscriptions: Mapping[str, frozenset[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for member in sorted(subscriptions):
        for topic in subscriptions[member]:
            out.setdefault(topic, []).append(member)
    return out


def _range(
    subscriptions: Mapping[str, frozenset[str]], partition_counts: Mapping[str, int]
) -> dict[str, Assignment]:
    result: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for topic, members in sorted(_subscribers(subscriptions).items()):
        count = partition_counts.get(topic, 0)
        share, extra = divmod(count, len(members))
        start = 0
        for i, member in enumerate(members):
            size = share + (1 if i < extra else 0)
            result[member].update(TopicPartition(topic, p) for p in range(start, start + size))
            start += size
    return {m: frozenset(a) for m, a in result.items()}


def _uniform(
    subscriptions: Mapping[str, frozenset[str]],
    partition_counts: Mapping[str, int],
    previous: Mapping[str, Assignment],
) -> dict[str, Assignment]:
    subscribers = _subscribers(subscriptions)
    partitions = [
        TopicPartition(topic, p)
        for topic in sorted(subscribers)
        for p in range(partition_counts.get(topic, 0))
    ]
    owner: dict[TopicPartition, str] = {}
    counts = dict.fromkeys(subscriptions, 0)
    valid = set(partitions)
    for member in sorted(previous):  # stickiness: keep what is still valid
        if member not in subscriptions:
            continue
        for tp in sorted(previous[member]):
            if tp in valid and tp not in owner and tp.topic in subscriptions[member]:
                owner[tp] = member
                counts[member] += 1
    for tp in partitions:  # the rest to the least loaded subscriber
        if tp not in owner:
            member = min(subscribers[tp.topic], key=lambda m: (counts[m], m))
            owner[tp] = member
            counts[member] += 1
    moved = True
    while moved:  # balance: each move lowers the sum of squared counts, so this ends
        moved = False
        for tp in partitions:
            current = owner[tp]
            best = min(subscribers[tp.topic], key=lambda m: (counts[m], m))
            if counts[current] - counts[best] >= 2:
                owner[tp] = best
                counts[current] -= 1
                counts[best] += 1
                moved = True
    result: dict[str, set[TopicPartition]] = {m: set() for m in subscriptions}
    for tp, member in owner.items():
        result[member].add(tp)
    return {m: frozenset(a) for m, a in result.items()}
