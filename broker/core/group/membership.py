"""ConsumerGroupHeartbeat's decision for one group (Kafka's
GroupMetadataManager.consumerGroupHeartbeat): join, leave, fence, subscription changes, a new
target assignment when the group epoch moves, then the member's next step towards it."""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, Final, NoReturn

import re2

from broker.core.group.assignors import ASSIGNORS, DEFAULT_ASSIGNOR, assign
from broker.core.group.model import Assignment, Group, Member
from broker.core.group.reconcile import reconcile
from protocol.errors import ErrorCode
from protocol.messages.consumer_group_heartbeat import (
    JOIN_EPOCH,
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroupHeartbeatRequest,
)
from protocol.topic_partition import INTERNAL_TOPICS, TopicPartition

__all__ = [
    "HeartbeatRefused",
    "MayDescribe",
    "MemberUpdate",
    "apply_heartbeat",
    "assignor_of",
    "remove",
    "subscription_metadata",
    "with_target",
]

MAX_REGEX_CHARS: Final = 1000
MAX_NAME_CHARS: Final = 255  # member/instance/rack/client ids, assignor and topic names
MAX_SUBSCRIBED_TOPICS: Final = 1000
# Regex subscriptions use RE2 (as Kafka uses RE2J): matching is linear in the topic name, so
# no pattern can make the coordinator backtrack for ever; RE2's syntax is Kafka's.
_RE2_OPTIONS: Final = re2.Options()
_RE2_OPTIONS.log_errors = False  # a bad pattern is the client's error, answered, not logged


# Whether a member's principal may DESCRIBE a topic (the shell asks the authorizer; None:
# anyone may, no authorizer). A regex subscription resolves only over such topics (Kafka's
# KIP-848 regexes; the member learns nothing of the others).
MayDescribe = Callable[[Member, str], bool]


class HeartbeatRefused(Exception):
    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code


@dataclass(frozen=True, slots=True)
class MemberUpdate:
    group: Group
    member: Member | None  # None: it left
    send_assignment: bool


def apply_heartbeat(
    group: Group,
    request: ConsumerGroupHeartbeatRequest,
    topics: Mapping[str, int],
    *,
    wall_ms: int,
    client_host: str,
    new_member_id: Callable[[], str],
    max_group_size: int,
    principal: str = "",
    may_describe: MayDescribe | None = None,
    classic: bool = False,
) -> MemberUpdate:
    """The group after this heartbeat; HeartbeatRefused with Kafka's error otherwise.
    `topics`: topic -> partition count, as the broker's metadata has them; `principal` sent
    the heartbeat; `classic`: it stands for a JoinGroup (a member joining is marked so)."""
    _check_fields(request)
    epoch = request.member_epoch
    if epoch == JOIN_EPOCH:
        group, member = _join(group, request, wall_ms, client_host, new_member_id, max_group_size)
    elif epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
        return _leave(group, request, wall_ms)
    else:
        member = _known(group, request)
    updated = _with_request_fields(member, request, client_host)
    if principal:
        updated = replace(updated, principal=principal)
    if epoch == JOIN_EPOCH:
        updated = replace(updated, classic=classic)
    group = _put(group, updated)
    metadata = subscription_metadata(group, topics, may_describe)
    if (
        epoch == JOIN_EPOCH
        or _subscription(updated) != _subscription(member)
        or metadata != group.subscription_metadata
    ):  # one new group epoch per heartbeat, whatever changed
        group = replace(group, subscription_metadata=metadata, group_epoch=group.group_epoch + 1)
    group = with_target(group, may_describe)
    reported = _reported(request)
    others = {tp for m in group.members.values() if m.member_id != updated.member_id
              for tp in m.owns()}  # fmt: skip
    target = group.target.get(updated.member_id, frozenset())
    after = reconcile(updated, group.assignment_epoch, target, others, reported)
    group = _put(group, after)
    send = (
        epoch == JOIN_EPOCH
        or after.assigned != member.assigned
        or (reported is not None and reported != after.assigned)
    )
    return MemberUpdate(group, after, send)


def remove(group: Group, member_id: str, wall_ms: int) -> Group:
    """The group without `member_id` (left, or fenced by a timeout): a new group epoch.
    `wall_ms` (the wall clock) is kept as when the group became empty (offsets retention)."""
    members = {m: v for m, v in group.members.items() if m != member_id}
    target = {m: a for m, a in group.target.items() if m != member_id}
    return replace(
        group,
        members=members,
        target=target,
        group_epoch=group.group_epoch + 1,
        empty_since_ms=wall_ms if not members else -1,
        classic=all(m.classic for m in members.values()) if members else group.classic,
    )


