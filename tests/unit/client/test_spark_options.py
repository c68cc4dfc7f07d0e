"""The Spark source's and sink's options: every option, every error (pure, no Spark session)."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from client.spark.offsets import TopicPartition
from client.spark.options import (
    DEFAULT_POLL_TIMEOUT_MS,
    OptionError,
    SinkOptions,
    SourceOptions,
    parse_offsets_json,
    parse_sink_options,
    parse_source_options,
)

TP = TopicPartition
BOOT = {"bootstrap.servers": "localhost:9092"}


def source(
    extra: Mapping[str, str] | None = None, *, streaming: bool = True, **options: str
) -> SourceOptions:
    """Source options with BOOT; `extra` for keys that are not Python names."""
    return parse_source_options({**BOOT, **(extra or {}), **options}, streaming=streaming)


def source_error(raw: Mapping[str, str], *, streaming: bool = True) -> str:
    with pytest.raises(OptionError) as info:
        parse_source_options(raw, streaming=streaming)
    return str(info.value)


# --- defaults and each option ------------------------------------------------------------------


def test_streaming_defaults() -> None:
    opts = source(subscribe="events")
    assert opts == SourceOptions(
        bootstrap_servers="localhost:9092",
        subscribe=("events",),
        starting_offsets="latest",
        ending_offsets="latest",
        fail_on_data_loss=True,
        include_headers=False,
        poll_timeout_ms=DEFAULT_POLL_TIMEOUT_MS,
    )
    assert opts.max_offsets_per_trigger is None
    assert opts.min_partitions is None
    assert opts.starting_timestamp_ms is None
    assert opts.group_id_for_lag is None


def test_group_id_for_lag_is_for_streams_and_not_empty() -> None:
    assert source(subscribe="t", GroupIdForLag=" lag ").group_id_for_lag == "lag"
    with pytest.raises(OptionError, match="'groupIdForLag' is empty"):
        source(subscribe="t", groupIdForLag=" ")
    with pytest.raises(OptionError, match="'groupIdForLag' is for streaming queries only"):
        parse_source_options(
            {"bootstrap.servers": "h:1", "subscribe": "t", "groupIdForLag": "g"}, streaming=False
        )


def test_batch_starts_at_earliest_by_default() -> None:
    opts = source(streaming=False, subscribe="events")
    assert opts.starting_offsets == "earliest"
    assert opts.ending_offsets == "latest"


def test_subscribe_splits_on_commas_and_drops_blanks() -> None:
    assert source(subscribe=" a, b,,c ,").subscribe == ("a", "b", "c")


def test_subscribe_with_no_topic_is_an_error() -> None:
    assert "'subscribe'" in source_error({**BOOT, "subscribe": " , ,"})


def test_subscribe_pattern() -> None:
    opts = source(subscribePattern=" events-.* ")
    assert opts.subscribe_pattern == "events-.*"
    assert opts.subscribe is None and opts.assign is None


@pytest.mark.parametrize("pattern", ["", "   "])
def test_empty_subscribe_pattern_is_an_error(pattern: str) -> None:
    assert "'subscribePattern'" in source_error({**BOOT, "subscribePattern": pattern})


def test_bad_subscribe_pattern_is_an_error() -> None:
    message = source_error({**BOOT, "subscribePattern": "events-("})
    assert "'subscribePattern'" in message and "regular expression" in message


def test_assign_is_sorted_and_deduplicated() -> None:
    opts = source(assign='{"b": [1, 0], "a": [2, 2]}')
    assert opts.assign == (TP("a", 2), TP("b", 0), TP("b", 1))
    assert opts.subscribe is None and opts.subscribe_pattern is None


@pytest.mark.parametrize(
    "text",
    [
        "nope",
        "[]",
        "{}",
        '["a"]',
        '{"a": []}',
        '{"a": 0}',
        '{"a": {"0": 1}}',
        '{"a": [-1]}',
        '{"a": [1.0]}',
        '{"a": ["0"]}',
        '{"a": [true]}',
    ],
)
def test_bad_assign_json_is_an_error(text: str) -> None:
    assert "'assign'" in source_error({**BOOT, "assign": text})


def test_matches_follows_the_subscription() -> None:
    assert source(subscribe="a,b").matches("b")
    assert not source(subscribe="a,b").matches("ab")
    # subscribePattern must match the whole name, as Java's Pattern.matcher().matches()
    assert source(subscribePattern="ev.*").matches("events")
    assert not source(subscribePattern="ev").matches("events")
    assigned = source(assign='{"a": [0]}')
    assert assigned.matches("a") and not assigned.matches("b")


def test_starting_offsets_words() -> None:
    assert source(subscribe="a", startingOffsets="earliest").starting_offsets == "earliest"
    assert source(subscribe="a", startingOffsets=" LATEST ").starting_offsets == "latest"
    assert (
        source(streaming=False, subscribe="a", startingOffsets="Earliest").starting_offsets
        == "earliest"
    )


def test_starting_offsets_json_with_earliest_and_latest_markers() -> None:
    opts = source(subscribe="a", startingOffsets='{"a": {"0": 23, "1": -2, "2": -1}}')
    assert opts.starting_offsets == {TP("a", 0): 23, TP("a", 1): -2, TP("a", 2): -1}


def test_ending_offsets_latest_word_and_json() -> None:
    assert source(streaming=False, subscribe="a", endingOffsets="latest").ending_offsets == "latest"
    opts = source(streaming=False, subscribe="a", endingOffsets='{"a": {"0": 50, "1": -1}}')
    assert opts.ending_offsets == {TP("a", 0): 50, TP("a", 1): -1}


def test_ending_offsets_cannot_be_earliest() -> None:
    message = source_error({**BOOT, "subscribe": "a", "endingOffsets": "earliest"}, streaming=False)
    assert "'endingOffsets'" in message and "earliest" in message


def test_ending_offsets_json_cannot_hold_earliest() -> None:
    message = source_error(
        {**BOOT, "subscribe": "a", "endingOffsets": '{"a": {"0": -2}}'}, streaming=False
    )
    assert "'endingOffsets'" in message and "-2" in message


@pytest.mark.parametrize("ending", ["latest", '{"a": {"0": 5}}'])
def test_ending_offsets_is_for_batch_only(ending: str) -> None:
    message = source_error({**BOOT, "subscribe": "a", "endingOffsets": ending})
    assert "'endingOffsets'" in message and "batch" in message


@pytest.mark.parametrize("starting", ["latest", '{"a": {"0": -1}}'])
def test_batch_starting_offsets_cannot_be_latest(starting: str) -> None:
    message = source_error({**BOOT, "subscribe": "a", "startingOffsets": starting}, streaming=False)
    assert "'startingOffsets'" in message


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("soonest", "not JSON"),
        ("{bad json", "not JSON"),
        ("[]", "expected"),
        ("{}", "expected"),
        ('"earliest"', "expected"),
        ('{"a": 5}', "partition map"),
        ('{"a": {}}', "partition map"),
        ('{"a": {"0": -3}}', "-3"),
        ('{"a": {"0": 1.5}}', "1.5"),
        ('{"a": {"0": "5"}}', "'5'"),
        ('{"a": {"0": true}}', "True"),
        ('{"a": {"0": null}}', "None"),
        ('{"a": {"x": 5}}', "integer"),
        ('{"a": {"-1": 5}}', ">= 0"),
    ],
)
@pytest.mark.parametrize("option", ["startingOffsets", "endingOffsets"])
def test_bad_offsets_json_is_an_error_naming_the_option(
    option: str, text: str, fragment: str
) -> None:
    message = source_error({**BOOT, "subscribe": "a", option: text}, streaming=False)
    assert repr(option) in message and fragment in message


def test_offsets_json_too_long_is_an_error() -> None:
    text = '{"a": {"0": 1}}' + " " * 1_000_000
    with pytest.raises(OptionError, match="longer than"):
        parse_offsets_json(text, "startingOffsets")


def test_offsets_json_of_several_topics() -> None:
    assert parse_offsets_json('{"a": {"0": 0}, "b": {"3": 9, "1": 0}}', "x") == {
        TP("a", 0): 0,
        TP("b", 3): 9,
        TP("b", 1): 0,
    }


def test_assign_with_offsets_for_exactly_its_partitions() -> None:
    opts = source(
        streaming=False,
        assign='{"a": [0, 1]}',
        startingOffsets='{"a": {"0": 5, "1": -2}}',
        endingOffsets='{"a": {"0": 9, "1": -1}}',
    )
    assert opts.starting_offsets == {TP("a", 0): 5, TP("a", 1): -2}
    assert opts.ending_offsets == {TP("a", 0): 9, TP("a", 1): -1}


@pytest.mark.parametrize(
    ("option", "text"),
    [
        ("startingOffsets", '{"a": {"0": 5}}'),  # one missing
        ("startingOffsets", '{"a": {"0": 5, "1": 5, "2": 5}}'),  # one too many
        ("endingOffsets", '{"b": {"0": 5, "1": 5}}'),  # another topic
    ],
)
def test_assign_with_offsets_for_other_partitions_is_an_error(option: str, text: str) -> None:
    message = source_error({**BOOT, "assign": '{"a": [0, 1]}', option: text}, streaming=False)
    assert repr(option) in message and "assigned partitions" in message


def test_starting_timestamp() -> None:
    assert source(subscribe="a", startingTimestamp="1700000000000").starting_timestamp_ms == (
        1_700_000_000_000
    )
    assert source(subscribe="a", startingTimestamp="0").starting_timestamp_ms == 0


@pytest.mark.parametrize("value", ["-1", "yesterday", "1.5", ""])
def test_bad_starting_timestamp_is_an_error(value: str) -> None:
    assert "'startingTimestamp'" in source_error(
        {**BOOT, "subscribe": "a", "startingTimestamp": value}
    )


@pytest.mark.parametrize(("text", "strategy"), [("latest", "latest"), (" ERROR ", "error")])
def test_starting_offsets_by_timestamp_strategy(text: str, strategy: str) -> None:
    options = source(subscribe="a", startingTimestamp="5", startingOffsetsByTimestampStrategy=text)
    assert options.timestamp_strategy == strategy
    assert source(subscribe="a", startingTimestamp="5").timestamp_strategy == "error"  # Spark's


def test_bad_starting_offsets_by_timestamp_strategy_is_an_error() -> None:
    message = source_error(
        {**BOOT, "subscribe": "a", "startingOffsetsByTimestampStrategy": "earliest"}
    )
    assert "'startingOffsetsByTimestampStrategy'" in message and "'earliest'" in message


@pytest.mark.parametrize("streaming", [True, False])
def test_starting_timestamp_with_starting_offsets_is_an_error(streaming: bool) -> None:
    message = source_error(
        {**BOOT, "subscribe": "a", "startingOffsets": "earliest", "startingTimestamp": "5"},
        streaming=streaming,
    )
    assert "'startingOffsets'" in message and "'startingTimestamp'" in message


def test_max_offsets_per_trigger() -> None:
    assert source(subscribe="a", maxOffsetsPerTrigger="1000").max_offsets_per_trigger == 1000


@pytest.mark.parametrize("value", ["0", "-5", "many", "1e3"])
def test_bad_max_offsets_per_trigger_is_an_error(value: str) -> None:
    message = source_error({**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": value})
    assert "'maxOffsetsPerTrigger'" in message


def test_max_offsets_per_trigger_is_for_streaming_only() -> None:
    message = source_error(
        {**BOOT, "subscribe": "a", "maxOffsetsPerTrigger": "10"}, streaming=False
    )
    assert "'maxOffsetsPerTrigger'" in message and "streaming" in message


@pytest.mark.parametrize("streaming", [True, False])
def test_min_partitions(streaming: bool) -> None:
    assert source(streaming=streaming, subscribe="a", minPartitions=" 12 ").min_partitions == 12


@pytest.mark.parametrize("value", ["0", "-1", "ten"])
def test_bad_min_partitions_is_an_error(value: str) -> None:
    assert "'minPartitions'" in source_error({**BOOT, "subscribe": "a", "minPartitions": value})


@pytest.mark.parametrize(
    ("option", "field"),
    [("failOnDataLoss", "fail_on_data_loss"), ("includeHeaders", "include_headers")],
)
@pytest.mark.parametrize(("text", "value"), [("true", True), ("FALSE", False), (" True ", True)])
def test_boolean_options(option: str, field: str, text: str, value: bool) -> None:
    assert getattr(source({option: text}, subscribe="a"), field) is value


@pytest.mark.parametrize("option", ["failOnDataLoss", "includeHeaders"])
@pytest.mark.parametrize("text", ["yes", "1", ""])
def test_bad_boolean_is_an_error(option: str, text: str) -> None:
    message = source_error({**BOOT, "subscribe": "a", option: text})
    assert repr(option) in message and "true or false" in message


def test_poll_timeout() -> None:
    opts = source({"kafkaConsumer.pollTimeoutMs": "5000"}, subscribe="a")
    assert opts.poll_timeout_ms == 5000


@pytest.mark.parametrize("value", ["0", "soon"])
def test_bad_poll_timeout_is_an_error(value: str) -> None:
    message = source_error({**BOOT, "subscribe": "a", "kafkaConsumer.pollTimeoutMs": value})
    assert "'kafkaConsumer.pollTimeoutMs'" in message


# --- subscription: exactly one of three ---------------------------------------------------------


def test_no_subscription_is_an_error() -> None:
    message = source_error(BOOT)
    assert "exactly one" in message
    for name in ("'subscribe'", "'subscribePattern'", "'assign'"):
        assert name in message


@pytest.mark.parametrize(
    "given",
    [
        {"subscribe": "a", "subscribePattern": "a.*"},
        {"subscribe": "a", "assign": '{"a": [0]}'},
        {"subscribePattern": "a.*", "assign": '{"a": [0]}'},
        {"subscribe": "a", "subscribePattern": "a.*", "assign": '{"a": [0]}'},
    ],
)
def test_more_than_one_subscription_is_an_error(given: dict[str, str]) -> None:
    message = source_error({**BOOT, **given})
    assert "exactly one" in message and "(got " in message


# --- bootstrap servers ---------------------------------------------------------------------------


def test_kafka_bootstrap_servers_is_accepted_alone() -> None:
    opts = parse_source_options(
        {"kafka.bootstrap.servers": " h1:9092,h2:9092 ", "subscribe": "a"}, streaming=True
    )
    assert opts.bootstrap_servers == "h1:9092,h2:9092"


def test_both_bootstrap_spellings_may_agree() -> None:
    raw = {"bootstrap.servers": "h:1", "kafka.bootstrap.servers": "h:1", "subscribe": "a"}
    assert parse_source_options(raw, streaming=True).bootstrap_servers == "h:1"


def test_both_bootstrap_spellings_disagreeing_is_an_error() -> None:
    raw = {"bootstrap.servers": "h:1", "kafka.bootstrap.servers": "h:2", "subscribe": "a"}
    assert "disagree" in source_error(raw)


def test_missing_bootstrap_is_an_error() -> None:
    message = source_error({"subscribe": "a"})
    assert "'bootstrap.servers'" in message and "required" in message


def test_empty_bootstrap_is_an_error() -> None:
    assert "empty" in source_error({"bootstrap.servers": "  ", "subscribe": "a"})


# --- keys: case, unknown, Spark's own -----------------------------------------------------------


def test_keys_are_case_insensitive() -> None:
    opts = parse_source_options(
        {
            "KAFKA.Bootstrap.Servers": "h:1",
            "SUBSCRIBEPATTERN": "a.*",
            "startingoffsets": "earliest",
            "MaxOffsetsPerTrigger": "7",
            "MINPARTITIONS": "3",
            "FailOnDataLoss": "false",
            "includeheaders": "true",
            "KafkaConsumer.PollTimeoutMS": "9",
        },
        streaming=True,
    )
    assert opts == SourceOptions(
        bootstrap_servers="h:1",
        subscribe_pattern="a.*",
        starting_offsets="earliest",
        max_offsets_per_trigger=7,
        min_partitions=3,
        fail_on_data_loss=False,
        include_headers=True,
        poll_timeout_ms=9,
    )


@pytest.mark.parametrize("key", ["kafka.acks", "startingOffset", "groupIdPrefix"])
def test_unknown_source_option_is_named(key: str) -> None:
    message = source_error({**BOOT, "subscribe": "a", key: "x"})
    assert "unknown option" in message and repr(key) in message


def test_kafka_prefixed_security_options_reach_the_clients_without_the_prefix() -> None:
    given = {
        "kafka.security.protocol": "SASL_SSL",
        "KAFKA.SASL.MECHANISM": "SCRAM-SHA-256",
        "kafka.sasl.username": "alice",
        "kafka.sasl.password": "secret",
        "kafka.ssl.truststore.location": "/etc/ca.pem",
    }
    expected = (
        ("security.protocol", "SASL_SSL"),
        ("sasl.mechanism", "SCRAM-SHA-256"),
        ("sasl.username", "alice"),
        ("sasl.password", "secret"),
        ("ssl.truststore.location", "/etc/ca.pem"),
    )
    assert source(given, subscribe="a").security == expected
    assert parse_sink_options({**BOOT, **given}).security == expected
    assert source(subscribe="a").security == () == parse_sink_options(BOOT).security


@pytest.mark.parametrize("key", ["path", "checkpointLocation", "queryName", "PATH"])
def test_sparks_own_keys_are_ignored(key: str) -> None:
    assert source({key: "/tmp/x"}, subscribe="a") == source(subscribe="a")
    assert parse_sink_options({**BOOT, key: "/tmp/x"}) == SinkOptions("localhost:9092")


def test_option_error_is_a_value_error() -> None:
    assert issubclass(OptionError, ValueError)


# --- sink ----------------------------------------------------------------------------------------


def test_sink_options() -> None:
    assert parse_sink_options(BOOT) == SinkOptions("localhost:9092", None)
    assert parse_sink_options({**BOOT, "Topic": " out "}) == SinkOptions("localhost:9092", "out")
    assert parse_sink_options({"kafka.bootstrap.servers": "h:1", "topic": "t"}) == SinkOptions(
        "h:1", "t"
    )


def test_sink_compression_by_kafkas_name() -> None:
    options = parse_sink_options({**BOOT, "kafka.compression.type": "LZ4"})
    assert options == SinkOptions("localhost:9092", None, "lz4")
    with pytest.raises(OptionError, match=r"'kafka\.compression\.type'"):
        parse_sink_options({**BOOT, "kafka.compression.type": "brotli"})


def test_sink_empty_topic_is_an_error() -> None:
    with pytest.raises(OptionError, match="'topic'"):
        parse_sink_options({**BOOT, "topic": "  "})


def test_sink_unknown_option_is_named() -> None:
    with pytest.raises(OptionError, match="unknown option 'subscribe'"):
        parse_sink_options({**BOOT, "subscribe": "a"})


def test_sink_bootstrap_errors() -> None:
    with pytest.raises(OptionError, match="required"):
        parse_sink_options({"topic": "t"})
    with pytest.raises(OptionError, match="disagree"):
        parse_sink_options({"bootstrap.servers": "a:1", "kafka.bootstrap.servers": "b:1"})
