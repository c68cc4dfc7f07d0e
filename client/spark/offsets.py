"""Offset planning for the Spark source (pure: no pyspark, no IO).

Offsets travel through Spark's checkpoint as Spark's Kafka source writes them:
`{"topic": {"0": 23, "1": 7}}`, each the next offset to read. A micro-batch reads, per
partition, the range [start, end) with end at most the partition's high watermark.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Final

from protocol.topic_partition import TopicPartition

__all__ = [
    "EARLIEST",
    "LATEST",
    "OffsetRange",
    "PartitionOffsets",
    "TopicPartition",
    "from_json",
    "rate_limit",
    "split_ranges",
    "to_json",
]

EARLIEST: Final = -2  # as in Spark's Kafka offsets JSON and ListOffsets
LATEST: Final = -1


PartitionOffsets = dict[TopicPartition, int]


@dataclass(frozen=True)
class OffsetRange:
    """Offsets [start, end) of one partition: one Spark task reads them."""

    tp: TopicPartition
    start: int
    end: int

    @property
    def size(self) -> int:
        return self.end - self.start


def to_json(offsets: Mapping[TopicPartition, int]) -> dict[str, dict[str, int]]:
    """The checkpoint's form (topics and partitions sorted, so equal offsets print equally)."""
    out: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        out.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return out


def from_json(offsets: Mapping[str, Mapping[str, int]]) -> PartitionOffsets:
    return {
        TopicPartition(topic, int(partition)): int(offset)
        for topic, partitions in offsets.items()
        for partition, offset in partitions.items()
    }


def rate_limit(
    start: Mapping[TopicPartition, int], latest: Mapping[TopicPartition, int], max_rows: int
) -> PartitionOffsets:
    """End offsets reading at most `max_rows` records in all, shared by backlog.

    Each partition gets the floor of its share of max_rows (share = its backlog / total
    backlog); the rows left over go one each to the largest remainders (ties: the larger
    backlog first, then partition order). Unlike Spark's Kafka source, which rounds small
    shares up, the sum never exceeds max_rows; with max_rows >= 1 a batch with a backlog
    always reads something. Partitions missing from `start` read from `latest` (nothing).
    """
    backlog = {tp: max(0, end - start.get(tp, end)) for tp, end in latest.items()}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(latest)
    granted = {tp: size * max_rows // total for tp, size in backlog.items()}
    spare = max_rows - sum(granted.values())
    by_remainder = sorted(
        (tp for tp, size in backlog.items() if size > granted[tp]),
        key=lambda tp: (-(backlog[tp] * max_rows % total), -backlog[tp], tp),
    )
    for tp in by_remainder[:spare]:
        granted[tp] += 1
    # min(): a partition truncated below its start (backlog 0) ends at its new end.
    return {tp: min(start.get(tp, end), end) + granted[tp] for tp, end in latest.items()}


def split_ranges(ranges: Iterable[OffsetRange], min_partitions: int | None) -> list[OffsetRange]:
    """Spark tasks for these ranges: one per range, or with `min_partitions` more than the
    ranges, large ranges cut into pieces (each range gets a share of min_partitions in
    proportion to its size, at least one), as Spark's KafkaOffsetRangeCalculator does."""
    nonempty = [r for r in ranges if r.size > 0]
    if min_partitions is None or min_partitions <= len(nonempty):
        return nonempty
    total = sum(r.size for r in nonempty)
    out: list[OffsetRange] = []
    for r in nonempty:
        share = r.size * min_partitions / total
        pieces = min(r.size, max(1, int(share + 0.5)))  # half up, as Java's Math.round
        for i in range(pieces):
            lo = r.start + r.size * i // pieces
            hi = r.start + r.size * (i + 1) // pieces
            out.append(OffsetRange(r.tp, lo, hi))
    return out
