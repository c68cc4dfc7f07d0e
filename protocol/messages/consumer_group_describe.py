"""ConsumerGroupDescribe (key 69, KIP-848): groups' state, epochs, assignor and members."""

from __future__ import annotations

from dataclasses import dataclass

from protocol.messages.consumer_group_heartbeat import TopicPartitions
from protocol.schema import Int16, Int32

__all__ = [
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "DescribedGroup",
    "DescribedMember",
]


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeRequest:
    group_ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    member_epoch: Int32
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[TopicPartitions, ...]  # what it owns now
    target_assignment: tuple[TopicPartitions, ...]  # what it will own once reconciled


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error_code: Int16
    error_message: str | None = None
    group_state: str = ""  # Empty, Assigning, Reconciling, Stable, Dead
    group_epoch: Int32 = -1
    assignment_epoch: Int32 = -1
    assignor_name: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ConsumerGroupDescribeResponse:
    groups: tuple[DescribedGroup, ...]
    throttle_time_ms: Int32 = 0
