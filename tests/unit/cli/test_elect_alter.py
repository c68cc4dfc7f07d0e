"""`highwater elect-leaders` and `highwater topics alter`: flags, output, exit codes, with a
fake Admin (no broker)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest
from click.testing import CliRunner, Result

from client.admin import ElectionResult
from client.cli.main import main
from client.errors import error_for_code
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType


def run(args: list[str]) -> Result:
    return CliRunner().invoke(main, args)


class FakeAdmin:
    calls: list[tuple[Any, ...]] = []

    def __init__(self, bootstrap: str, **options: Any) -> None:
        pass

    async def __aenter__(self) -> FakeAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def elect_leaders(
        self, election_type: ElectionType, partitions: Iterable[tuple[str, int]] | None
    ) -> list[ElectionResult]:
        FakeAdmin.calls.append(("elect", election_type, partitions))
        if partitions is not None:
            return [ElectionResult("t", 0, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)]
        return [
            ElectionResult("t", 0, ErrorCode.NONE),
            ElectionResult("t", 1, ErrorCode.ELECTION_NOT_NEEDED),
            ElectionResult("t", 2, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE),
        ]

    async def create_partitions(self, name: str, total: int) -> None:
        FakeAdmin.calls.append(("alter", name, total))
        if total <= 3:
            raise error_for_code(ErrorCode.INVALID_PARTITIONS, f"add partitions to {name!r}")


@pytest.fixture(autouse=True)
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeAdmin.calls = []
    monkeypatch.setattr("client.cli.elect.Admin", FakeAdmin)
    monkeypatch.setattr("client.cli.topics.Admin", FakeAdmin)


def test_preferred_election_for_all_partitions_prints_one_line_each() -> None:
    result = run(["elect-leaders", "--election-type", "preferred", "--all-topic-partitions"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "t-0: elected",
        "t-1: already led by the preferred replica",
        "t-2: not elected: the preferred replica is not live or not in the ISR",
    ]
    assert FakeAdmin.calls == [("elect", ElectionType.PREFERRED, None)]


def test_one_partition_not_elected_exits_1() -> None:
    args = ["elect-leaders", "--election-type", "preferred", "--topic", "t", "--partition", "0"]
    result = run(args)
    assert result.exit_code == 1
    assert FakeAdmin.calls == [("elect", ElectionType.PREFERRED, [("t", 0)])]


def test_unclean_election_warns_first() -> None:
    result = run(["elect-leaders", "--election-type", "unclean", "--all-topic-partitions"])
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith("WARNING: an unclean election")
    assert FakeAdmin.calls == [("elect", ElectionType.UNCLEAN, None)]


@pytest.mark.parametrize(
    "args",
    [
        ["--election-type", "preferred"],
        ["--election-type", "preferred", "--topic", "t"],
        [
            "--election-type",
            "preferred",
            "--topic",
            "t",
            "--partition",
            "0",
            "--all-topic-partitions",
        ],
    ],
)
def test_partition_selection_is_checked(args: list[str]) -> None:
    result = run(["elect-leaders", *args])
    assert result.exit_code == 2
    assert FakeAdmin.calls == []


def test_topics_alter_adds_partitions_or_says_why_not() -> None:
    result = run(["topics", "alter", "t", "--partitions", "6"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "Topic t now has 6 partitions.\n"
    result = run(["topics", "alter", "t", "--partitions", "2"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: INVALID_PARTITIONS")
    assert FakeAdmin.calls == [("alter", "t", 6), ("alter", "t", 2)]
