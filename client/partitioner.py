"""Which partition a record goes to (pure, deterministic given its inputs).

Keyed records: Kafka's default partitioner, `(murmur2(key) & 0x7fffffff) % partitions`, with
Kafka's `Utils.murmur2` (seed 0x9747b28c), so a key lands where Kafka's Java client puts it.
Keyless records: KIP-794's sticky partitioner (without the adaptive part): one partition with
a leader, picked at random, until `batch_size` bytes went to it; then another.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

__all__ = ["StickyPartition", "StickyPartitioner", "murmur2", "partition_for_key", "to_positive"]

_SEED = 0x9747B28C
_M = 0x5BD1E995
_R = 24
_MASK = 0xFFFFFFFF


def murmur2(data: bytes) -> int:
    """Kafka's `Utils.murmur2`: a signed 32-bit hash (Java int) of `data`."""
    length = len(data)
    h = (_SEED ^ length) & _MASK
    whole = length - (length & 3)
    for i in range(0, whole, 4):
        k = int.from_bytes(data[i : i + 4], "little")
        k = (k * _M) & _MASK
        k ^= k >> _R
        k = (k * _M) & _MASK
        h = (h * _M) & _MASK
        h ^= k
    tail = length & 3
    if tail == 3:
        h ^= data[whole + 2] << 16
    if tail >= 2:
        h ^= data[whole + 1] << 8
    if tail >= 1:
        h ^= data[whole]
        h = (h * _M) & _MASK
    h ^= h >> 13
    h = (h * _M) & _MASK
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


def to_positive(n: int) -> int:
    """Kafka's `Utils.toPositive`: clear the sign bit (not abs: abs(MIN_INT) overflows in Java)."""
    return n & 0x7FFFFFFF


def partition_for_key(key: bytes, num_partitions: int) -> int:
    if num_partitions <= 0:
        raise ValueError("num_partitions must be positive")
    return to_positive(murmur2(key)) % num_partitions


@dataclass(slots=True)
class StickyPartition:
    """A topic's current sticky partition, and the bytes of keyless records it took so far."""

    partition: int
    produced_bytes: int = 0


class StickyPartitioner:
    """Per topic, one partition for keyless records until `batch_size` bytes went to it."""

    def __init__(self, batch_size: int, rng: random.Random | None = None) -> None:
        self._batch_size = max(1, batch_size)
        self._rng = rng if rng is not None else random.Random()
        self._sticky: dict[str, StickyPartition] = {}

    @property
    def batch_size(self) -> int:
        """Bytes of keyless records a sticky partition takes before another one is picked."""
        return self._batch_size

    @property
    def sticky_partitions(self) -> Mapping[str, StickyPartition]:
        """The live map topic -> its sticky partition (the same object for the partitioner's
        lifetime): for a hot path that keeps it, uses a partition while it has taken fewer
        than batch_size bytes, and counts them itself (partition + record_appended, inlined)."""
        return self._sticky

    def partition(
        self,
        topic: str,
        num_partitions: int,
        available: Callable[[], Sequence[int]] | Sequence[int] = (),
    ) -> int:
        """The partition for the next keyless record of `topic`.

        `available`: partitions that currently have a leader (or a function giving them, called
        only when a new partition is picked); empty means "choose among all".
        """
        if num_partitions <= 0:
            raise ValueError("num_partitions must be positive")
        current = self._sticky.get(topic)
        if (
            current is not None
            and current.partition < num_partitions
            and current.produced_bytes < self._batch_size
        ):
            return current.partition
        live = available() if callable(available) else available
        choices: Sequence[int] = [p for p in live if p < num_partitions] or range(num_partitions)
        if current is not None and len(choices) > 1:
            # Move on: a different partition from the one just filled.
            choices = [p for p in choices if p != current.partition]
        chosen = self._rng.choice(choices)
        self._sticky[topic] = StickyPartition(chosen)
        return chosen

    def record_appended(self, topic: str, partition: int, size_bytes: int) -> None:
        """Count bytes of a keyless record appended to the sticky partition."""
        current = self._sticky.get(topic)
        if current is not None and current.partition == partition:
            current.produced_bytes += size_bytes
