"""Classic group members (JoinGroup, SyncGroup, Heartbeat, LeaveGroup: Kafka clients on the
Kafka listener) hosted in a KIP-848 consumer group, as Kafka 4.0's GroupMetadataManager hosts
them (`classicGroupJoinToConsumerGroup`): each classic request becomes a
ConsumerGroupHeartbeat for the same core, so one group can mix both kinds of members and
assignment stays server-side. docs/kafka.md ("Consumer groups") has the mapping.

- JoinGroup: the member's subscription (ConsumerProtocolSubscription) becomes its topics, and
  what it says it owns its reported partitions; the generation is the member epoch; no member
  is the group's leader (no client computes an assignment).
- SyncGroup: the member's current assignment (ConsumerProtocolAssignment); a member still
  letting go of partitions is given what it keeps, which a cooperative client revokes.
- Heartbeat: REBALANCE_IN_PROGRESS once the member's assignment is no longer the one it was
  given (its epoch moved, it has partitions to let go or to receive), so it joins again.
Pure: the handlers in broker.handlers.classic_groups drive it, and so do the simulation's
classic members (tests/simulation/classic_shell.py). `Synced` is what each member was last
given at SyncGroup, which the shell keeps (not in the group's record: a new coordinator
has every member join again, as Kafka's classic members do after a coordinator move).
"""

from __future__ import annotations

from collections.abc import MutableMapping, Sequence
from dataclasses import dataclass
from typing import Final

from broker.core.group.model import Assignment, Group, Member, MemberState
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupHeartbeatRequest,
    TopicPartitions,
)
from protocol.topic_partition import TopicPartition

__all__ = [
    "CONSUMER_PROTOCOL_TYPE",
    "ClassicJoin",
    "Synced",
    "classic_heartbeat_answer",
    "classic_member",
    "forget_synced",
    "heartbeat_error",
    "join_heartbeat",
    "join_refusal",
    "keep_alive_heartbeat",
    "leave_heartbeat",
    "needs_rejoin",
    "server_assignor",
    "sync_group",
]

CONSUMER_PROTOCOL_TYPE: Final = "consumer"
# A classic client's assignor name -> the server-side assignor that stands in for it.
_ASSIGNORS: Final = {"range": "range"}
_DEFAULT_ASSIGNOR: Final = "uniform"


@dataclass(frozen=True, slots=True)
class ClassicJoin:
    """What a JoinGroup says, decoded."""

    group_id: str
    member_id: str
    instance_id: str | None
    rebalance_timeout_ms: int
    protocol_names: tuple[str, ...]  # the member's assignors, in its order of preference
    topics: tuple[str, ...]
    owned: tuple[TopicPartition, ...]
    client_id: str
    rack_id: str | None = None


def server_assignor(protocol_names: Sequence[str]) -> str:
    """The server-side assignor for a member's first choice: range for range, else uniform
    (roundrobin, sticky and cooperative-sticky all aim at an even spread)."""
    first = protocol_names[0] if protocol_names else ""
    return _ASSIGNORS.get(first, _DEFAULT_ASSIGNOR)


def join_heartbeat(join: ClassicJoin, known: Member | None) -> ConsumerGroupHeartbeatRequest:
    """The ConsumerGroupHeartbeat a JoinGroup stands for. A member the group knows rejoins at
    its epoch reporting what it owns; anyone else joins (epoch 0)."""
    joining = known is None or known.left_static
    if known is None:
        member_id, epoch = join.member_id, JOIN_EPOCH
    else:
        member_id, epoch = known.member_id, JOIN_EPOCH if joining else known.member_epoch
    return ConsumerGroupHeartbeatRequest(
        group_id=join.group_id,
        member_id=member_id,
        member_epoch=epoch,
        instance_id=join.instance_id,
        rack_id=join.rack_id,
        rebalance_timeout_ms=join.rebalance_timeout_ms,
        subscribed_topic_names=tuple(sorted(set(join.topics))),
        server_assignor=server_assignor(join.protocol_names),
        topic_partitions=() if joining else _wire(join.owned),
        client_id=join.client_id,
    )


