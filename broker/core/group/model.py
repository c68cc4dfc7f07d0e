"""A consumer group as the coordinator holds it: members, epochs, target assignment (Kafka's
ConsumerGroup and ConsumerGroupMember), and a committed offset."""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from protocol.topic_partition import TopicPartition

__all__ = [
    "Assignment",
    "Group",
    "GroupState",
    "Member",
    "MemberState",
    "OffsetValue",
    "by_topic",
]

Assignment = frozenset[TopicPartition]


class MemberState(enum.StrEnum):
    """Kafka's MemberState: where a member is on its way to its target assignment."""

    STABLE = "stable"
    UNREVOKED_PARTITIONS = "unrevoked_partitions"  # waits for the member to let go of some
    UNRELEASED_PARTITIONS = "unreleased_partitions"  # waits for others to let go of some


class GroupState(enum.StrEnum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"  # a new group epoch: the target assignment is being computed
    RECONCILING = "Reconciling"  # members are moving to the target assignment
    STABLE = "Stable"
    DEAD = "Dead"  # unknown (described, never stored)


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    member_epoch: int
    previous_member_epoch: int = -1
    state: MemberState = MemberState.STABLE
    instance_id: str | None = None
    client_id: str = ""
    client_host: str = ""
    rebalance_timeout_ms: int = 300_000
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    assigned: Assignment = frozenset()
    pending_revocation: Assignment = frozenset()  # assigned before, to be let go of
    left_static: bool = False  # a static member gone for now (epoch -2): its assignment waits
    # Who sent its last heartbeat (a Kafka principal, "User:alice"; "" before one was
    # recorded): its regex resolves only over topics this principal may DESCRIBE.
    principal: str = ""
    # Joined with JoinGroup (broker.core.group.classic), not ConsumerGroupHeartbeat: Kafka's
    # ConsumerGroupMember.useClassicProtocol(); ConsumerGroupDescribe v1's member_type 0.
    classic: bool = False

    def owns(self) -> Assignment:
        """What no other member may be given: what it has and what it is still letting go."""
        return self.assigned | self.pending_revocation


@dataclass(frozen=True, slots=True)
class Group:
    group_id: str
    group_epoch: int = 0
    assignment_epoch: int = 0
    members: Mapping[str, Member] = field(default_factory=dict)
    target: Mapping[str, Assignment] = field(default_factory=dict)  # at assignment_epoch
    # topic -> partition count, as the subscriptions saw them at group_epoch
    subscription_metadata: Mapping[str, int] = field(default_factory=dict)
    empty_since_ms: int = -1  # when the last member left (offsets expire from then on)
    # Kafka 4.0's group type: classic while every member joined by JoinGroup (a consumer-
    # protocol member upgrades it, its last one leaving downgrades it); kept once empty.
    classic: bool = False

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        for member in self.members.values():
            if member.member_epoch != self.assignment_epoch or member.state != MemberState.STABLE:
                return GroupState.RECONCILING
        return GroupState.STABLE

    def member_by_instance(self, instance_id: str) -> Member | None:
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def subscribed_topics(self) -> frozenset[str]:
        """Topics some member names (regex subscriptions resolve into subscription_metadata)."""
        return frozenset(self.subscription_metadata)

    def owners(self) -> dict[TopicPartition, str]:
        """Partition -> the member that owns it (assigned or being revoked)."""
        return {tp: m.member_id for m in self.members.values() for tp in m.owns()}


@dataclass(frozen=True, slots=True)
class OffsetValue:
    offset: int
    leader_epoch: int = -1
    metadata: str | None = None
    commit_ms: int = 0


def by_topic(partitions: Iterable[TopicPartition]) -> dict[str, list[int]]:
    """Partitions grouped per topic, sorted: the wire's TopicPartitions shape."""
    out: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        out.setdefault(tp.topic, []).append(tp.partition)
    return out
