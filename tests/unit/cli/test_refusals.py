"""An authorization refusal is one line naming the principal, the operation, the resource and
the `highwater acls add` that grants exactly what the command attempted (client/cli/refusals.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from client.cli.refusals import Need, administering, consuming, producing, refusal_line
from client.errors import HighwaterClientError, error_for_code
from protocol.errors import ErrorCode
from tests.unit.cli.fakes import (
    FakeConsumer,
    FakeFuture,
    FakeGroupConsumer,
    FakeMetadata,
    FakeProducer,
    consumer,
    group_consumer,
    producer,
    run,
)

__all__ = ["consumer", "group_consumer", "producer"]

TOPIC_REFUSED = ErrorCode.TOPIC_AUTHORIZATION_FAILED
GROUP_REFUSED = ErrorCode.GROUP_AUTHORIZATION_FAILED
CLUSTER_REFUSED = ErrorCode.CLUSTER_AUTHORIZATION_FAILED


@pytest.fixture
def alice(tmp_path: Path) -> str:
    config = tmp_path / "alice.properties"
    config.write_text(
        "security.protocol=SASL_PLAINTEXT\nsasl.mechanism=SCRAM-SHA-256\n"
        "sasl.username=alice\nsasl.password=alice-secret\n"
    )
    return str(config)


def _refused(code: ErrorCode, context: str = "x") -> HighwaterClientError:
    return error_for_code(code, context)


def test_a_consumer_in_a_group_is_told_to_grant_consumer_on_the_topic_and_group() -> None:
    attempt = consuming(("sec",), "ag")
    assert refusal_line(_refused(TOPIC_REFUSED), "User:alice", attempt) == (
        "User:alice may not READ topic sec (and group ag; TOPIC_AUTHORIZATION_FAILED): "
        "`highwater acls add --allow-principal User:alice --consumer --topic sec --group ag`"
    )
    assert refusal_line(_refused(GROUP_REFUSED), "User:alice", attempt) == (
        "User:alice may not READ group ag (and topic sec; GROUP_AUTHORIZATION_FAILED): "
        "`highwater acls add --allow-principal User:alice --consumer --topic sec --group ag`"
    )


def test_a_producer_and_an_admin_operation_get_their_own_grants() -> None:
    assert refusal_line(_refused(TOPIC_REFUSED), "User:bob", producing("demo")) == (
        "User:bob may not WRITE topic demo (TOPIC_AUTHORIZATION_FAILED): "
        "`highwater acls add --allow-principal User:bob --producer --topic demo`"
    )
    configs = administering(Need("DESCRIBE_CONFIGS", "cluster"))
    assert refusal_line(_refused(CLUSTER_REFUSED), "User:bob", configs) == (
        "User:bob may not DESCRIBE_CONFIGS cluster kafka-cluster (CLUSTER_AUTHORIZATION_FAILED): "
        "`highwater acls add --allow-principal User:bob --operation DescribeConfigs --cluster`"
    )
    # A group id is any string: quoted for the shell.
    odd = administering(Need("DESCRIBE", "group", ("my group",)))
    line = refusal_line(_refused(GROUP_REFUSED), "User:bob", odd)
    assert line is not None and line.endswith("--operation Describe --group 'my group'`")


def test_what_the_attempt_cannot_explain_keeps_its_own_message() -> None:
    # Another error; a refused resource type the attempt does not use; an unknown principal.
    assert (
        refusal_line(_refused(ErrorCode.NOT_LEADER_OR_FOLLOWER), "User:a", producing("t")) is None
    )
    assert refusal_line(_refused(GROUP_REFUSED), "User:a", producing("t")) is None
    assert refusal_line(_refused(TOPIC_REFUSED), None, producing("t")) is None
    # A broker without an authorizer lets only super.users change credentials: no ACL helps.
    no_authorizer = error_for_code(
        CLUSTER_REFUSED,
        "change the credentials of carol",
        "User:ANONYMOUS may not ALTER cluster kafka-cluster: without an authorizer, "
        "only super.users may change credentials",
    )
    alter = administering(Need("ALTER", "cluster"))
    assert refusal_line(no_authorizer, "User:ANONYMOUS", alter) is None


def test_consume_in_a_group_refused_a_fetch_prints_the_grant(
    group_consumer: type[FakeGroupConsumer], monkeypatch: pytest.MonkeyPatch, alice: str
) -> None:
    async def refused(self: FakeConsumer, timeout_ms: float, max_records: int) -> list[Any]:
        raise error_for_code(TOPIC_REFUSED, "fetch t-1")

    monkeypatch.setattr(FakeConsumer, "poll", refused)
    result = run(["consume", "t", "--group", "g", "-e", "--command-config", alice])
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: User:alice may not READ topic t (and group g; TOPIC_AUTHORIZATION_FAILED): "
        "`highwater acls add --allow-principal User:alice --consumer --topic t --group g`"
    )


def test_consume_without_security_is_anonymous_and_needs_no_group(
    consumer: type[FakeConsumer], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def refused(self: FakeConsumer, timeout_ms: float, max_records: int) -> list[Any]:
        raise error_for_code(TOPIC_REFUSED, "fetch t-0")

    monkeypatch.setattr(FakeConsumer, "poll", refused)
    result = run(["consume", "t", "-e"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: User:ANONYMOUS may not READ topic t (TOPIC_AUTHORIZATION_FAILED): "
        "`highwater acls add --allow-principal User:ANONYMOUS --consumer --topic t`"
    )


def test_produce_hidden_by_metadata_prints_the_producer_grant(
    producer: type[FakeProducer], monkeypatch: pytest.MonkeyPatch, alice: str
) -> None:
    async def hidden(self: FakeMetadata, topic: str, timeout_ms: float) -> tuple[int, ...]:
        raise HighwaterClientError(
            f"TOPIC_AUTHORIZATION_FAILED: topic {topic!r} (no DESCRIBE on it)", TOPIC_REFUSED
        )

    monkeypatch.setattr(FakeMetadata, "wait_for_topic", hidden)
    result = run(["produce", "t", "--command-config", alice], stdin="never\n")
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: User:alice may not WRITE topic t (TOPIC_AUTHORIZATION_FAILED): "
        "`highwater acls add --allow-principal User:alice --producer --topic t`"
    )


def test_produce_whose_records_are_refused_ends_with_the_grant(
    producer: type[FakeProducer], monkeypatch: pytest.MonkeyPatch, alice: str
) -> None:
    async def refuse(self: FakeProducer, topic: str, value: bytes | None, **kw: Any) -> FakeFuture:
        return FakeFuture(None, error_for_code(TOPIC_REFUSED, f"produce {topic}-0"))

    monkeypatch.setattr(FakeProducer, "send", refuse)
    result = run(["produce", "t", "--command-config", alice], stdin="a\nb\n")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines()[-1] == (
        "Error: 2 of 2 records failed (TOPIC_AUTHORIZATION_FAILED: 2); "
        "User:alice may not WRITE topic t (TOPIC_AUTHORIZATION_FAILED): "
        "`highwater acls add --allow-principal User:alice --producer --topic t`"
    )


class _RefusingAdmin:
    """Every admin call refused with `code`."""

    code = CLUSTER_REFUSED

    def __init__(self, bootstrap: str, **options: Any) -> None:
        pass

    async def __aenter__(self) -> _RefusingAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        async def refused(*args: Any, **kwargs: Any) -> None:
            raise error_for_code(self.code, name)

        return refused


@pytest.mark.parametrize(
    ("module", "args", "code", "expected"),
    [
        (
            "topics",
            ["topics", "create", "new", "--partitions", "1", "--replication-factor", "1"],
            TOPIC_REFUSED,
            "User:alice may not CREATE topic new (TOPIC_AUTHORIZATION_FAILED): "
            "`highwater acls add --allow-principal User:alice --operation Create --topic new`",
        ),
        (
            "topics",
            ["topics", "delete", "old"],
            TOPIC_REFUSED,
            "User:alice may not DELETE topic old (TOPIC_AUTHORIZATION_FAILED): "
            "`highwater acls add --allow-principal User:alice --operation Delete --topic old`",
        ),
        (
            "users",
            ["users", "add", "carol", "--password", "p"],
            CLUSTER_REFUSED,
            "User:alice may not ALTER cluster kafka-cluster (CLUSTER_AUTHORIZATION_FAILED): "
            "`highwater acls add --allow-principal User:alice --operation Alter --cluster`",
        ),
        (
            "acls",
            ["acls", "list"],
            CLUSTER_REFUSED,
            "User:alice may not DESCRIBE cluster kafka-cluster (CLUSTER_AUTHORIZATION_FAILED): "
            "`highwater acls add --allow-principal User:alice --operation Describe --cluster`",
        ),
        (
            "configs",
            ["configs", "alter", "--topic", "t", "--config", "retention.ms=1"],
            TOPIC_REFUSED,
            "User:alice may not ALTER_CONFIGS topic t (TOPIC_AUTHORIZATION_FAILED): "
            "`highwater acls add --allow-principal User:alice --operation AlterConfigs --topic t`",
        ),
    ],
)
def test_admin_commands_refused_print_the_operation_to_grant(
    monkeypatch: pytest.MonkeyPatch,
    alice: str,
    module: str,
    args: list[str],
    code: ErrorCode,
    expected: str,
) -> None:
    refusing = type("Refusing", (_RefusingAdmin,), {"code": code})
    monkeypatch.setattr(f"client.cli.{module}.Admin", refusing)
    result = run([*args, "--command-config", alice])
    assert result.exit_code == 1, result.output
    assert result.stderr.strip() == f"Error: {expected}"
