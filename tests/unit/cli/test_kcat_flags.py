"""kcat's and Kafka tools' words: -f -c -p -J -q -h, a topic as an argument or -t/--topic on
every command that takes one, and "No such option" errors that say what to type instead."""

from __future__ import annotations

import json
from typing import Any, ClassVar

import pytest

from client.cli import perf_tools
from client.errors import HighwaterClientError
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from tests.unit.cli.fakes import FakeConsumer, FakeProducer, consumer, producer, run

__all__ = ["consumer", "producer"]  # fixtures


class CallingAdmin:
    """Records each Admin call (name, positional arguments) and fails it, so an admin command
    ends with exit 1 once it has reached the Admin."""

    calls: ClassVar[list[tuple[str, tuple[Any, ...]]]] = []

    def __init__(self, bootstrap: str, **options: Any) -> None:
        pass

    async def __aenter__(self) -> CallingAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    def __getattr__(self, name: str) -> Any:
        async def call(*args: Any, **kwargs: Any) -> None:
            CallingAdmin.calls.append((name, args))
            raise HighwaterClientError(f"called {name}", ErrorCode.UNKNOWN_SERVER_ERROR)

        return call


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> type[CallingAdmin]:
    CallingAdmin.calls = []
    for module in ("topics", "configs", "groups", "elect"):
        monkeypatch.setattr(f"client.cli.{module}.Admin", CallingAdmin)
    return CallingAdmin


# --- kcat's short flags ----------------------------------------------------------------------


