"""Whether a request's topic id and a log's agree (KIP-516), as Kafka's
ReplicaManager.hasConsistentTopicId: an id missing on either side ("" here, Kafka's None or
zero UUID) agrees with anything, so a request from before ids, or a log from before them,
is never refused for it."""

from __future__ import annotations

from protocol.topic_id import NO_TOPIC_ID

__all__ = ["has_consistent_topic_id"]


def has_consistent_topic_id(request_topic_id: str, log_topic_id: str) -> bool:
    if request_topic_id == NO_TOPIC_ID or log_topic_id == NO_TOPIC_ID:
        return True
    return request_topic_id == log_topic_id
