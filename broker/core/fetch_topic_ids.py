"""Fetch by topic id (KIP-516: Kafka's Fetch v13+): ids to names before the fetch, and the
ids back into the answer. Pure: the metadata cache's look-ups are passed in.

A fetch session (KIP-227) then holds the topics by name, as the log does; a topic deleted
and created again under the same name has a new id, so a request naming the old id gets
UNKNOWN_TOPIC_ID, as Kafka answers an id it does not know. A log stores its topic's id
(partition.metadata): a known id that is not the log's gets INCONSISTENT_TOPIC_ID.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable

from broker.core.topic_id_check import has_consistent_topic_id
from protocol.errors import ErrorCode
from protocol.messages.fetch import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
)
from protocol.topic_id import NO_TOPIC_ID
from protocol.topic_partition import TopicPartition

__all__ = ["names_topics_by_id", "resolve_topic_ids", "with_topic_ids"]


def names_topics_by_id(request: FetchRequest) -> bool:
    return any(t.topic_id for t in request.topics) or any(
        t.topic_id for t in request.forgotten_topics_data
    )


def resolve_topic_ids(
    request: FetchRequest,
    name_of: Callable[[str], str | None],
    log_topic_id: Callable[[TopicPartition], str] = lambda tp: NO_TOPIC_ID,
) -> tuple[FetchRequest, tuple[FetchTopicResponse, ...]]:
    """The request with every topic id replaced by its topic's name, and the answer for the
    topics whose id is unknown (UNKNOWN_TOPIC_ID for each partition asked) and for the
    partitions whose log (`log_topic_id`, "" if none here) holds another id
    (INCONSISTENT_TOPIC_ID, as Kafka's ReplicaManager.readFromLog). Those are not read. A
    forgotten topic whose id is unknown is dropped: the session cannot hold it."""
    topics = []
    unknown = []
    for topic in request.topics:
        if not topic.topic_id:
            topics.append(topic)
            continue
        name = name_of(topic.topic_id)
        if name is None:
            unknown.append(_refused(topic.topic_id, topic.partitions, ErrorCode.UNKNOWN_TOPIC_ID))
            continue
        inconsistent = tuple(
            p
            for p in topic.partitions
            if not has_consistent_topic_id(
                topic.topic_id, log_topic_id(TopicPartition(name, p.partition))
            )
        )
        if inconsistent:
            unknown.append(_refused(topic.topic_id, inconsistent, ErrorCode.INCONSISTENT_TOPIC_ID))
        readable = tuple(p for p in topic.partitions if p not in inconsistent)
        if readable or not inconsistent:
            topics.append(dataclasses.replace(topic, topic=name, partitions=readable))
    forgotten = []
    for gone in request.forgotten_topics_data:
        name = name_of(gone.topic_id) if gone.topic_id else gone.topic
        if name is not None:
            forgotten.append(dataclasses.replace(gone, topic=name))
    resolved = dataclasses.replace(
        request, topics=tuple(topics), forgotten_topics_data=tuple(forgotten)
    )
    return resolved, tuple(unknown)


def _refused(
    topic_id: str, partitions: Iterable[FetchPartition], code: ErrorCode
) -> FetchTopicResponse:
    answers = tuple(FetchPartitionData(p.partition, code, -1, -1, b"") for p in partitions)
    return FetchTopicResponse("", answers, topic_id)


def with_topic_ids(
    response: FetchResponse,
    id_of: Callable[[str], str],
    unknown: tuple[FetchTopicResponse, ...] = (),
) -> FetchResponse:
    """The answer with each topic's id, then the topics whose id was unknown (none after a
    top-level error, which answers no topic)."""
    topics = tuple(dataclasses.replace(t, topic_id=id_of(t.topic)) for t in response.responses)
    if response.error_code != ErrorCode.NONE:
        unknown = ()
    return dataclasses.replace(response, responses=topics + unknown)
