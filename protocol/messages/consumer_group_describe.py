"""ConsumerGroupDescribe (key 69, KIP-848): groups' state, epochs, assignor and members.

v1, as Kafka's: each member's type (a classic JoinGroup member or a consumer-protocol one,
KIP-1099), and its partitions carry their topic's id (KIP-516)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Final

from protocol.messages.consumer_group_heartbeat import TopicPartitions
from protocol.schema import Int8, Int16, Int32, Since

__all__ = [
    "CLASSIC_MEMBER",
    "CONSUMER_MEMBER",
    "UNKNOWN_MEMBER_TYPE",
    "ConsumerGroupDescribeRequest",
    "ConsumerGroupDescribeResponse",
    "DescribedGroup",
    "DescribedMember",
]

UNKNOWN_MEMBER_TYPE: Final = -1
CLASSIC_MEMBER: Final = 0  # joined with JoinGroup
CONSUMER_MEMBER: Final = 1  # joined with ConsumerGroupHeartbeat


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
    member_type: Annotated[Int8, Since(1)] = UNKNOWN_MEMBER_TYPE


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
