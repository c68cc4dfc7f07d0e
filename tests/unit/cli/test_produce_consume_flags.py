"""produce/consume flags beyond the basics: headers, delimiters, -X, offsets, several topics."""

from __future__ import annotations

import json

from tests.unit.cli.fakes import FakeConsumer, FakeProducer, consumer, producer, run

__all__ = ["consumer", "producer"]  # fixtures


def test_headers_from_h_go_on_every_record_before_the_envelopes(
    producer: type[FakeProducer],
) -> None:
    result = run(
        ["produce", "t", "--json", "-H", "trace=abc", "-H", "empty=", "-H", "nil"],
        '{"value":"v","headers":[{"key":"own","value":"x"}]}\n',
    )
    assert result.exit_code == 0, result.output
    (sent,) = producer.instances[0].sent
    assert sent["headers"] == (("trace", b"abc"), ("empty", b""), ("nil", None), ("own", b"x"))


def test_null_and_custom_delimiters_keep_binary_values(producer: type[FakeProducer]) -> None:
    result = run(["produce", "t", "-0"], b"a\nb\0\xff\0")
    assert result.exit_code == 0, result.output
    assert [s["value"] for s in producer.instances[0].sent] == [b"a\nb", b"\xff"]
    result = run(["produce", "t", "-D", "\\x1e", "-K", "\\t"], b"k\tv1\x1ek2\tv\n2")
    assert result.exit_code == 0, result.output
    sent = producer.instances[1].sent
    assert [(s["key"], s["value"]) for s in sent] == [(b"k", b"v1"), (b"k2", b"v\n2")]


def test_a_line_over_max_request_size_is_refused_at_once_and_the_rest_is_sent(
    producer: type[FakeProducer],
) -> None:
    data = b"ok\n" + b"x" * 5000 + b"\nafter\n"
    result = run(["produce", "t", "-X", "max.request.size=1000", "--print-offsets"], data)
    assert result.exit_code == 1
    assert [s["value"] for s in producer.instances[0].sent] == [b"ok", b"after"]
    assert "line 2: 5000 bytes, over the 1000 a line may have" in result.stderr
    assert json.loads(result.stdout.splitlines()[1]) == {"error": "MESSAGE_TOO_LARGE", "line": 2}
    assert "Error: 1 of 3 records failed (MESSAGE_TOO_LARGE: 1)" in result.stderr


def test_many_failures_of_one_kind_print_a_few_lines_and_a_count(
    producer: type[FakeProducer],
) -> None:
    result = run(["produce", "t"], b"fail\n" * 1000)
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 5
    assert lines[-1] == "Error: 1000 of 1000 records failed (MESSAGE_TOO_LARGE: 1000)"


def test_producer_properties_by_kafka_names_and_flags_win(producer: type[FakeProducer]) -> None:
    args = ["produce", "t", "-X", "linger.ms=50", "--producer-property", "acks=1"]
    result = run([*args, "-X", "compression.type=lz4", "-X", "delivery.timeout.ms=30000"], b"x\n")
    assert result.exit_code == 0, result.output
    options = producer.instances[0].options
    assert (options["linger_ms"], options["acks"], options["delivery_timeout_ms"]) == (
        50.0,
        1,
        30000.0,
    )
    assert options["compression"] == "lz4"  # the producer takes every codec itself
    result = run(["produce", "t", "-X", "acks=1", "--acks", "all", "-X", "client.id=me"], b"x\n")
    assert result.exit_code == 0, result.output
    assert producer.instances[1].options["acks"] == -1
    assert producer.instances[1].options["client_id"] == "me"


def test_the_producers_retry_notices_are_warnings_on_stderr(producer: type[FakeProducer]) -> None:
    result = run(["produce", "t", "-X", "delivery.timeout.ms=30000"], b"retry\n")
    assert result.exit_code == 0, result.output
    assert result.stderr.splitlines() == [
        "WARN: t-0: LEADER_NOT_AVAILABLE, retrying (1 record waiting, the oldest for 5 s; they "
        "fail after delivery.timeout.ms 30000 ms)"
    ]


def test_records_the_close_failed_count_as_failed_or_unknown_as_the_producer_says(
    producer: type[FakeProducer],
) -> None:
    result = run(["produce", "t", "--print-offsets"], b"ok\naborted\nin doubt\n")
    assert result.exit_code == 1
    assert [json.loads(line) for line in result.stdout.splitlines()] == [
        {"partition": 0, "offset": 0},
        {"error": "ClientClosedError"},
        {"error": "ClientClosedError"},
    ]
    assert result.stderr.splitlines() == [
        "Error: line 2: closed: aborted",
        "Error: 1 of 3 records failed, 1 were not acknowledged in time (they may be in the "
        "topic) (ClientClosedError: 1)",
    ]


