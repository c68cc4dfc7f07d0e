"""The records of `__consumer_offsets` (Kafka's CoordinatorRecord types, simplified): one
record per committed offset, keyed (group, topic, partition), and one per group holding its
whole state, keyed (group). A tombstone (no value) deletes. The coordinator's state is
exactly the replay of its partitions' records (`replay`); keys and values are msgpack."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

import msgpack

from broker.core.group.model import Assignment, Group, Member, MemberState, OffsetValue
from protocol.topic_partition import TopicPartition

__all__ = [
    "GROUP_KEY",
    "OFFSET_KEY",
    "CoordinatorRecord",
    "decode_key",
    "group_record",
    "group_tombstone",
    "offset_record",
    "offset_tombstone",
    "replay",
]

OFFSET_KEY: Final = 0
GROUP_KEY: Final = 1
_VERSION: Final = 0

CoordinatorRecord = tuple[bytes, bytes | None]  # key, value (None: a tombstone)


def offset_record(group_id: str, tp: TopicPartition, value: OffsetValue) -> CoordinatorRecord:
    body = {
        "v": _VERSION,
        "offset": value.offset,
        "leader_epoch": value.leader_epoch,
        "metadata": value.metadata,
        "commit_ms": value.commit_ms,
    }
    return _pack([OFFSET_KEY, group_id, tp.topic, tp.partition]), _pack(body)


def offset_tombstone(group_id: str, tp: TopicPartition) -> CoordinatorRecord:
    return _pack([OFFSET_KEY, group_id, tp.topic, tp.partition]), None


def group_record(group: Group) -> CoordinatorRecord:
    body = {
        "v": _VERSION,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "subscription_metadata": dict(group.subscription_metadata),
        "empty_since_ms": group.empty_since_ms,
        "classic": group.classic,
        "members": [_member(m) for m in group.members.values()],
        "target": {m: _partitions(a) for m, a in group.target.items()},
    }
    return _pack([GROUP_KEY, group.group_id]), _pack(body)


def group_tombstone(group_id: str) -> CoordinatorRecord:
    return _pack([GROUP_KEY, group_id]), None


def decode_key(key: bytes) -> tuple[int, str, TopicPartition | None]:
    """(kind, group id, the partition of an offset record); ValueError if malformed."""
    plain = _unpack(key)
    if not isinstance(plain, list) or len(plain) < 2:
        raise ValueError("a coordinator record key is an array")
    if plain[0] == OFFSET_KEY and len(plain) == 4:
        _, group_id, topic, partition = plain
        if isinstance(group_id, str) and isinstance(topic, str) and isinstance(partition, int):
            return OFFSET_KEY, group_id, TopicPartition(topic, partition)
    elif plain[0] == GROUP_KEY and len(plain) == 2 and isinstance(plain[1], str):
        return GROUP_KEY, plain[1], None
    raise ValueError(f"unknown coordinator record key {plain!r:.80}")


def replay(
    groups: dict[str, Group],
    offsets: dict[str, dict[TopicPartition, OffsetValue]],
    key: bytes,
    value: bytes | None,
) -> str:
    """Apply one record to the coordinator's state; returns its group id. ValueError if the
    record is malformed (the state is then unchanged)."""
    kind, group_id, tp = decode_key(key)
    if kind == OFFSET_KEY:
        assert tp is not None
        if value is None:
            group_offsets = offsets.get(group_id, {})
            group_offsets.pop(tp, None)
            if not group_offsets:
                offsets.pop(group_id, None)
        else:
            offsets.setdefault(group_id, {})[tp] = _offset_value(_unpack(value))
    elif value is None:
        groups.pop(group_id, None)
    else:
        groups[group_id] = _group(group_id, _unpack(value))
    return group_id


# -- encoding helpers ------------------------------------------------------------------------


def _pack(plain: Any) -> bytes:
    packed: bytes = msgpack.packb(plain, use_bin_type=True)
    return packed


def _unpack(data: bytes) -> Any:
    try:
        return msgpack.unpackb(data, raw=False, strict_map_key=True, max_map_len=1_000_000)
    except (ValueError, TypeError, msgpack.exceptions.ExtraData) as exc:
        raise ValueError(f"undecodable coordinator record: {exc}") from exc


def _partitions(assignment: Assignment) -> list[list[Any]]:
    topics: dict[str, list[int]] = {}
    for tp in sorted(assignment):
        topics.setdefault(tp.topic, []).append(tp.partition)
    return [[t, ps] for t, ps in topics.items()]


def _assignment(plain: Any) -> Assignment:
    return frozenset(TopicPartition(str(t), int(p)) for t, ps in plain for p in ps)


def _member(m: Member) -> dict[str, Any]:
    return {
        "member_id": m.member_id,
        "member_epoch": m.member_epoch,
        "previous_member_epoch": m.previous_member_epoch,
        "state": m.state.value,
        "instance_id": m.instance_id,
        "client_id": m.client_id,
        "client_host": m.client_host,
        "rebalance_timeout_ms": m.rebalance_timeout_ms,
        "subscribed_topic_names": list(m.subscribed_topic_names),
        "subscribed_topic_regex": m.subscribed_topic_regex,
        "server_assignor": m.server_assignor,
        "assigned": _partitions(m.assigned),
        "pending_revocation": _partitions(m.pending_revocation),
        "left_static": m.left_static,
        "principal": m.principal,
        "classic": m.classic,
    }


def _group(group_id: str, body: Any) -> Group:
    try:
        members = {}
        for plain in body["members"]:
            member = Member(
                member_id=plain["member_id"],
                member_epoch=plain["member_epoch"],
                previous_member_epoch=plain["previous_member_epoch"],
                state=MemberState(plain["state"]),
                instance_id=plain["instance_id"],
                client_id=plain["client_id"],
                client_host=plain["client_host"],
                rebalance_timeout_ms=plain["rebalance_timeout_ms"],
                subscribed_topic_names=tuple(plain["subscribed_topic_names"]),
                subscribed_topic_regex=plain["subscribed_topic_regex"],
                server_assignor=plain["server_assignor"],
                assigned=_assignment(plain["assigned"]),
                pending_revocation=_assignment(plain["pending_revocation"]),
                left_static=plain["left_static"],
                principal=plain.get("principal", ""),  # absent from older records
                classic=plain.get("classic", False),  # likewise
            )
            members[member.member_id] = member
        target: Mapping[str, Assignment] = {m: _assignment(a) for m, a in body["target"].items()}
        return Group(
            group_id,
            group_epoch=body["group_epoch"],
            assignment_epoch=body["assignment_epoch"],
            members=members,
            target=target,
            subscription_metadata=dict(body["subscription_metadata"]),
            empty_since_ms=body["empty_since_ms"],
            classic=body.get("classic", False),  # absent from older records
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise ValueError(f"malformed group record for {group_id!r}: {exc!r}") from exc


def _offset_value(body: Any) -> OffsetValue:
    try:
        return OffsetValue(
            offset=int(body["offset"]),
            leader_epoch=int(body["leader_epoch"]),
            metadata=body["metadata"],
            commit_ms=int(body["commit_ms"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"malformed offset record: {exc!r}") from exc
