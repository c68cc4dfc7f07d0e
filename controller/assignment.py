"""Replica assignment for new topics: Kafka's rack-unaware round robin (AdminUtils). Pure.

Replicas and leaders spread evenly: the first replica of partition p on broker
(p + start_index) mod n, the followers at a shift that grows by one every n partitions;
callers pass a random `start_index` and `shift` (as Kafka draws them), so tests can fix them.
Adding partitions (Kafka's AdminZkClient.addPartitions) continues the round robin.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

__all__ = ["assign_new_partitions", "assign_replicas"]


def assign_replicas(
    broker_ids: Iterable[int],
    num_partitions: int,
    replication_factor: int,
    *,
    start_index: int,
    shift: int,
    start_partition_id: int = 0,
) -> dict[int, tuple[int, ...]]:
    """partition -> replicas (the head is the preferred leader).

    Raises ValueError for no brokers, num_partitions < 1, replication_factor < 1, or a
    replication factor larger than the number of brokers.
    """
    brokers = sorted(set(broker_ids))
    if not brokers:
        raise ValueError("no brokers available")
    if num_partitions < 1:
        raise ValueError(f"number of partitions must be at least 1, got {num_partitions}")
    if replication_factor < 1:
        raise ValueError(f"replication factor must be at least 1, got {replication_factor}")
    if replication_factor > len(brokers):
        raise ValueError(
            f"replication factor {replication_factor} larger than available brokers {len(brokers)}"
        )
    count = len(brokers)
    start = start_index % count
    next_shift = shift % count
    assignment: dict[int, tuple[int, ...]] = {}
    for partition in range(start_partition_id, start_partition_id + num_partitions):
        if partition > 0 and partition % count == 0:
            next_shift += 1
        first = (partition + start) % count
        replicas = [brokers[first]]
        for j in range(replication_factor - 1):
            replicas.append(brokers[_replica_index(first, next_shift, j, count)])
        assignment[partition] = tuple(replicas)
    return assignment


def _replica_index(first: int, second_replica_shift: int, replica: int, count: int) -> int:
    shift = 1 + (second_replica_shift + replica) % (count - 1)
    return (first + shift) % count


def assign_new_partitions(
    broker_ids: Iterable[int],
    existing: Mapping[int, Sequence[int]],
    total_partitions: int,
) -> dict[int, tuple[int, ...]]:
    """The replicas of partitions len(existing)..total_partitions-1, with the existing
    replication factor. Raises ValueError as assign_replicas does, or when total_partitions
    does not add any."""
    if not existing:
        raise ValueError("the topic has no partitions to add to")
    count = len(existing)
    if total_partitions <= count:
        raise ValueError(
            f"topic has {count} partitions; the new count must be larger, got {total_partitions}"
        )
    brokers = sorted(set(broker_ids))
    first = existing[min(existing)]
    # Kafka: the index of the first broker whose id >= partition 0's preferred replica.
    start = next((i for i, b in enumerate(brokers) if b >= first[0]), 0)
    return assign_replicas(
        brokers,
        total_partitions - count,
        len(first),
        start_index=start,
        shift=start,
        start_partition_id=count,
    )
