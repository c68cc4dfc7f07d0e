"""JoinGroup, SyncGroup, Heartbeat, LeaveGroup and DescribeGroups: the classic group protocol
of Kafka clients on a Kafka listener, one handler each, hosted in the KIP-848 coordinator
(broker.core.group.classic decides how; docs/kafka.md "Consumer groups"). Requests are kio's
classes; each handler answers with a dataclass the Kafka wire converts by field name.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.context import CLIENT_HOST, BrokerContext
from broker.core.group.classic import (
    CONSUMER_PROTOCOL_TYPE,
    ClassicJoin,
    classic_heartbeat_answer,
    classic_member,
    forget_synced,
    heartbeat_error,
    join_heartbeat,
    join_refusal,
    keep_alive_heartbeat,
    leave_heartbeat,
    sync_group,
)
from broker.core.group.membership import assignor_of
from broker.core.group.model import GroupState, Member
from protocol.acl import AclOperation, ResourceType
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode, HighwaterError
from protocol.kafka.consumer_protocol import (
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from protocol.messages.consumer_group_heartbeat import ConsumerGroupHeartbeatRequest

if TYPE_CHECKING:
    from broker.services import Groups

__all__ = [
    "handle_describe_groups",
    "handle_heartbeat",
    "handle_join_group",
    "handle_leave_group",
    "handle_sync_group",
]

_NO_OPERATIONS = -(2**31)  # authorized_operations not asked for


@dataclass(frozen=True, slots=True)
class JoinGroupResult:
    error_code: int
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str = ""
    leader: str = ""  # no member leads: the coordinator assigns
    member_id: str = ""
    members: tuple[Any, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class SyncGroupResult:
    error_code: int
    assignment: bytes = b""
    protocol_type: str | None = None
    protocol_name: str | None = None
    throttle_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class HeartbeatResult:
    error_code: int
    throttle_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class LeftMember:
    member_id: str
    group_instance_id: str | None
    error_code: int


@dataclass(frozen=True, slots=True)
class LeaveGroupResult:
    error_code: int
    members: tuple[LeftMember, ...] = ()
    throttle_time_ms: int = 0


@dataclass(frozen=True, slots=True)
class DescribedClassicMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    member_metadata: bytes
    member_assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedClassicGroup:
    error_code: int
    group_id: str
    group_state: str = "Dead"
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedClassicMember, ...] = ()
    authorized_operations: int = _NO_OPERATIONS


@dataclass(frozen=True, slots=True)
class DescribeGroupsResult:
    groups: tuple[DescribedClassicGroup, ...]
    throttle_time_ms: int = 0


# The classic states tools expect, for the KIP-848 group's (Kafka 4.0 reports these too).
_CLASSIC_STATES = {
    GroupState.EMPTY: "Empty",
    GroupState.ASSIGNING: "PreparingRebalance",
    GroupState.RECONCILING: "CompletingRebalance",
    GroupState.STABLE: "Stable",
    GroupState.DEAD: "Dead",
}


def _coordinator(ctx: BrokerContext, group_id: str) -> tuple[Groups | None, int]:
    """The coordinator if this broker coordinates `group_id` and the caller may READ it."""
    if not ctx.authorize(AclOperation.READ, ResourceType.GROUP, group_id):
        return None, ErrorCode.GROUP_AUTHORIZATION_FAILED
    coordinator = ctx.group_coordinator
    if not coordinator.active:
        return None, ErrorCode.COORDINATOR_NOT_AVAILABLE
    code = coordinator.core.check(group_id)
    return (coordinator, ErrorCode.NONE) if code == ErrorCode.NONE else (None, code)


def _member(coordinator: Groups, group_id: str, member_id: str) -> Member | None:
    return classic_member(coordinator.core.groups.get(group_id), member_id)


async def _heartbeat(
    ctx: BrokerContext,
    coordinator: Groups,
    request: ConsumerGroupHeartbeatRequest,
    *,
    classic: bool = False,
) -> Any:
    decision = coordinator.core.heartbeat(
        request,
        coordinator.topics(),
        ctx.now_ms(),
        CLIENT_HOST.get(),
        wall_ms=ctx.wall_ms(),
        classic=classic,
    )
    return await coordinator.write(decision)


async def handle_join_group(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    coordinator, code = _coordinator(ctx, request.group_id)
    if coordinator is None:
        return JoinGroupResult(code)
    if request.protocol_type != CONSUMER_PROTOCOL_TYPE or not request.protocols:
        # Connect, Streams or a custom client-side assignor: not hosted here (docs/kafka.md).
        return JoinGroupResult(ErrorCode.INCONSISTENT_GROUP_PROTOCOL)
    try:
        subscription = decode_subscription(bytes(request.protocols[0].metadata))
    except HighwaterError as exc:
        return JoinGroupResult(exc.code)
    hidden = [
        t
        for t in subscription.topics
        if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.TOPIC, t)
    ]
    if hidden:
        return JoinGroupResult(ErrorCode.TOPIC_AUTHORIZATION_FAILED)
    instance_id = getattr(request, "group_instance_id", None)
    known = _member(coordinator, request.group_id, request.member_id)
    refusal = join_refusal(known, request.member_id, instance_id)
    if refusal != ErrorCode.NONE:
        return JoinGroupResult(refusal)
    join = ClassicJoin(
        group_id=request.group_id,
        member_id="" if known is None else known.member_id,
        instance_id=instance_id,
        rebalance_timeout_ms=int(
            getattr(request, "rebalance_timeout", request.session_timeout).total_seconds() * 1000
        ),
        protocol_names=tuple(p.name for p in request.protocols),
        topics=subscription.topics,
        owned=subscription.owned,
        client_id=header.client_id or "",
        rack_id=subscription.rack_id,
    )
    response = await _heartbeat(ctx, coordinator, join_heartbeat(join, known), classic=True)
    if response.error_code != ErrorCode.NONE:
        return JoinGroupResult(heartbeat_error(response.error_code))
    member = _member(coordinator, request.group_id, response.member_id)
    if member is None:  # removed meanwhile (its session ran out): it joins again
        return JoinGroupResult(ErrorCode.UNKNOWN_MEMBER_ID)
    forget_synced(coordinator.classic_synced, request.group_id, member.member_id)
    return JoinGroupResult(
        ErrorCode.NONE,
        generation_id=member.member_epoch,
        protocol_type=CONSUMER_PROTOCOL_TYPE,
        protocol_name=request.protocols[0].name,
        member_id=member.member_id,
    )


async def handle_sync_group(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    coordinator, code = _coordinator(ctx, request.group_id)
    if coordinator is None:
        return SyncGroupResult(code)
    member = _member(coordinator, request.group_id, request.member_id)
    code, assignment = sync_group(
        coordinator.classic_synced, request.group_id, member, request.generation_id
    )
    if code != ErrorCode.NONE:
        return SyncGroupResult(code)
    return SyncGroupResult(
        ErrorCode.NONE,
        encode_assignment(assignment),
        CONSUMER_PROTOCOL_TYPE,
        getattr(request, "protocol_name", None),
    )


async def handle_heartbeat(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    coordinator, code = _coordinator(ctx, request.group_id)
    if coordinator is None:
        return HeartbeatResult(code)
    member = _member(coordinator, request.group_id, request.member_id)
    if member is None:
        return HeartbeatResult(ErrorCode.UNKNOWN_MEMBER_ID)
    response = await _heartbeat(ctx, coordinator, keep_alive_heartbeat(request.group_id, member))
    if response.error_code != ErrorCode.NONE:
        return HeartbeatResult(heartbeat_error(response.error_code))
    member = _member(coordinator, request.group_id, request.member_id)
    return HeartbeatResult(
        classic_heartbeat_answer(
            coordinator.classic_synced, request.group_id, member, request.generation_id
        )
    )


async def handle_leave_group(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    coordinator, code = _coordinator(ctx, request.group_id)
    if coordinator is None:
        return LeaveGroupResult(code)
    identities = getattr(request, "members", None)
    if identities is None:  # v0-2: one member
        identities = (_Identity(request.member_id, None),)
    results = []
    for identity in identities:
        member = _member(coordinator, request.group_id, identity.member_id)
        if member is None and identity.group_instance_id is not None:
            group = coordinator.core.groups.get(request.group_id)
            member = group.member_by_instance(identity.group_instance_id) if group else None
        if member is None:
            results.append(
                LeftMember(
                    identity.member_id, identity.group_instance_id, ErrorCode.UNKNOWN_MEMBER_ID
                )
            )
            continue
        response = await _heartbeat(ctx, coordinator, leave_heartbeat(request.group_id, member))
        forget_synced(coordinator.classic_synced, request.group_id, member.member_id)
        results.append(
            LeftMember(
                member.member_id, identity.group_instance_id, heartbeat_error(response.error_code)
            )
        )
    if len(results) == 1 and getattr(request, "members", None) is None:
        return LeaveGroupResult(results[0].error_code)
    return LeaveGroupResult(ErrorCode.NONE, tuple(results))


@dataclass(frozen=True, slots=True)
class _Identity:
    member_id: str
    group_instance_id: str | None


async def handle_describe_groups(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    return DescribeGroupsResult(tuple(_describe(ctx, g) for g in dict.fromkeys(request.groups)))


def _describe(ctx: BrokerContext, group_id: str) -> DescribedClassicGroup:
    if not ctx.authorize(AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
        return DescribedClassicGroup(ErrorCode.GROUP_AUTHORIZATION_FAILED, group_id)
    coordinator = ctx.group_coordinator
    if not coordinator.active:
        return DescribedClassicGroup(ErrorCode.COORDINATOR_NOT_AVAILABLE, group_id)
    code = coordinator.core.check(group_id)
    if code != ErrorCode.NONE:
        return DescribedClassicGroup(code, group_id)
    group = coordinator.core.groups.get(group_id)
    if group is None:
        state = "Empty" if group_id in coordinator.core.offsets else "Dead"
        return DescribedClassicGroup(ErrorCode.NONE, group_id, state, CONSUMER_PROTOCOL_TYPE)
    members = tuple(
        DescribedClassicMember(
            m.member_id,
            m.instance_id,
            m.client_id,
            m.client_host,
            encode_subscription(m.subscribed_topic_names),
            encode_assignment(m.assigned),
        )
        for m in sorted(group.members.values(), key=lambda m: m.member_id)
        if not m.left_static
    )
    return DescribedClassicGroup(
        ErrorCode.NONE,
        group_id,
        _CLASSIC_STATES[group.state],
        CONSUMER_PROTOCOL_TYPE,
        # Kafka's GroupMetadata.summary names the protocol only of a Stable group ("" else).
        assignor_of(group) if group.state is GroupState.STABLE else "",
        members,
    )
