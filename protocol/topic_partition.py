"""`TopicPartition`: the one name for "partition P of topic T" in every package.

A NamedTuple, so it is as cheap as the plain `(topic, partition)` tuple it replaces and
compares and hashes equal to one.
"""

from __future__ import annotations

from typing import Final, NamedTuple

__all__ = ["INTERNAL_TOPICS", "OFFSETS_TOPIC", "TopicPartition"]

OFFSETS_TOPIC: Final = "__consumer_offsets"  # the group coordinator's (docs/groups.md)
INTERNAL_TOPICS: Final = frozenset({OFFSETS_TOPIC})  # written by brokers only


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