def test_consume_several_topics_and_a_pattern(consumer: type[FakeConsumer]) -> None:
    result = run(["consume", "t", "t2", "-o", "beginning", "-e", "--format", "%t:%s\n"])
    assert result.exit_code == 0, result.output
    assert result.stdout_bytes == b"t:v0\nt:\xff\nt:\nt2:other topic\n"
    result = run(["consume", "--pattern", "t.", "-o", "beginning", "-e", "--format", "%t\n"])
    assert result.stdout == "t2\n"
    result = run(["consume", "--pattern", "nothing.*", "-e"])
    assert result.exit_code == 1
    assert "no topic matches 'nothing.*'" in result.stderr


def test_consume_offset_forms_reach_the_consumer(consumer: type[FakeConsumer]) -> None:
    run(["consume", "t", "-o", "s@1001", "-e"])
    assert consumer.last is not None and consumer.last.resets == ["timestamp 1001"]
    run(["consume", "t", "--from-timestamp", "1970-01-01T00:00:01.001Z", "-e"])
    assert consumer.last.resets == ["timestamp 1001"]
    run(["consume", "t", "-o", "-1", "-e"])
    assert consumer.last.resets == ["offset 1", "offset 0"]  # one before each end, at least 0


def test_consume_e_at_stops_before_the_first_record_at_that_time(
    consumer: type[FakeConsumer],
) -> None:
    result = run(["consume", "t", "-o", "beginning", "-o", "e@1002", "--format", "%o@%T\n"])
    assert result.exit_code == 0, result.output
    assert result.stdout == "0@1000\n0@1001\n"  # partition 0 stops before offset 1 (ts 1002)
    assert "Processed a total of 2 messages" in result.stderr


def test_consume_absolute_offset_beyond_the_end_names_the_range(
    consumer: type[FakeConsumer],
) -> None:
    result = run(["consume", "t", "--partition", "0", "-o", "1900", "-e"])
    assert result.exit_code == 1
    assert result.stderr.strip().startswith(
        "Error: OFFSET_OUT_OF_RANGE: offset 1900 is not in t-0: valid are 0 (the log start "
        "offset) to 2 (the high watermark)"
    )
    result = run(["consume", "t", "--partition", "0", "-o", "1900", "-e", "-X",
                  "auto.offset.reset=earliest"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert consumer.last is not None
    assert consumer.last.options["auto_offset_reset"] == "earliest"
    assert consumer.last.resets == ["beginning"]


def test_a_record_send_refuses_is_reported_with_its_error_name(
    producer: type[FakeProducer],
) -> None:
    result = run(["produce", "t", "--print-offsets"], b"refuse\nok\n")
    assert result.exit_code == 1
    assert result.stdout.splitlines()[0] == '{"error":"MESSAGE_TOO_LARGE","line":1}'
    assert "Error: 1 of 2 records failed (MESSAGE_TOO_LARGE: 1)" in result.stderr


def test_z_sends_an_empty_value_as_a_tombstone(producer: type[FakeProducer]) -> None:
    result = run(["produce", "t", "-K", ":", "-Z"], b"alice:\nbob:v\n\n")
    assert result.exit_code == 1  # the last line has no key separator
    sent = [(s["key"], s["value"]) for s in producer.instances[0].sent]
    assert sent == [(b"alice", None), (b"bob", b"v")]
    result = run(["produce", "t", "-Z"], b"\nx\n")
    assert result.exit_code == 0, result.output
    assert [s["value"] for s in producer.instances[1].sent] == [None, b"x"]


def test_null_marker_sends_that_value_as_a_tombstone(producer: type[FakeProducer]) -> None:
    result = run(["produce", "t", "-K", ":", "--null-marker", "NULL"], b"a:NULL\nb:\nc:NULLx\n")
    assert result.exit_code == 0, result.output
    sent = [(s["key"], s["value"]) for s in producer.instances[0].sent]
    assert sent == [(b"a", None), (b"b", b""), (b"c", b"NULLx")]
    result = run(["produce", "t", "--json", "-Z"], b'{"value":""}\n')
    assert result.exit_code == 2
    assert "cannot be combined with --json" in result.stderr
