"""Fetch (key 1): log bytes from a partition, for consumers (up to HW) and followers (up to LEO).

v1 adds fetch sessions (KIP-227): an incremental request names only the partitions whose
fetch parameters changed, and its response only the partitions with something new.
v2 adds topic ids (KIP-516): a topic may be named by id alone (`topic` ""), and the response
carries each topic's id.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from protocol.schema import Int8, Int16, Int32, Int64, Since

__all__ = [
    "CONSUMER_REPLICA_ID",
    "FINAL_EPOCH",
    "INITIAL_EPOCH",
    "INVALID_SESSION_ID",
    "EpochEndOffset",
    "FetchPartition",
    "FetchPartitionData",
    "FetchRequest",
    "FetchResponse",
    "FetchTopic",
    "FetchTopicResponse",
    "ForgottenTopic",
]

CONSUMER_REPLICA_ID = -1
# KIP-227's session ids and epochs (Kafka's FetchMetadata): session 0 is "no session"; epoch
# 0 asks for a new session with a full request, epoch -1 closes one (or asks for none).
INVALID_SESSION_ID = 0
INITIAL_EPOCH = 0
FINAL_EPOCH = -1


@dataclass(frozen=True, slots=True)
class FetchPartition:
    partition: Int32
    fetch_offset: Int64
    partition_max_bytes: Int32
    current_leader_epoch: Int32 = -1  # KIP-320 fencing; -1 skips the check
    log_start_offset: Int64 = -1  # followers report theirs
    last_fetched_epoch: Int32 = -1


@dataclass(frozen=True, slots=True)
class FetchTopic:
    topic: str  # "": named by topic_id
    partitions: tuple[FetchPartition, ...]
    topic_id: Annotated[str, Since(2)] = ""


@dataclass(frozen=True, slots=True)
class ForgottenTopic:
    """Partitions to drop from an incremental fetch session."""

    topic: str  # "": named by topic_id
    partitions: tuple[Int32, ...]
    topic_id: Annotated[str, Since(2)] = ""


@dataclass(frozen=True, slots=True)
class FetchRequest:
    replica_id: Int32  # broker id of a follower, -1 for a consumer
    max_wait_ms: Int32
    min_bytes: Int32
    max_bytes: Int32
    topics: tuple[FetchTopic, ...]
    isolation_level: Int8 = 0
    replica_epoch: Int64 = -1  # the follower's broker epoch
    session_id: Annotated[Int32, Since(1)] = INVALID_SESSION_ID
    session_epoch: Annotated[Int32, Since(1)] = FINAL_EPOCH  # the default: no session
    forgotten_topics_data: Annotated[tuple[ForgottenTopic, ...], Since(1)] = ()


@dataclass(frozen=True, slots=True)
class EpochEndOffset:
    epoch: Int32 = -1
    end_offset: Int64 = -1


@dataclass(frozen=True, slots=True)
class FetchPartitionData:
    partition_index: Int32
    error_code: Int16
    high_watermark: Int64
    log_start_offset: Int64
    records: bytes  # whole record batches, served from the log without re-encoding
    last_stable_offset: Int64 = -1
    diverging_epoch: EpochEndOffset | None = None
    current_leader_epoch: Int32 = -1


@dataclass(frozen=True, slots=True)
class FetchTopicResponse:
    topic: str
    partitions: tuple[FetchPartitionData, ...]
    topic_id: Annotated[str, Since(2)] = ""  # set when the request named topics by id


@dataclass(frozen=True, slots=True)
class FetchResponse:
    error_code: Int16
    responses: tuple[FetchTopicResponse, ...]
    throttle_time_ms: Int32 = 0
    session_id: Annotated[Int32, Since(1)] = INVALID_SESSION_ID  # the session now in use