def subscription_metadata(
    group: Group, topics: Mapping[str, int], may_describe: MayDescribe | None = None
) -> dict[str, int]:
    """topic -> partition count, over the existing topics any member subscribes to."""
    out: dict[str, int] = {}
    for member in group.members.values():
        for topic in _topics_of(member, topics, may_describe):
            out[topic] = topics[topic]
    return out


def with_target(group: Group, may_describe: MayDescribe | None = None) -> Group:
    """A new target assignment if the group epoch moved past the assignment epoch."""
    if group.group_epoch <= group.assignment_epoch and group.target.keys() == group.members.keys():
        return group
    counts = group.subscription_metadata
    subscriptions = {
        m.member_id: frozenset(_topics_of(m, counts, may_describe)) for m in group.members.values()
    }
    target = assign(assignor_of(group), subscriptions, counts, group.target)
    return replace(group, target=target, assignment_epoch=group.group_epoch)


# -- the steps ---------------------------------------------------------------------------------


def _check_fields(request: ConsumerGroupHeartbeatRequest) -> None:
    """Kafka's ConsumerGroupHeartbeat request checks, and bounds on what a member stores (the
    group is one record of __consumer_offsets: it must stay well under message.max.bytes)."""

    def refuse(message: str) -> NoReturn:
        raise HeartbeatRefused(ErrorCode.INVALID_REQUEST, message)

    epoch = request.member_epoch
    if epoch < STATIC_LEAVE_EPOCH:
        refuse(f"member_epoch {epoch} is not valid")
    if epoch > JOIN_EPOCH and not request.member_id:
        refuse("member_id is required with a member_epoch above 0")
    if epoch == STATIC_LEAVE_EPOCH and request.instance_id is None:
        refuse("member_epoch -2 (a static member leaving) needs instance_id")
    if request.instance_id == "":
        refuse("instance_id cannot be empty")
    for name in ("member_id", "instance_id", "rack_id", "client_id", "server_assignor"):
        value = getattr(request, name)
        if value is not None and len(value) > MAX_NAME_CHARS:
            refuse(f"{name} over {MAX_NAME_CHARS} characters")
    names = request.subscribed_topic_names
    if names is not None and (
        len(names) > MAX_SUBSCRIBED_TOPICS or any(len(t) > MAX_NAME_CHARS for t in names)
    ):
        refuse(
            f"at most {MAX_SUBSCRIBED_TOPICS} subscribed topics of at most {MAX_NAME_CHARS} "
            "characters"
        )


def _join(
    group: Group,
    request: ConsumerGroupHeartbeatRequest,
    wall_ms: int,
    client_host: str,
    new_member_id: Callable[[], str],
    max_group_size: int,
) -> tuple[Group, Member]:
    if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
        raise HeartbeatRefused(
            ErrorCode.INVALID_REQUEST, "joining needs subscribed_topic_names or a regex"
        )
    if request.rebalance_timeout_ms <= 0:
        raise HeartbeatRefused(ErrorCode.INVALID_REQUEST, "joining needs rebalance_timeout_ms")
    if request.topic_partitions is None or request.topic_partitions:
        raise HeartbeatRefused(
            ErrorCode.INVALID_REQUEST, "topic_partitions must be set, and empty, when joining"
        )
    member_id = request.member_id or new_member_id()
    previous: Member | None = None
    if request.instance_id is not None:
        previous = group.member_by_instance(request.instance_id)
        if (
            previous is not None
            and not previous.left_static
            and (previous.member_id != request.member_id)
        ):
            raise HeartbeatRefused(
                ErrorCode.UNRELEASED_INSTANCE_ID,
                f"instance {request.instance_id!r} is still held by a member",
            )
    if previous is not None:  # a static member back: it takes its predecessor's assignment
        group = replace(
            group,
            members={m: v for m, v in group.members.items() if m != previous.member_id},
            target={
                (member_id if m == previous.member_id else m): a for m, a in group.target.items()
            },
        )
        member = replace(previous, member_id=member_id, left_static=False)
        return group, member
    if member_id in group.members:  # a rejoin under the same id: it starts over
        group = remove(group, member_id, wall_ms)
    if len(group.members) >= max_group_size:
        raise HeartbeatRefused(
            ErrorCode.GROUP_MAX_SIZE_REACHED, f"the group has {max_group_size} members"
        )
    return group, Member(member_id, member_epoch=0)


def _leave(group: Group, request: ConsumerGroupHeartbeatRequest, wall_ms: int) -> MemberUpdate:
    member = group.members.get(request.member_id)
    if member is None:
        raise HeartbeatRefused(ErrorCode.UNKNOWN_MEMBER_ID, "not a member of the group")
    if request.member_epoch == STATIC_LEAVE_EPOCH and member.instance_id is not None:
        gone = replace(member, left_static=True)
        return MemberUpdate(_put(group, gone), gone, False)
    return MemberUpdate(remove(group, member.member_id, wall_ms), None, False)


