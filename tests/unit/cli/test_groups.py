"""`highwater groups` and `consume --group`: the reset plan, the tables, and the commands
against a fake Admin (and a fake group consumer); no broker."""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

import pytest

from client.admin import (
    GroupDescription,
    GroupListing,
    GroupOffset,
    ListGroupsResult,
    MemberDescription,
)
from client.cli import groups as cli_groups
from client.cli.groups_view import group_document, member_rows, offset_rows, state_rows
from client.cli.reset_plan import (
    ResetSpec,
    parse_duration_ms,
    parse_topic_partitions,
    plan_resets,
)
from client.metadata import BrokerInfo
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition
from tests.unit.cli.fakes import FakeGroupConsumer, group_consumer, run

__all__ = ["group_consumer"]  # fixtures

T0, T1, T2 = (TopicPartition("t", p) for p in range(3))


# --- the reset plan ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("PT1H", 3_600_000),
        ("P1DT12H", 129_600_000),
        ("PT30M", 1_800_000),
        ("pt0.5s", 500),
        ("P2D", 172_800_000),
        ("PT1H30M15S", 5_415_000),
    ],
)
def test_durations_are_iso_8601(text: str, ms: int) -> None:
    assert parse_duration_ms(text) == ms


@pytest.mark.parametrize("text", ["1h", "P", "PT", "P1DT", "-PT1H", "PT1.5H", ""])
def test_bad_durations_are_refused(text: str) -> None:
    with pytest.raises(ValueError):
        parse_duration_ms(text)


def test_topic_partitions() -> None:
    assert parse_topic_partitions("t") == ("t", None)
    assert parse_topic_partitions("t:2,0,2") == ("t", (0, 2))
    for bad in (":1", "t:", "t:a", "t:-1"):
        with pytest.raises(ValueError):
            parse_topic_partitions(bad)


EARLIEST = {T0: 10, T1: 0, T2: 0}
LATEST = {T0: 100, T1: 50, T2: 0}


def plan(spec: ResetSpec, committed: dict[TopicPartition, int | None], **kw: Any) -> list[Any]:
    return [(p.tp.partition, p.current, p.new, p.warning is not None) for p in plan_resets(
        spec, [T1, T0, T2], committed, EARLIEST, LATEST, **kw
    )]  # fmt: skip


def test_every_reset_kind_with_clamping() -> None:
    committed: dict[TopicPartition, int | None] = {T0: 40, T1: 45, T2: None}
    assert plan(ResetSpec("earliest"), committed) == [
        (0, 40, 10, False),
        (1, 45, 0, False),
        (2, None, 0, False),
    ]
    assert plan(ResetSpec("latest"), committed) == [
        (0, 40, 100, False),
        (1, 45, 50, False),
        (2, None, 0, False),
    ]
    assert plan(ResetSpec("offset", 5), committed) == [
        (0, 40, 10, True),  # below the log start: clamped, with a warning
        (1, 45, 5, False),
        (2, None, 0, True),
    ]
    assert plan(ResetSpec("shift", 10), {T0: 40, T1: 45, T2: 0}) == [
        (0, 40, 50, False),
        (1, 45, 50, True),  # beyond the high watermark: clamped
        (2, 0, 0, True),
    ]
    by_time = {T0: 60, T1: None, T2: None}
    assert plan(ResetSpec("datetime", 123), committed, by_time=by_time) == [
        (0, 40, 60, False),
        (1, 45, 50, False),  # no record at or after the time: the latest
        (2, None, 0, False),
    ]


def test_shifting_a_partition_without_a_committed_offset_is_an_error() -> None:
    with pytest.raises(ValueError, match="cannot shift t-2"):
        plan(ResetSpec("shift", 1), {T0: 1, T1: 1})


# --- the tables ---------------------------------------------------------------------------


def member(member_id: str, owned: Iterable[TopicPartition], **kw: Any) -> MemberDescription:
    owned = tuple(sorted(owned))
    fields: dict[str, Any] = {
        "instance_id": None,
        "member_epoch": 3,
        "client_id": "app",
        "client_host": "/127.0.0.1",
        "subscribed_topics": ("t",),
        "subscribed_regex": None,
        "assignment": owned,
        "target_assignment": owned,
        **kw,
    }
    return MemberDescription(member_id, **fields)


def group(*members: MemberDescription, state: str = "Stable") -> GroupDescription:
    return GroupDescription("g", state, 5, 5, "uniform", members, BrokerInfo(2, "127.0.0.1", 9093))


OFFSETS = [GroupOffset("t", 0, 7, 10), GroupOffset("t", 1, None, 4), GroupOffset("t", 2, 3, None)]


