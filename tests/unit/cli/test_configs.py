"""`highwater configs describe|alter` and `topics alter --config/--delete-config`, `topics
describe`'s overrides: flags, output and exit codes, with a fake Admin (no broker)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import pytest
from click.testing import CliRunner, Result

from client.admin import (
    AlterConfigOp,
    ConfigEntry,
    ConfigResource,
    ConfigSource,
    ConfigSynonym,
    PartitionDescription,
    TopicDescription,
)
from client.cli.main import main
from client.errors import HighwaterClientError
from protocol.errors import ErrorCode
from protocol.messages.incremental_alter_configs import AlterConfigOpType

DYNAMIC_TOPIC = ConfigSource.DYNAMIC_TOPIC_CONFIG
DEFAULT = ConfigSource.DEFAULT_CONFIG


class FakeAdmin:
    """Topic "demo" with retention.ms overridden; broker 1; one dynamic default. Records
    every alteration; a value "bad" is refused as a broker would."""

    altered: list[tuple[ConfigResource, list[AlterConfigOp], bool]] = []
    partitions_added: list[tuple[str, int]] = []

    def __init__(self, bootstrap: str, **options: Any) -> None:
        pass

    async def __aenter__(self) -> FakeAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def describe_configs(
        self, resources: Iterable[ConfigResource], **options: bool
    ) -> dict[ConfigResource, list[ConfigEntry]]:
        out = {}
        for resource in resources:
            if resource == ConfigResource.topic("demo"):
                out[resource] = [
                    ConfigEntry(
                        "retention.ms",
                        "1000",
                        DYNAMIC_TOPIC,
                        False,
                        synonyms=(
                            ConfigSynonym("retention.ms", "1000", DYNAMIC_TOPIC),
                            ConfigSynonym("log.retention.hours", "168", DEFAULT),
                        ),
                    ),
                    ConfigEntry("segment.bytes", "1073741824", DEFAULT, False),
                ]
            elif resource == ConfigResource.broker(1):
                out[resource] = [
                    ConfigEntry("broker.id", "1", ConfigSource.STATIC_BROKER_CONFIG, True),
                    ConfigEntry(
                        "log.retention.ms",
                        "60000",
                        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
                        False,
                    ),
                ]
            elif resource in (ConfigResource.broker(), ConfigResource.topic("plain")):
                out[resource] = []
            else:
                raise HighwaterClientError(
                    f"UNKNOWN_TOPIC_OR_PARTITION: describe configs of {resource}",
                    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
                )
        return out

    async def incremental_alter_configs(
        self, changes: Mapping[ConfigResource, Sequence[AlterConfigOp]], *, validate_only: bool
    ) -> None:
        for resource, ops in changes.items():
            if any(op.value == "bad" for op in ops):
                raise HighwaterClientError(
                    f"INVALID_CONFIG: alter configs of {resource} (invalid value 'bad' for "
                    "topic config retention.ms: expected a long integer >= -1 (-1: no limit))",
                    ErrorCode.INVALID_CONFIG,
                )
            FakeAdmin.altered.append((resource, list(ops), validate_only))

    async def create_partitions(self, name: str, total: int) -> None:
        FakeAdmin.partitions_added.append((name, total))

    async def describe_topics(self, names: list[str] | None) -> list[TopicDescription]:
        partition = PartitionDescription(0, 1, 0, (1,), (1,), (), 5, 5, {1: 5})
        return [TopicDescription("demo", (partition,)), TopicDescription("plain", (partition,))]


@pytest.fixture(autouse=True)
def fake_admin(monkeypatch: pytest.MonkeyPatch) -> None:
    FakeAdmin.altered = []
    FakeAdmin.partitions_added = []
    monkeypatch.setattr("client.cli.configs.Admin", FakeAdmin)
    monkeypatch.setattr("client.cli.topics.Admin", FakeAdmin)


def run(args: list[str]) -> Result:
    return CliRunner().invoke(main, args, catch_exceptions=False)


def test_describe_a_topic_shows_each_value_with_its_source() -> None:
    result = run(["configs", "describe", "--topic", "demo"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "Configs of topic 'demo':",
        "  Config         Value       Source",
        "  retention.ms   1000        DYNAMIC_TOPIC_CONFIG",
        "  segment.bytes  1073741824  DEFAULT_CONFIG",
    ]


def test_describe_with_synonyms_lists_every_source() -> None:
    result = run(["configs", "describe", "--topic", "demo", "--synonyms"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[2].split() == [
        "retention.ms",
        "1000",
        "DYNAMIC_TOPIC_CONFIG",
        "DYNAMIC_TOPIC_CONFIG:retention.ms=1000,DEFAULT_CONFIG:log.retention.hours=168",
    ]


def test_describe_a_broker_says_which_settings_are_dynamic() -> None:
    result = run(["configs", "describe", "--broker", "1"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "Configs of broker 1:",
        "  Config            Value  Source                         UpdateMode",
        "  broker.id         1      STATIC_BROKER_CONFIG           read-only",
        "  log.retention.ms  60000  DYNAMIC_DEFAULT_BROKER_CONFIG  cluster-wide",
    ]
    result = run(["configs", "describe", "--broker-defaults"])
    assert result.stdout.splitlines()[1] == "  (none set)"


def test_describe_json() -> None:
    result = run(["configs", "describe", "--topic", "demo", "--json"])
    entries = json.loads(result.stdout)
    assert entries[0]["name"] == "retention.ms"
    assert entries[0]["source"] == "DYNAMIC_TOPIC_CONFIG"
    assert entries[0]["synonyms"][1] == {
        "name": "log.retention.hours",
        "value": "168",
        "source": "DEFAULT_CONFIG",
    }


def test_describe_an_unknown_topic_is_one_line() -> None:
    result = CliRunner().invoke(main, ["configs", "describe", "--topic", "nope"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: UNKNOWN_TOPIC_OR_PARTITION")


@pytest.mark.parametrize(
    "args",
    [
        ["configs", "describe"],
        ["configs", "describe", "--topic", "t", "--broker", "1"],
        ["configs", "alter", "--topic", "t"],
        ["configs", "alter", "--topic", "t", "--config", "novalue"],
        ["topics", "alter", "t"],
    ],
)
def test_bad_flags_exit_2(args: list[str]) -> None:
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    assert FakeAdmin.altered == []


def test_topics_alter_sets_and_deletes_configs() -> None:
    result = run(
        ["topics", "alter", "demo", "--config", "retention.ms=60000", "--delete-config", "a.b"]
    )
    assert result.exit_code == 0, result.output
    assert result.stdout.strip() == (
        "Updated configs of topic 'demo': set retention.ms=60000; deleted a.b."
    )
    (resource, ops, validate_only), *_ = FakeAdmin.altered
    assert resource == ConfigResource.topic("demo") and not validate_only
    assert ops == [
        AlterConfigOp("retention.ms", AlterConfigOpType.SET, "60000"),
        AlterConfigOp("a.b", AlterConfigOpType.DELETE),
    ]
    assert FakeAdmin.partitions_added == []


def test_topics_alter_configs_and_partitions_together() -> None:
    result = run(["topics", "alter", "demo", "--config", "retention.ms=1", "--partitions", "4"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == "Topic demo now has 4 partitions."
    assert len(FakeAdmin.altered) == 1 and FakeAdmin.partitions_added == [("demo", 4)]


def test_a_refused_value_is_one_line_naming_the_key() -> None:
    result = CliRunner().invoke(main, ["topics", "alter", "demo", "--config", "retention.ms=bad"])
    assert result.exit_code == 1
    assert result.stderr.startswith("Error: INVALID_CONFIG: alter configs of topic 'demo'")
    assert "retention.ms" in result.stderr


def test_configs_alter_the_broker_defaults_and_validate_only() -> None:
    result = run(["configs", "alter", "--broker-defaults", "--config", "log.retention.ms=5"])
    assert result.exit_code == 0, result.output
    assert "the cluster-wide broker defaults" in result.stdout
    assert FakeAdmin.altered[0][0] == ConfigResource.broker()
    result = run(
        ["configs", "alter", "--topic", "demo", "--config", "retention.ms=5", "--validate-only"]
    )
    assert result.stdout.startswith("Valid:")
    assert FakeAdmin.altered[1][2] is True


def test_topics_describe_shows_the_overrides_on_the_topic_line() -> None:
    result = run(["topics", "describe"])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        "Topic: demo\tPartitionCount: 1\tReplicationFactor: 1\tConfigs: retention.ms=1000"
    )
    assert lines[3] == "Topic: plain\tPartitionCount: 1\tReplicationFactor: 1"
    topics = json.loads(run(["topics", "describe", "--json"]).stdout)
    assert [t["configs"] for t in topics] == [{"retention.ms": "1000"}, {}]
