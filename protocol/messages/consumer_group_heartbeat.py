"""ConsumerGroupHeartbeat (key 68, KIP-848): join, stay in and leave a consumer group; the
coordinator answers with the member's epoch and, when it changed, its assignment.

v1 adds topic ids (KIP-516) to the partitions: a member's owned partitions may name their
topic by id alone (`topic` ""), and the assignment carries each topic's id, as Kafka's
ConsumerGroupHeartbeat does."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from protocol.schema import Int16, Int32, Since

__all__ = [
    "JOIN_EPOCH",
    "LEAVE_EPOCH",
    "STATIC_LEAVE_EPOCH",
    "ConsumerGroupHeartbeatRequest",
    "ConsumerGroupHeartbeatResponse",
    "HeartbeatAssignment",
    "TopicPartitions",
]

JOIN_EPOCH = 0  # member_epoch of a member joining (or rejoining after being fenced)
LEAVE_EPOCH = -1  # leaving the group for good
STATIC_LEAVE_EPOCH = -2  # a static member leaving for now: its assignment waits for it


@dataclass(frozen=True, slots=True)
class TopicPartitions:
    topic: str  # "": named by topic_id (v1)
    partitions: tuple[Int32, ...]
    topic_id: Annotated[str, Since(1)] = ""


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatRequest:
    group_id: str
    member_id: str  # "" to join: the coordinator names the member
    member_epoch: Int32
    instance_id: str | None = None  # group.instance.id: static membership (KIP-345)
    rack_id: str | None = None
    # The fields below are None when unchanged since the last heartbeat (always sent on join).
    rebalance_timeout_ms: Int32 = -1  # max.poll.interval.ms
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None  # "uniform" (default), "range"
    topic_partitions: tuple[TopicPartitions, ...] | None = None  # what the member owns now
    client_id: str = ""


@dataclass(frozen=True, slots=True)
class HeartbeatAssignment:
    topic_partitions: tuple[TopicPartitions, ...]


@dataclass(frozen=True, slots=True)
class ConsumerGroupHeartbeatResponse:
    error_code: Int16
    error_message: str | None = None
    member_id: str | None = None
    member_epoch: Int32 = -1
    heartbeat_interval_ms: Int32 = 0
    assignment: HeartbeatAssignment | None = None  # None: keep what you have
    throttle_time_ms: Int32 = 0