def test_describe_rows_show_lag_and_owner_and_idle_members() -> None:
    described = group(member("m-1", [T0, T1]), member("m-2", []))
    assert offset_rows(described, OFFSETS) == [
        ["g", "t", "0", "7", "10", "3", "m-1", "/127.0.0.1", "app"],
        ["g", "t", "1", "-", "4", "-", "m-1", "/127.0.0.1", "app"],
        ["g", "t", "2", "3", "-", "-", "-", "-", "-"],
        ["g", "-", "-", "-", "-", "-", "m-2", "/127.0.0.1", "app"],
    ]


def test_members_and_state_rows() -> None:
    described = group(member("m-1", [T0, T1], target_assignment=(T0,), instance_id="i 1"))
    assert member_rows(described, verbose=False) == [["g", "m-1", "/127.0.0.1", "app", "2"]]
    assert member_rows(described, verbose=True)[0][5:] == ["i_1", "3", "t:0,1", "t:0"]
    assert state_rows(described, verbose=True) == [
        ["g", "127.0.0.1:9093(2)", "uniform", "Stable", "1", "5", "5"]
    ]


def test_the_json_document() -> None:
    document = group_document(group(member("m-1", [T0])), OFFSETS[:1])
    assert document["coordinator"] == {"id": 2, "host": "127.0.0.1", "port": 9093}
    assert document["members"][0]["assignment"] == [["t", 0]]
    assert document["offsets"] == [
        {
            "topic": "t",
            "partition": 0,
            "current_offset": 7,
            "high_watermark": 10,
            "lag": 3,
            "member_id": "m-1",
        }
    ]
    json.dumps(document)


# --- the commands against a fake Admin ----------------------------------------------------------


class FakeMetadataForAdmin:
    def add_topics(self, topics: Iterable[str]) -> None:
        pass

    async def refresh(self) -> None:
        pass

    def topic_error(self, topic: str) -> int:
        return 0 if topic == "t" else ErrorCode.UNKNOWN_TOPIC_OR_PARTITION

    async def wait_for_topic(self, topic: str, timeout_ms: float) -> tuple[int, ...]:
        return (0, 1)


class FakeAdmin:
    """Group "g" (members as set by the test), offsets t-0 at 5 and t-1 at 7."""

    members: tuple[MemberDescription, ...] = ()
    altered: list[dict[tuple[str, int], int]] = []

    def __init__(self, bootstrap: str, **options: Any) -> None:
        self.metadata = FakeMetadataForAdmin()
        self.request_timeout_ms = 1_000

    async def __aenter__(self) -> FakeAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def list_groups(self) -> ListGroupsResult:
        return ListGroupsResult(
            (GroupListing("g", "Stable", 1), GroupListing("h", "Empty", 1)), {3: "timed out"}
        )

    async def describe_groups(self, group_ids: Iterable[str]) -> list[GroupDescription]:
        out = []
        for g in group_ids:
            if g == "g":
                state = "Stable" if self.members else "Empty"
                out.append(GroupDescription(g, state, 1, 1, "uniform", self.members, None))
            else:
                out.append(GroupDescription(g, "Dead", -1, -1, "", (), None))
        return out

    async def list_group_offsets(self, group_id: str, **kw: Any) -> list[GroupOffset]:
        return [GroupOffset("t", 0, 5, 10), GroupOffset("t", 1, 7, 7)]

    async def high_watermarks(self, tps: Iterable[Any]) -> dict[TopicPartition, int | None]:
        return dict.fromkeys(tps, 3)

    async def alter_group_offsets(self, group_id: str, offsets: dict[tuple[str, int], int]) -> None:
        FakeAdmin.altered.append(dict(offsets))

    async def delete_groups(self, group_ids: Iterable[str]) -> dict[str, ErrorCode]:
        return {g: ErrorCode.NONE if g == "h" else ErrorCode.NON_EMPTY_GROUP for g in group_ids}


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> type[FakeAdmin]:
    FakeAdmin.members = ()
    FakeAdmin.altered = []
    monkeypatch.setattr(cli_groups, "_admin", FakeAdmin)

    async def offsets(metadata: Any, timestamps: dict[tuple[str, int], int], **kw: Any) -> Any:
        return {
            tp: ((0 if ts == -2 else 10 if tp[1] == 0 else 7), -1) for tp, ts in timestamps.items()
        }

    monkeypatch.setattr(cli_groups, "list_offsets", offsets)
    return FakeAdmin


def test_list_warns_about_brokers_that_did_not_answer(admin: type[FakeAdmin]) -> None:
    result = run(["groups", "list"])
    assert result.exit_code == 0
    assert result.stdout == "g\nh\n"
    assert "broker 3 did not answer (timed out)" in result.stderr
    states = run(["groups", "list", "--state"]).stdout.splitlines()
    assert states[0].split() == ["GROUP", "STATE"] and states[1].split() == ["g", "Stable"]
    assert json.loads(run(["groups", "list", "--json"]).stdout)[1] == {
        "group": "h",
        "state": "Empty",
    }