def test_consume_takes_kcats_f_c_p_and_q(consumer: type[FakeConsumer]) -> None:
    result = run(["consume", "t", "-p", "0", "-o", "beginning", "-c", "1", "-f", r"%p/%o %s\n"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "0/0 v0\n"
    assert "Processed a total of 1 messages" in result.stderr
    quiet = run(["consume", "t", "-o", "beginning", "-e", "-q"])
    assert quiet.exit_code == 0, quiet.output
    assert quiet.stdout_bytes == b"v0\n\xff\n\n"
    assert quiet.stderr == ""


def test_consume_j_is_json(consumer: type[FakeConsumer]) -> None:
    result = run(["consume", "t", "-J", "-c", "1", "-o", "beginning"])
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["value"] == "v0"


def test_produce_takes_p_and_j(producer: type[FakeProducer]) -> None:
    result = run(["produce", "t", "-p", "2", "-J"], '{"key":"k","value":"v"}\n')
    assert result.exit_code == 0, result.output
    (sent,) = producer.instances[0].sent
    assert (sent["partition"], sent["key"], sent["value"]) == (2, b"k", b"v")


@pytest.mark.parametrize(
    "args",
    [[], ["topics"], ["topics", "create"], ["consume"], ["groups", "reset-offsets"], ["dev"]],
)
def test_h_is_help_on_every_group_and_command(args: list[str]) -> None:
    result = run([*args, "-h"])
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("Usage: ")
    assert result.stdout == run([*args, "--help"]).stdout


# --- a topic either way ----------------------------------------------------------------------


@pytest.mark.parametrize("flag", ["-t", "--topic"])
def test_produce_and_consume_take_the_topic_with_t_too(
    flag: str, producer: type[FakeProducer], consumer: type[FakeConsumer]
) -> None:
    assert run(["produce", flag, "dst"], b"x\n").exit_code == 0
    assert producer.instances[0].sent[0]["topic"] == "dst"
    result = run(["consume", flag, "t2", "-o", "beginning", "-e"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "other topic\n"
    both = run(["consume", "t2", flag, "t", "-o", "beginning", "-e"])
    assert both.exit_code == 0, both.output
    assert sorted(both.stdout.splitlines()) == ["", "other topic", "v0", "\ufffd"]


def test_an_argument_and_a_different_topic_option_are_refused(
    producer: type[FakeProducer],
) -> None:
    result = run(["produce", "t", "--topic", "dst"], b"x\n")
    assert result.exit_code == 2
    assert "the argument names topic 't' and --topic 'dst': give one" in result.stderr
    result = run(["produce"], b"x\n")
    assert result.exit_code == 2
    assert "give the topic: TOPIC or -t/--topic TOPIC" in result.stderr
    assert producer.instances == []


@pytest.mark.parametrize(
    ("args", "call"),
    [
        (["topics", "create", "--topic", "n", "--partitions", "2", "--replication-factor", "1"],
         ("create_topic", ("n", 2, 1, {}))),
        (["topics", "describe", "-t", "n"], ("describe_topics", (["n"],))),
        (["topics", "delete", "--topic", "n"], ("delete_topic", ("n",))),
        (["topics", "alter", "-t", "n", "--partitions", "4"], ("create_partitions", ("n", 4))),
        (["elect-leaders", "n", "-p", "1", "--election-type", "preferred"],
         ("elect_leaders", (ElectionType.PREFERRED, [("n", 1)]))),
    ],
)  # fmt: skip
def test_topic_commands_take_the_topic_with_t_too(
    args: list[str], call: tuple[str, tuple[Any, ...]], admin: type[CallingAdmin]
) -> None:
    result = run(args)
    assert result.exit_code == 1, result.output
    assert admin.calls == [call]


def test_topics_create_without_counts_leaves_them_to_the_broker(admin: type[CallingAdmin]) -> None:
    """-1 in CreateTopics: the broker's num.partitions and default.replication.factor (KIP-464),
    as kafka-topics --create sends when they are not given."""
    for args in ([], ["--partitions", "3"], ["--replication-factor", "2"]):
        assert run(["topics", "create", "n", *args]).exit_code == 1
    assert admin.calls == [
        ("create_topic", ("n", -1, -1, {})),
        ("create_topic", ("n", 3, -1, {})),
        ("create_topic", ("n", -1, 2, {})),
    ]


def test_configs_take_the_topic_as_an_argument_too(admin: type[CallingAdmin]) -> None:
    for args in (["configs", "describe", "n"], ["configs", "describe", "--topic", "n"]):
        assert run(args).exit_code == 1
    (resource,) = admin.calls[0][1][0]
    assert admin.calls[1][1][0] == [resource]
    assert (resource.type.name, resource.name) == ("TOPIC", "n")
    assert run(["configs", "alter", "n", "--config", "retention.ms=1"]).exit_code == 1
    (alteration,) = admin.calls[2][1]
    assert [r.name for r in alteration] == ["n"]


def test_groups_offsets_commands_take_topics_as_arguments_too(admin: type[CallingAdmin]) -> None:
    result = run(["groups", "delete-offsets", "g", "t:0,x"])
    assert result.exit_code == 2
    assert "t:0,x" in result.stderr  # read as a TOPIC[:P,...] argument
    result = run(["groups", "delete-offsets", "g"])
    assert result.exit_code == 2
    assert "give the topics: TOPIC or --topic TOPIC" in result.stderr
    for command in (["delete-offsets", "g", "t"], ["reset-offsets", "g", "t", "--to-earliest"]):
        result = run(["groups", *command])
        assert result.exit_code == 1, result.output
        assert "Error: called " in result.stderr  # reached the Admin


@pytest.mark.parametrize("command", ["produce", "consume", "end-to-end"])
def test_perf_takes_the_topic_as_an_argument_too(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def seen(bootstrap: str, topic: str, **options: Any) -> None:
        raise HighwaterClientError(f"topic {topic}", ErrorCode.UNKNOWN_SERVER_ERROR)

    names = {"produce": "produce", "consume": "consume", "end-to-end": "end_to_end"}
    monkeypatch.setattr(perf_tools, f"run_{names[command]}_perf", seen)
    counts = {"produce": ["--num-records", "1"], "consume": ["--messages", "1"]}
    for topic in (["p1"], ["--topic", "p1"], ["-t", "p1"]):
        result = run(["perf", command, *topic, *counts.get(command, [])])
        assert result.exit_code == 1, result.output
        assert result.stderr.strip() == "Error: topic p1"


# --- what to type instead --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["consume", "t", "-G", "g"], "No such option '-G'. Did you mean --group?"),
        (["consume", "t", "-F", "f"], "No such option '-F'. Did you mean --command-config?"),
        (["produce", "t", "--broker-list", "h:1"], "Did you mean --bootstrap-server?"),
        (["consume", "-C", "t"], "kcat's -C (consumer mode) is `highwater consume`."),
        (["produce", "-P", "t"], "kcat's -P (producer mode) is `highwater produce`."),
        (["consume", "t", "-K", ":"], "Keys are printed with --format"),
        (["produce", "t", "-l", "f"], "Records come from stdin: `highwater produce TOPIC < FILE`"),
        (["topics", "--describe"], "Did you mean `main topics describe`?"),
        (["groups", "describe", "--group", "g"], "GROUP is an argument here"),
        (["consume", "t", "--property", "print.key=true"], "--format '%k\\t%s\\n' here"),
    ],
)
def test_kcat_and_kafka_flags_name_what_to_type_here(args: list[str], message: str) -> None:
    result = run(args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr


def test_a_flag_with_no_counterpart_keeps_clicks_message() -> None:
    result = run(["produce", "t", "-x"])
    assert result.exit_code == 2
    assert result.stderr.strip().splitlines()[-1] == "Error: No such option '-x'."
