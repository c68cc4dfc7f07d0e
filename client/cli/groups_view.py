"""What `highwater groups` prints (pure): kafka-consumer-groups' tables and the --json documents.

`describe`: one row per partition the group has an offset for or a member owns, with the
lag against the high watermark (what a consumer can read up to), and one row per member that
owns nothing; `--members`, `--state`; `reset-offsets`' plan. Cells never hold spaces ("-" for
nothing), so `awk '{print $N}'` works on every line.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from client.admin import GroupDescription, GroupOffset, MemberDescription
from client.cli.reset_plan import PlannedReset
from protocol.topic_partition import TopicPartition

__all__ = [
    "MEMBER_COLUMNS",
    "OFFSET_COLUMNS",
    "RESET_COLUMNS",
    "STATE_COLUMNS",
    "assignment_text",
    "group_document",
    "member_rows",
    "offset_rows",
    "reset_rows",
    "state_rows",
]

OFFSET_COLUMNS = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "HIGH-WATERMARK",
    "LAG",
    "MEMBER-ID",
    "HOST",
    "CLIENT-ID",
)
MEMBER_COLUMNS = ("GROUP", "MEMBER-ID", "HOST", "CLIENT-ID", "#PARTITIONS")
MEMBER_VERBOSE_COLUMNS = ("INSTANCE-ID", "EPOCH", "ASSIGNMENT", "TARGET-ASSIGNMENT")
STATE_COLUMNS = ("GROUP", "COORDINATOR(ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS")
STATE_VERBOSE_COLUMNS = ("GROUP-EPOCH", "ASSIGNMENT-EPOCH")
RESET_COLUMNS = ("GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET")


def _cell(value: object) -> str:
    text = "-" if value is None or value == "" else str(value)
    return text.replace(" ", "_")


def assignment_text(partitions: Iterable[TopicPartition]) -> str:
    """`t:0,1;u:2` (topics sorted), or `-`."""
    by_topic: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    return ";".join(f"{t}:{','.join(map(str, ps))}" for t, ps in by_topic.items()) or "-"


def _owners(group: GroupDescription) -> dict[TopicPartition, MemberDescription]:
    return {tp: m for m in group.members for tp in m.assignment}


def offset_rows(group: GroupDescription, offsets: Sequence[GroupOffset]) -> list[list[str]]:
    owners = _owners(group)
    by_tp = {TopicPartition(o.topic, o.partition): o for o in offsets}
    rows = []
    for tp in sorted(set(by_tp) | set(owners)):
        offset = by_tp.get(tp)
        member = owners.get(tp)
        rows.append(
            [
                _cell(group.group_id),
                _cell(tp.topic),
                str(tp.partition),
                _cell(offset and offset.committed_offset),
                _cell(offset and offset.high_watermark),
                _cell(offset and offset.lag),
                _cell(member and member.member_id),
                _cell(member and member.client_host),
                _cell(member and member.client_id),
            ]
        )
    for member in sorted(group.members, key=lambda m: m.member_id):
        if not member.assignment:
            rows.append(
                [
                    _cell(group.group_id),
                    "-",
                    "-",
                    "-",
                    "-",
                    "-",
                    _cell(member.member_id),
                    _cell(member.client_host),
                    _cell(member.client_id),
                ]
            )
    return rows


def member_columns(verbose: bool) -> tuple[str, ...]:
    return MEMBER_COLUMNS + (MEMBER_VERBOSE_COLUMNS if verbose else ())


def member_rows(group: GroupDescription, verbose: bool) -> list[list[str]]:
    rows = []
    for m in sorted(group.members, key=lambda m: m.member_id):
        row = [
            _cell(group.group_id),
            _cell(m.member_id),
            _cell(m.client_host),
            _cell(m.client_id),
            str(len(m.assignment)),
        ]
        if verbose:
            row += [
                _cell(m.instance_id),
                str(m.member_epoch),
                assignment_text(m.assignment),
                assignment_text(m.target_assignment),
            ]
        rows.append(row)
    return rows


def state_columns(verbose: bool) -> tuple[str, ...]:
    return STATE_COLUMNS + (STATE_VERBOSE_COLUMNS if verbose else ())


def state_rows(group: GroupDescription, verbose: bool) -> list[list[str]]:
    node = group.coordinator
    coordinator = "-" if node is None else f"{node.host}:{node.port}({node.node_id})"
    row = [
        _cell(group.group_id),
        coordinator,
        _cell(group.assignor),
        _cell(group.state),
        str(len(group.members)),
    ]
    if verbose:
        row += [str(group.group_epoch), str(group.assignment_epoch)]
    return [row]


def reset_rows(group_id: str, plan: Sequence[PlannedReset]) -> list[list[str]]:
    return [
        [_cell(group_id), _cell(p.tp.topic), str(p.tp.partition), _cell(p.current), str(p.new)]
        for p in plan
    ]


def group_document(group: GroupDescription, offsets: Sequence[GroupOffset]) -> dict[str, Any]:
    """`groups describe --json`: the group, its members and its offsets with lag."""
    owners = _owners(group)
    node = group.coordinator
    return {
        "group": group.group_id,
        "state": group.state,
        "coordinator": None
        if node is None
        else {"id": node.node_id, "host": node.host, "port": node.port},
        "assignor": group.assignor,
        "group_epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "members": [
            {
                "member_id": m.member_id,
                "instance_id": m.instance_id,
                "member_epoch": m.member_epoch,
                "client_id": m.client_id,
                "host": m.client_host,
                "subscribed_topics": list(m.subscribed_topics),
                "subscribed_regex": m.subscribed_regex,
                "assignment": [[tp.topic, tp.partition] for tp in m.assignment],
                "target_assignment": [[tp.topic, tp.partition] for tp in m.target_assignment],
            }
            for m in sorted(group.members, key=lambda m: m.member_id)
        ],
        "offsets": [
            {
                "topic": o.topic,
                "partition": o.partition,
                "current_offset": o.committed_offset,
                "high_watermark": o.high_watermark,
                "lag": o.lag,
                "member_id": (
                    owners[TopicPartition(o.topic, o.partition)].member_id
                    if TopicPartition(o.topic, o.partition) in owners
                    else None
                ),
            }
            for o in offsets
        ],
    }
