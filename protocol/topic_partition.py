"""`TopicPartition`: the one name for "partition P of topic T" in every package.

A NamedTuple, so it is as cheap as the plain `(topic, partition)` tuple it replaces and
compares and hashes equal to one.
"""

from __future__ import annotations

from typing import NamedTuple

__all__ = ["TopicPartition"]


class TopicPartition(NamedTuple):
    topic: str
    partition: int

    def __str__(self) -> str:
        return f"{self.topic}-{self.partition}"