def leave_heartbeat(group_id: str, member: Member) -> ConsumerGroupHeartbeatRequest:
    epoch = STATIC_LEAVE_EPOCH if member.instance_id is not None else LEAVE_EPOCH
    return ConsumerGroupHeartbeatRequest(group_id, member.member_id, epoch, member.instance_id)


def needs_rejoin(member: Member, generation_id: int, synced: Assignment | None) -> bool:
    """Whether a classic member heart-beating at `generation_id`, last given `synced` at
    SyncGroup (None: not known here), must join again to learn its assignment."""
    return (
        member.member_epoch != generation_id
        or member.state != MemberState.STABLE
        or synced is None
        or synced != member.assigned
    )


# (group id, member id) -> the assignment SyncGroup last gave the member.
Synced = MutableMapping[tuple[str, str], Assignment]


def classic_member(group: Group | None, member_id: str) -> Member | None:
    """The member a classic request names, if the group has it (a static member gone for now
    is not there)."""
    member = group.members.get(member_id) if group is not None and member_id else None
    return None if member is None or member.left_static else member


def join_refusal(known: Member | None, member_id: str, instance_id: str | None) -> int:
    """A JoinGroup naming a member id the group does not have is UNKNOWN_MEMBER_ID (the
    client starts again with no id), unless it is a static member's (KIP-345)."""
    if known is None and member_id and instance_id is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    return ErrorCode.NONE


def forget_synced(synced: Synced, group_id: str, member_id: str) -> None:
    """After a JoinGroup or a LeaveGroup: what the member was given no longer holds."""
    synced.pop((group_id, member_id), None)


def sync_group(
    synced: Synced, group_id: str, member: Member | None, generation_id: int
) -> tuple[int, Assignment]:
    """SyncGroup: the member's current assignment, remembered as what it was given."""
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID, frozenset()
    if generation_id != member.member_epoch:
        return ErrorCode.ILLEGAL_GENERATION, frozenset()
    synced[(group_id, member.member_id)] = member.assigned
    return ErrorCode.NONE, member.assigned


def keep_alive_heartbeat(group_id: str, member: Member) -> ConsumerGroupHeartbeatRequest:
    """The ConsumerGroupHeartbeat a classic Heartbeat stands for: at the member's epoch in
    the group (its generation may lag it), which keeps its session and lets its
    reconciliation go on."""
    return ConsumerGroupHeartbeatRequest(group_id, member.member_id, member.member_epoch)


def classic_heartbeat_answer(
    synced: Synced, group_id: str, member: Member | None, generation_id: int
) -> int:
    """A Heartbeat's answer once its keep-alive was written: whether the assignment the
    member has is still the one it was given."""
    if member is None:
        return ErrorCode.UNKNOWN_MEMBER_ID
    if needs_rejoin(member, generation_id, synced.get((group_id, member.member_id))):
        return ErrorCode.REBALANCE_IN_PROGRESS
    return ErrorCode.NONE


def heartbeat_error(code: int) -> int:
    """A KIP-848 error as the classic protocol names it: an epoch that no longer holds is an
    ILLEGAL_GENERATION to a classic member (it joins again)."""
    if code in (ErrorCode.FENCED_MEMBER_EPOCH, ErrorCode.STALE_MEMBER_EPOCH):
        return ErrorCode.ILLEGAL_GENERATION
    return code


def _wire(partitions: Sequence[TopicPartition]) -> tuple[TopicPartitions, ...]:
    by_topic: dict[str, list[int]] = {}
    for tp in partitions:
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return tuple(TopicPartitions(t, tuple(sorted(ps))) for t, ps in sorted(by_topic.items()))
