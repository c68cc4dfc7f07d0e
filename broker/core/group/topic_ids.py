"""A KIP-848 member's partitions by topic id (KIP-516), as Kafka's ConsumerGroupHeartbeat
names them, to and from the coordinator's topic names. Pure: the metadata cache is asked."""

from __future__ import annotations

import dataclasses
from typing import Protocol

from protocol.messages.consumer_group_heartbeat import TopicPartitions

__all__ = ["TopicIds", "named_partitions", "with_topic_ids"]


class TopicIds(Protocol):
    def topic_id(self, name: str) -> str: ...

    def topic_name(self, topic_id: str) -> str | None: ...


def named_partitions(
    partitions: tuple[TopicPartitions, ...], ids: TopicIds
) -> tuple[TopicPartitions, ...]:
    """Each entry named by its topic: an id no topic has (deleted meanwhile) is left out, as
    the member cannot own partitions of a topic that is gone."""
    out = []
    for entry in partitions:
        name = entry.topic or ids.topic_name(entry.topic_id)
        if name is not None:
            out.append(dataclasses.replace(entry, topic=name))
    return tuple(out)


def with_topic_ids(
    partitions: tuple[TopicPartitions, ...], ids: TopicIds
) -> tuple[TopicPartitions, ...]:
    return tuple(dataclasses.replace(e, topic_id=ids.topic_id(e.topic)) for e in partitions)