def _known(group: Group, request: ConsumerGroupHeartbeatRequest) -> Member:
    member = group.members.get(request.member_id)
    if member is None or member.left_static:
        raise HeartbeatRefused(ErrorCode.UNKNOWN_MEMBER_ID, "not a member of the group")
    if request.member_epoch != member.member_epoch:
        reported = _reported(request)
        # An answer that got lost: the member still has the epoch before (Kafka accepts it
        # when what it owns is within its assignment).
        if not (
            request.member_epoch == member.previous_member_epoch
            and reported is not None
            and reported <= member.assigned
        ):
            raise HeartbeatRefused(
                ErrorCode.FENCED_MEMBER_EPOCH,
                f"member epoch {request.member_epoch}, the group has {member.member_epoch}",
            )
    return member


def _with_request_fields(
    member: Member, request: ConsumerGroupHeartbeatRequest, client_host: str
) -> Member:
    changes: dict[str, object] = {}
    if request.subscribed_topic_names is not None:
        changes["subscribed_topic_names"] = tuple(sorted(set(request.subscribed_topic_names)))
    if request.subscribed_topic_regex is not None:
        changes["subscribed_topic_regex"] = _checked_regex(request.subscribed_topic_regex)
    if request.server_assignor is not None:
        if request.server_assignor not in ASSIGNORS:
            raise HeartbeatRefused(
                ErrorCode.UNSUPPORTED_ASSIGNOR,
                f"assignor {request.server_assignor!r}; the broker has {', '.join(ASSIGNORS)}",
            )
        changes["server_assignor"] = request.server_assignor
    if request.rebalance_timeout_ms > 0:
        changes["rebalance_timeout_ms"] = request.rebalance_timeout_ms
    if request.instance_id is not None:
        changes["instance_id"] = request.instance_id
    if request.client_id:
        changes["client_id"] = request.client_id
    if client_host:
        changes["client_host"] = client_host
    return replace(member, **changes) if changes else member  # type: ignore[arg-type]


def _checked_regex(pattern: str) -> str:
    if not pattern:
        return pattern  # "" clears a regex subscription
    if len(pattern) > MAX_REGEX_CHARS:
        raise HeartbeatRefused(
            ErrorCode.INVALID_REQUEST, f"subscribed_topic_regex over {MAX_REGEX_CHARS} chars"
        )
    try:
        _compiled(pattern)
    except re2.error as exc:
        reason = exc.args[0].decode(errors="replace") if exc.args else "invalid"
        raise HeartbeatRefused(
            ErrorCode.INVALID_REQUEST, f"subscribed_topic_regex (RE2 syntax): {reason}"
        ) from exc
    return pattern


def _subscription(member: Member) -> tuple[object, ...]:
    return (member.subscribed_topic_names, member.subscribed_topic_regex, member.server_assignor)


def _topics_of(
    member: Member, topics: Mapping[str, int], may_describe: MayDescribe | None
) -> list[str]:
    """The existing topics the member subscribes to: those it names (the handler checked
    DESCRIBE on each), and those its regex matches that its principal may describe."""
    found = [t for t in member.subscribed_topic_names if t in topics]
    if member.subscribed_topic_regex:
        pattern = _compiled(member.subscribed_topic_regex)
        found += [
            t for t in topics
            if t not in INTERNAL_TOPICS and t not in found and pattern.fullmatch(t)
            and (may_describe is None or may_describe(member, t))
        ]  # fmt: skip
    return found


_COMPILED: dict[str, Any] = {}  # pattern -> its compiled RE2


def _compiled(pattern: str) -> Any:
    compiled = _COMPILED.get(pattern)
    if compiled is None:
        if len(_COMPILED) > 1024:
            _COMPILED.clear()
        compiled = _COMPILED[pattern] = re2.compile(pattern, _RE2_OPTIONS)
    return compiled


def assignor_of(group: Group) -> str:
    """The assignor most members ask for (Kafka: the group's), else the default."""
    asked = Counter(m.server_assignor for m in group.members.values() if m.server_assignor)
    if not asked:
        return DEFAULT_ASSIGNOR
    return min(asked, key=lambda name: (-asked[name], name))


def _reported(request: ConsumerGroupHeartbeatRequest) -> Assignment | None:
    if request.topic_partitions is None:
        return None
    return frozenset(
        TopicPartition(t.topic, p) for t in request.topic_partitions for p in t.partitions
    )


def _put(group: Group, member: Member) -> Group:
    members = dict(group.members)
    members[member.member_id] = member
    classic = all(m.classic for m in members.values())
    return replace(group, members=members, empty_since_ms=-1, classic=classic)
