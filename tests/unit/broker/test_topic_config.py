"""Per-topic configs: every known key, rejected keys and values, and the LogConfig they make."""

from __future__ import annotations

import pytest

from broker.log.config import LogConfig
from broker.topic_config import (
    TOPIC_CONFIG_KEYS,
    TopicConfigError,
    log_config_for,
    validate_topic_config,
)

# A valid value for every key we claim to support, and the LogConfig field it sets (if any).
VALID: dict[str, tuple[str, str | None, int | None]] = {
    "segment.bytes": ("1048576", "segment_bytes", 1048576),
    "segment.ms": ("60000", "segment_ms", 60000),
    "segment.index.bytes": ("4096", "segment_index_bytes", 4096),
    "index.interval.bytes": ("0", "index_interval_bytes", 0),
    "retention.ms": ("-1", "retention_ms", -1),
    "retention.bytes": ("123456", "retention_bytes", 123456),
    "flush.messages": ("1", "flush_messages", 1),
    "flush.ms": ("1000", "flush_ms", 1000),
    "max.message.bytes": ("2000", "max_message_bytes", 2000),
    "min.insync.replicas": ("2", None, None),
    "unclean.leader.election.enable": ("true", None, None),
    "cleanup.policy": ("delete", None, None),
    "message.timestamp.type": ("CreateTime", None, None),
}


def test_known_keys_are_exactly_the_documented_ones() -> None:
    assert set(TOPIC_CONFIG_KEYS) == set(VALID)
    assert list(TOPIC_CONFIG_KEYS) == sorted(TOPIC_CONFIG_KEYS)


@pytest.mark.parametrize("key", sorted(VALID))
def test_every_known_key_accepts_a_valid_value(key: str) -> None:
    value, field, expected = VALID[key]
    assert validate_topic_config({key: value}) == {key: value}
    config = log_config_for(LogConfig(), {key: value})
    if field is not None:
        assert getattr(config, field) == expected
    else:
        assert config == LogConfig()  # not a log setting: the defaults are untouched


def test_all_keys_at_once() -> None:
    everything = {key: value for key, (value, _, _) in VALID.items()}
    assert validate_topic_config(everything) == everything
    config = log_config_for(LogConfig(), everything)
    for value, field, expected in VALID.values():
        if field is not None:
            assert getattr(config, field) == expected, (field, value)


def test_empty_config_is_fine() -> None:
    assert validate_topic_config({}) == {}
    assert log_config_for(LogConfig(), {}) == LogConfig()


@pytest.mark.parametrize(
    "key", ["retention.hours", "message.max.bytes", "log.segment.bytes", "", "Segment.Bytes"]
)
def test_unknown_key_error_names_the_key(key: str) -> None:
    with pytest.raises(TopicConfigError) as info:
        validate_topic_config({"retention.ms": "1000", key: "1"})
    assert repr(key) in str(info.value)


def test_a_key_without_a_value_is_rejected() -> None:
    with pytest.raises(TopicConfigError, match=r"retention\.ms"):
        validate_topic_config({"retention.ms": None})


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("retention.ms", "abc"),
        ("retention.ms", ""),
        ("retention.ms", "1.5"),
        ("retention.ms", "-2"),
        ("retention.bytes", "-2"),
        ("segment.bytes", "-1"),
        ("segment.bytes", "100"),  # below LogConfig's minimum of 128
        ("segment.ms", "0"),
        ("segment.index.bytes", "10"),
        ("index.interval.bytes", "-1"),
        ("flush.messages", "0"),
        ("flush.ms", "-1"),
        ("max.message.bytes", "0"),
        ("min.insync.replicas", "0"),
        ("min.insync.replicas", "two"),
        ("unclean.leader.election.enable", "yes"),
        ("unclean.leader.election.enable", "1"),
        ("cleanup.policy", "compact"),
        ("cleanup.policy", "delete,compact"),
        ("message.timestamp.type", "LogAppendTime"),
    ],
)
def test_bad_values_are_rejected_naming_the_key(key: str, value: str) -> None:
    with pytest.raises(TopicConfigError) as info:
        validate_topic_config({key: value})
    message = str(info.value)
    # The operator must be able to tell which setting was wrong.
    assert key in message or key.replace(".", "_") in message, message


def test_integers_with_digit_group_underscores_are_rejected() -> None:
    """The value is stored in ZooKeeper as given and read by other tools; Python's int()
    accepts "1_000", which Kafka's Long.parseLong (and most other parsers) reject."""
    with pytest.raises(TopicConfigError):
        validate_topic_config({"retention.ms": "1_000"})


def test_integers_beyond_int64_are_rejected() -> None:
    with pytest.raises(TopicConfigError):
        validate_topic_config({"retention.bytes": str(1 << 63)})


def test_log_config_for_keeps_the_broker_defaults_for_unset_keys() -> None:
    defaults = LogConfig(segment_bytes=4096, retention_ms=5000, max_message_bytes=999)
    config = log_config_for(defaults, {"retention.ms": "7000"})
    assert config.retention_ms == 7000
    assert config.segment_bytes == 4096 and config.max_message_bytes == 999
    assert defaults.retention_ms == 5000  # not mutated


def test_log_config_for_range_errors_are_topic_config_errors() -> None:
    with pytest.raises(TopicConfigError):
        log_config_for(LogConfig(), {"segment.bytes": "1"})


def test_validate_returns_a_copy_with_only_the_given_keys() -> None:
    given = {"retention.ms": "1000", "cleanup.policy": "delete"}
    checked = validate_topic_config(given)
    assert checked == given and checked is not given
