"""The purgatory's keys: what a parked request waits for, so that a change wakes only the
requests it may complete (docs/architecture.md, "The purgatory").

A follower's (or the debug consumer's) fetch reads to the log end: an append may answer it.
A consumer's fetch reads to the high watermark, and an acks=all produce waits for the high
watermark: only the high watermark moving may answer them. Anything else about a partition
(leadership, the ISR, deletion, a failed log directory) wakes both.
"""

from __future__ import annotations

from protocol.topic_partition import TopicPartition

__all__ = ["PartitionKey", "high_watermark_key", "log_end_key", "partition_keys"]

PartitionKey = tuple[str, TopicPartition]


def log_end_key(tp: TopicPartition) -> PartitionKey:
    """Records were appended to `tp`'s log."""
    return ("log_end", tp)


def high_watermark_key(tp: TopicPartition) -> PartitionKey:
    """`tp`'s high watermark moved."""
    return ("high_watermark", tp)


def partition_keys(tp: TopicPartition) -> tuple[PartitionKey, PartitionKey]:
    """Something else about `tp` changed: every request parked on it looks again."""
    return ("log_end", tp), ("high_watermark", tp)