def test_describe_an_empty_group_and_an_unknown_one(admin: type[FakeAdmin]) -> None:
    result = run(["groups", "describe", "g"])
    assert result.exit_code == 0
    lines = result.stdout.splitlines()
    assert lines[0].split()[:6] == [
        "GROUP",
        "TOPIC",
        "PARTITION",
        "CURRENT-OFFSET",
        "HIGH-WATERMARK",
        "LAG",
    ]
    assert lines[1].split() == ["g", "t", "0", "5", "10", "5", "-", "-", "-"]
    assert "has no active members" in result.stderr
    missing = run(["groups", "describe", "nope"])
    assert missing.exit_code == 1
    assert missing.stderr.strip() == "Error: consumer group 'nope' does not exist"


def test_reset_is_a_dry_run_unless_execute(admin: type[FakeAdmin]) -> None:
    dry = run(["groups", "reset-offsets", "g", "--topic", "t", "--to-earliest"])
    assert dry.exit_code == 0, dry.output
    assert [line.split() for line in dry.stdout.splitlines()] == [
        ["GROUP", "TOPIC", "PARTITION", "CURRENT-OFFSET", "NEW-OFFSET"],
        ["g", "t", "0", "5", "0"],
        ["g", "t", "1", "7", "0"],
    ]
    assert "Dry run" in dry.stderr and admin.altered == []
    done = run(["groups", "reset-offsets", "g", "--all-topics", "--shift-by", "2", "--execute"])
    assert done.exit_code == 0, done.output
    assert admin.altered == [{("t", 0): 7, ("t", 1): 7}]
    assert "Warning: t-1: new offset 9 is beyond the high watermark 7" in done.stderr


def test_reset_of_an_unknown_topic_fails_at_once(admin: type[FakeAdmin]) -> None:
    result = run(["groups", "reset-offsets", "g", "--topic", "nope", "--to-latest"])
    assert result.exit_code == 1
    assert "topic 'nope' does not exist" in result.stderr


def test_reset_refuses_an_active_group(admin: type[FakeAdmin]) -> None:
    admin.members = (member("m-1", [T0]),)
    result = run(["groups", "reset-offsets", "g", "--all-topics", "--to-latest", "--execute"])
    assert result.exit_code == 1
    assert "while group 'g' is inactive, but it is Stable with 1 member(s)" in result.stderr
    assert "Traceback" not in result.output and admin.altered == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--to-earliest"], "--topic TOPIC (repeatable) or --all-topics"),
        (["--all-topics"], "exactly one of --to-earliest"),
        (["--all-topics", "--to-earliest", "--to-latest"], "got --to-earliest, --to-latest"),
        (["--all-topics", "--by-duration", "1h"], "ISO-8601 duration"),
        (["--all-topics", "--to-datetime", "soon"], "neither ms since the epoch nor ISO"),
        (["--topic", "t:x", "--to-latest"], "TOPIC:0,1,2"),
        (["--all-topics", "--to-latest", "--execute", "--dry-run"], "cannot be combined"),
    ],
)
def test_reset_flags(admin: type[FakeAdmin], args: list[str], message: str) -> None:
    result = run(["groups", "reset-offsets", "g", *args])
    assert result.exit_code == 2
    assert message in result.stderr


def test_delete_reports_each_group(admin: type[FakeAdmin]) -> None:
    result = run(["groups", "delete", "h", "g"])
    assert result.exit_code == 1
    assert "Deletion of requested consumer groups ('h') was successful." in result.stdout
    assert "group 'g' could not be deleted: it has active members" in result.stderr


# --- consume --group ------------------------------------------------------------------------------


def test_consume_group_commits_what_it_printed(group_consumer: type[FakeGroupConsumer]) -> None:
    result = run(["consume", "t", "--group", "g", "--max-messages", "2", "--from-beginning"])
    assert result.exit_code == 0, result.output
    fake = group_consumer.last_group
    assert fake is not None
    assert fake.options["group_id"] == "g" and fake.options["enable_auto_commit"] is False
    assert fake.options["auto_offset_reset"] == "earliest"  # --from-beginning, with a group
    assert fake.subscribed == ["t"]
    assert result.stdout_bytes == b"v0\n\xff\n"
    assert fake.commits[-1] == {("t", 0): 1, ("t", 1): 1}
    assert "Group g committed: t-0=1, t-1=1" in result.stderr


def test_consume_group_exits_at_the_end_with_e(group_consumer: type[FakeGroupConsumer]) -> None:
    result = run(["consume", "t", "--group", "g", "-e", "-X", "enable.auto.commit=false"])
    assert result.exit_code == 0, result.output
    assert "Processed a total of 3 messages" in result.stderr
    fake = group_consumer.last_group
    assert fake is not None and fake.commits == []
    assert "nothing committed (enable.auto.commit=false)" in result.stderr
