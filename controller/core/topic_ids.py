"""Topic IDs (KIP-516) the controller still has to assign. Pure: the ids come from the caller.

Kafka's controller gives an id to every topic whose znode has none when it becomes
controller and when topics change (KafkaController.processTopicIds): topics created before
topic ids, or by a broker that predates them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

__all__ = ["missing_topic_ids"]


def missing_topic_ids(
    topic_ids: Mapping[str, str | None], new_id: Callable[[], str]
) -> dict[str, str]:
    """topic -> a new id, for each topic whose id is None (in name order); the rest keep
    theirs, never replaced (clients and logs would lose track of the topic)."""
    return {topic: new_id() for topic in sorted(topic_ids) if topic_ids[topic] is None}
