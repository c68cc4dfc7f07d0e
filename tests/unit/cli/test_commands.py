"""The client commands' flags, output and exit codes, with fake clients (no broker)."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest

from client.admin import PartitionDescription, TopicDescription
from client.errors import CorruptBatchError, NoBrokersAvailable
from tests.unit.cli.fakes import FakeConsumer, FakeProducer, consumer, producer, run

__all__ = ["consumer", "producer"]  # fixtures


# --- produce ---------------------------------------------------------------------------------


def test_produce_lines_with_keys_and_offsets(producer: type[FakeProducer]) -> None:
    result = run(["produce", "t", "-K", ":", "--print-offsets", "--acks", "all"], b"a:1\nb:2:x\n")
    assert result.exit_code == 0, result.output
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"partition": 0, "offset": 0},
        {"partition": 0, "offset": 1},
    ]
    (fake,) = producer.instances
    assert fake.options["acks"] == -1
    assert [(s["key"], s["value"]) for s in fake.sent] == [(b"a", b"1"), (b"b", b"2:x")]


def test_produce_without_trailing_newline_and_empty_lines(producer: type[FakeProducer]) -> None:
    result = run(["produce", "t", "--partition", "3"], b"one\n\nlast")
    assert result.exit_code == 0, result.output
    sent = producer.instances[0].sent
    assert [s["value"] for s in sent] == [b"one", b"", b"last"]
    assert {s["partition"] for s in sent} == {3}


def test_produce_failures_are_reported_and_exit_non_zero(producer: type[FakeProducer]) -> None:
    result = run(["produce", "t", "-K", ":", "--print-offsets"], b"k:ok\nno-separator\nk:fail\n")
    assert result.exit_code == 1
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"partition": 0, "offset": 0},
        {"error": "INVALID_RECORD", "line": 2},
        {"error": "MESSAGE_TOO_LARGE"},
    ]
    assert "line 2: no key separator" in result.stderr
    assert "Error: 2 of 3 records failed" in result.stderr
    assert "Traceback" not in result.output


def test_produce_json_reads_the_consume_envelope(producer: type[FakeProducer]) -> None:
    lines = [
        '{"topic":"src","partition":4,"offset":9,"timestamp":1234,"key":"k","value":"v",'
        '"headers":[{"key":"h","value":"x"}]}',
        '{"value_b64":"/w==","key":null}',
    ]
    result = run(["produce", "dst", "--json"], "\n".join(lines) + "\n")
    assert result.exit_code == 0, result.output
    first, second = producer.instances[0].sent
    assert first == {
        "topic": "dst",
        "value": b"v",
        "key": b"k",
        "partition": None,
        "headers": (("h", b"x"),),
        "timestamp_ms": 1234,
    }
    assert (second["key"], second["value"], second["timestamp_ms"]) == (None, b"\xff", None)


def test_produce_unknown_topic_is_one_line(producer: type[FakeProducer]) -> None:
    result = run(["produce", "missing"], b"a\nb\n")
    assert result.exit_code == 1
    assert result.stderr.strip().splitlines() == [
        "Error: UNKNOWN_TOPIC_OR_PARTITION: topic 'missing' does not exist "
        "(create it with `highwater topics create`)"
    ]
    assert producer.instances[0].sent == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["produce", "t", "-K", ":", "--json"], "cannot be combined"),
        (["produce", "t", "--acks", "2"], "'2' is not one of"),
        (["produce", "t", "-b", "nohostport"], "is not HOST:PORT"),
        (["consume", "t", "--format", "%q"], "unknown format token %q"),
        (["consume", "t", "--from-beginning", "--offset", "3"], "cannot be combined"),
        (["consume", "t", "-o", "3", "-o", "end"], "two start offsets"),
        (["consume", "t", "-o", "later"], "is not an offset"),
        (["consume", "t", "-o", "s@yesterday"], "neither ms since the epoch nor ISO-8601"),
        (["consume", "t", "-o", "stored"], "committed offsets) needs --group GROUP"),
        (["consume", "t", "--group", "g", "--partition", "1"], "cannot be combined with --group"),
        (["consume", "t", "--group", "g", "-o", "5"], "start at the group's committed offsets"),
        (["consume", "t", "-X", "group.id=g", "-o", "-5"], "start at the group's committed"),
        (["consume", "t", "-X", "enable.auto.commit=false"], "needs --group"),
        (["consume", "t", "-X", "group.id="], "must not be empty"),
        (["consume", "t", "-X", "fetch.max.wait=1"], "unknown consumer property"),
        (["consume", "t", "u", "--partition", "1"], "exactly one TOPIC"),
        (["consume"], "TOPIC names or --pattern"),
        (["consume", "--pattern", "("], "--pattern"),
        (["produce", "t", "-X", "acks=2"], "expected all, -1, 0 or 1"),
        (["produce", "t", "-X", "compression.type=brotli"], "unknown compression"),
        (["produce", "t", "-D", "\\q"], "unknown escape"),
        (["produce", "t", "-H", "=v"], "has no name"),
        (["consume", "t", "--json", "--format", "%s"], "cannot be combined"),
        (["consume", "t", "--max-messages", "0"], "0 is not in the range"),
        (["topics", "create", "t", "--partitions", "0", "--replication-factor", "1"], "range"),
        (
            [
                "topics",
                "create",
                "t",
                "--partitions",
                "1",
                "--replication-factor",
                "1",
                "--config",
                "novalue",
            ],
            "is not key=value",
        ),
    ],
)
def test_bad_flags_exit_2_with_one_message(args: list[str], message: str) -> None:
    result = run(args)
    assert result.exit_code == 2, result.output
    assert message in result.stderr
    assert "Traceback" not in result.output


def test_bootstrap_comes_from_the_flag_then_the_environment_then_the_default(
    producer: type[FakeProducer],
) -> None:
    run(["produce", "t"], b"x\n")
    run(["produce", "t"], b"x\n", env={"HIGHWATER_BOOTSTRAP": "h1:1,h2:2"})
    run(["produce", "t", "-b", "flag:3"], b"x\n", env={"HIGHWATER_BOOTSTRAP": "h1:1"})
    assert [p.bootstrap for p in producer.instances] == ["127.0.0.1:9092", "h1:1,h2:2", "flag:3"]


# --- consume ---------------------------------------------------------------------------------


def test_consume_format_until_the_end(consumer: type[FakeConsumer]) -> None:
    result = run(["consume", "t", "--from-beginning", "-e", "--format", r"%p/%o %k=%s %S %h\n"])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == b"0/0 k0=v0 2 h=1\n1/0 =\xff 1 \n0/1 k1= -1 \n"
    assert "Processed a total of 3 messages" in result.stderr
    assert consumer.last is not None and consumer.last.resets == ["beginning"]


def test_consume_json_one_partition_max_messages(consumer: type[FakeConsumer]) -> None:
    result = run(
        ["consume", "t", "--partition", "0", "--offset", "0", "--json", "--max-messages", "1"]
    )
    assert result.exit_code == 0, result.output
    (line,) = result.stdout.splitlines()
    assert json.loads(line) == {
        "topic": "t",
        "partition": 0,
        "offset": 0,
        "timestamp": 1000,
        "key": "k0",
        "value": "v0",
        "headers": [{"key": "h", "value": "1"}],
    }
    assert consumer.last is not None and consumer.last.resets == ["offset 0"]


def test_consume_default_is_the_end_and_plain_values(consumer: type[FakeConsumer]) -> None:
    result = run(["consume", "t", "--max-messages", "2"])
    assert result.stdout_bytes == b"v0\n\xff\n"
    assert consumer.last is not None and consumer.last.resets == ["end"]


def test_consume_at_a_corrupt_batch_says_how_to_skip_it(
    consumer: type[FakeConsumer], monkeypatch: pytest.MonkeyPatch
) -> None:
    async def corrupt(self: FakeConsumer, timeout_ms: float, max_records: int) -> list[Any]:
        raise CorruptBatchError("t", 1, 40, 43, "batch at byte 0: CRC-32C 0x1 != stored 0x2")

    monkeypatch.setattr(FakeConsumer, "poll", corrupt)
    result = run(["consume", "t", "--from-beginning"])
    assert result.exit_code == 1
    first, hint = result.stderr.strip().splitlines()[-2:]
    assert first.startswith("Error: CORRUPT_MESSAGE: t-1: the batch at offset 40 cannot be read")
    assert hint == "To skip it: highwater consume t --partition 1 -o 43"
    assert "Traceback" not in result.stderr


def test_consume_missing_partition_or_topic_is_one_line(consumer: type[FakeConsumer]) -> None:
    result = run(["consume", "t", "--partition", "7"])
    assert result.exit_code == 1
    assert "has no partition 7" in result.stderr
    result = run(["consume", "nope", "-e"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: UNKNOWN_TOPIC_OR_PARTITION: topic 'nope' does not exist "
        "(create it with `highwater topics create`)"
    )


# --- admin and errors ---------------------------------------------------------------------------


def test_no_broker_is_one_line_naming_the_bootstrap(monkeypatch: pytest.MonkeyPatch) -> None:
    class DeadAdmin:
        def __init__(self, bootstrap: str, **options: Any) -> None:
            pass

        async def __aenter__(self) -> DeadAdmin:
            raise NoBrokersAvailable("no broker answered a metadata request")

        async def __aexit__(self, *exc: object) -> None:
            pass

    monkeypatch.setattr("client.cli.topics.Admin", DeadAdmin)
    result = run(["topics", "list", "-b", "10.0.0.1:9"])
    assert result.exit_code == 1
    assert result.stderr.strip() == (
        "Error: no broker answered a metadata request (bootstrap 10.0.0.1:9)"
    )


def record_admins(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """`topics` commands' Admin replaced: each one's options are recorded, and it finds no
    broker (exit code 1)."""
    made: list[dict[str, Any]] = []

    class RecordingAdmin:
        def __init__(self, bootstrap: str, **options: Any) -> None:
            made.append(options)

        async def __aenter__(self) -> RecordingAdmin:
            raise NoBrokersAvailable("no broker answered a metadata request")

        async def __aexit__(self, *exc: object) -> None:
            pass

    monkeypatch.setattr("client.cli.topics.Admin", RecordingAdmin)
    return made


def test_admin_commands_take_admin_settings_from_the_command_config(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """As Kafka's tools give --command-config to their AdminClient: request.timeout.ms,
    retry.backoff.ms and client.id reach the Admin, beside the security settings."""
    made = record_admins(monkeypatch)
    config = tmp_path / "admin.properties"
    config.write_text(
        "security.protocol=PLAINTEXT\nrequest.timeout.ms=4000\nretry.backoff.ms=250\nclient.id=ops\n"
    )
    assert run(["topics", "list", "--command-config", str(config)]).exit_code == 1
    assert made[-1] == {
        "client_id": "ops",
        "security": made[-1]["security"],
        "request_timeout_ms": 4000,
        "retry_backoff_ms": 250,
    }
    assert made[-1]["security"].protocol == "PLAINTEXT"
    assert run(["topics", "list"]).exit_code == 1  # without the file: the defaults
    assert made[-1] == {"client_id": "highwater-cli", "security": None}

    config.write_text("request.timeout.ms=soon\n")
    result = run(["topics", "list", "--command-config", str(config)])
    assert result.exit_code == 2
    assert "request.timeout.ms=soon: expected a whole number" in result.stderr
    assert len(made) == 2  # refused before any client was made


def test_the_command_config_is_read_as_java_reads_a_properties_file(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """Escapes and continued lines mean what they mean in server.properties (one parser):
    a client id with an escaped '=' and a value continued over two lines."""
    made = record_admins(monkeypatch)
    config = tmp_path / "admin.properties"
    config.write_text("client.id=ops\\=a\\u0062\nrequest.timeout.ms=40\\\n   00\n")
    assert run(["topics", "list", "--command-config", str(config)]).exit_code == 1
    assert made[-1]["client_id"] == "ops=ab"
    assert made[-1]["request_timeout_ms"] == 4000

    config.write_text("client.id=\\u00zz\n")
    result = run(["topics", "list", "--command-config", str(config)])
    assert result.exit_code == 2
    assert "admin.properties line 1: malformed \\uxxxx escape" in result.stderr


class DescribingAdmin:
    """Describes one RF=3 topic: partition 0 replicating (broker 3 behind, out of the ISR),
    partition 1 without a leader, its whole ISR (broker 2) offline."""

    def __init__(self, bootstrap: str, **options: Any) -> None:
        pass

    async def __aenter__(self) -> DescribingAdmin:
        return self

    async def __aexit__(self, *exc: object) -> None:
        pass

    async def describe_topics(self, names: list[str] | None) -> list[TopicDescription]:
        assert names == ["demo"]
        return [
            TopicDescription(
                "demo",
                (
                    PartitionDescription(
                        1, -1, 5, (2, 3, 1), (2,), (2,), None, None, {2: None, 3: 95, 1: 95}
                    ),
                    PartitionDescription(
                        0, 1, 3, (1, 2, 3), (1, 2), (), 120, 130, {1: 130, 2: 125, 3: 80}
                    ),
                ),
            )
        ]

    async def describe_configs(self, resources: Iterable[Any]) -> dict[Any, list[Any]]:
        return {r: [] for r in resources}  # no overrides


def test_topics_describe_shows_isr_hw_and_each_replicas_leo(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr("client.cli.topics.Admin", DescribingAdmin)
    result = run(["topics", "describe", "demo"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines() == [
        "Topic: demo\tPartitionCount: 2\tReplicationFactor: 3",
        "  Partition  Leader  LeaderEpoch  Replicas  Isr  Offline  HighWatermark  LogEndOffsets",
        "  0          1       3            1,2,3     1,2  -        120            1=130,2=125,3=80",
        "  1          none    5            2,3,1     2    2        -              2=-,3=95,1=95",
    ]
    result = run(["topics", "describe", "demo", "--json"])
    assert result.exit_code == 0, result.output
    (topic,) = json.loads(result.stdout)
    first = topic["partitions"][1]
    assert first["isr"] == [1, 2] and first["high_watermark"] == 120
    assert first["replica_log_end_offsets"] == {"1": 130, "2": 125, "3": 80}
    assert topic["partitions"][0]["replica_log_end_offsets"] == {"2": None, "3": 95, "1": 95}


def test_broker_config_errors_exit_2_with_one_line(tmp_path: Any) -> None:
    result = run(["broker", "--config", str(tmp_path / "missing.properties")])
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: cannot read config file")
    config = tmp_path / "server.properties"
    config.write_text("broker.id=1\nzookeeper.connect=127.0.0.1:2181\nlog.dirz=/tmp/x\n")
    result = run(["broker", "--config", str(config), "--override", "num.partitions=2"])
    assert result.exit_code == 2
    assert "unknown config key 'log.dirz'" in result.stderr
    assert "did you mean" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_help_lists_every_command() -> None:
    result = run(["--help"])
    for command in ("topics", "produce", "consume", "groups", "cluster", "broker", "dev", "perf"):
        assert f"  {command} " in result.output


def test_an_unexpected_error_is_one_line_with_a_hint(monkeypatch: pytest.MonkeyPatch) -> None:
    class BrokenAdmin:
        def __init__(self, bootstrap: str, **options: Any) -> None:
            pass

        async def __aenter__(self) -> BrokenAdmin:
            raise RuntimeError("a bug\nwith a second line")

        async def __aexit__(self, *exc: object) -> None:
            pass

    monkeypatch.setattr("client.cli.topics.Admin", BrokenAdmin)
    result = run(["topics", "list"])
    assert result.exit_code == 1
    assert result.stderr.splitlines() == [
        "Error: unexpected RuntimeError: a bug (run again with HIGHWATER_DEBUG=1 for the traceback)"
    ]
    result = run(["topics", "list"], env={"HIGHWATER_DEBUG": "1"})
    assert isinstance(result.exception, BaseExceptionGroup | RuntimeError)
