"""Automatic leader rebalance: which partitions a preferred replica election should move. Pure.

Kafka's checkAndTriggerAutoLeaderRebalance: for each broker, the partitions whose preferred
replica (the assignment's head) it is; its imbalance is the share of those led by another
broker. Above `leader.imbalance.per.broker.percentage`, the partitions whose preferred replica
is live, not shutting down and in the ISR get a preferred election. The total of partitions
not led by their preferred replica is Kafka's PreferredReplicaImbalanceCount.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from protocol.topic_partition import TopicPartition

__all__ = ["LeaderImbalance", "leader_imbalance"]


@dataclass(frozen=True, slots=True)
class LeaderImbalance:
    # Partitions not led by their preferred replica (Kafka's PreferredReplicaImbalanceCount).
    imbalance_count: int
    # preferred broker -> its imbalance ratio (0.0..1.0).
    ratios: Mapping[int, float]
    # The partitions a preferred election should move now, sorted.
    to_elect: tuple[TopicPartition, ...]


def leader_imbalance(
    assignments: Mapping[str, Mapping[int, Sequence[int]]],
    leaders: Mapping[TopicPartition, int],
    isrs: Mapping[TopicPartition, Collection[int]],
    live: Collection[int],
    shutting_down: Collection[int],
    percentage: int,
) -> LeaderImbalance:
    """`leaders`/`isrs`: the partitions that have a state (others are left out)."""
    preferred_for: dict[int, list[TopicPartition]] = {}
    for topic, assignment in assignments.items():
        for partition, replicas in assignment.items():
            if replicas and (topic, partition) in leaders:
                preferred_for.setdefault(replicas[0], []).append(TopicPartition(topic, partition))
    ratios: dict[int, float] = {}
    to_elect: list[TopicPartition] = []
    count = 0
    for broker, partitions in sorted(preferred_for.items()):
        not_led = [tp for tp in partitions if leaders[tp] != broker]
        count += len(not_led)
        ratios[broker] = len(not_led) / len(partitions)
        if ratios[broker] * 100 <= percentage:
            continue
        if broker not in live or broker in shutting_down:
            continue
        to_elect += [tp for tp in not_led if tp in isrs and broker in isrs[tp]]
    return LeaderImbalance(count, ratios, tuple(sorted(to_elect)))
