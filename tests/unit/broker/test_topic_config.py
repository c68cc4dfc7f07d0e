"""Per-topic configs: every known key, rejected keys and values, and the LogConfig they make."""

from __future__ import annotations

import pytest

from broker.config.broker_config import BrokerConfig, ConfigError, load_config
from broker.config.log_config import LogConfig
from broker.config.topic_config import (
    TOPIC_CONFIG_KEYS,
    TOPIC_SETTINGS,
    TopicConfigError,
    log_config_for,
    topic_setting,
    validate_topic_config,
)

# A valid value for every key we claim to support, and the LogConfig field it sets (if any).
VALID: dict[str, tuple[str, str | None, object]] = {
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
    "cleanup.policy": ("compact,delete", "cleanup_policy", ("compact", "delete")),
    "min.cleanable.dirty.ratio": ("0.25", "min_cleanable_dirty_ratio", 0.25),
    "min.compaction.lag.ms": ("1000", "min_compaction_lag_ms", 1000),
    "max.compaction.lag.ms": ("60000", "max_compaction_lag_ms", 60000),
    "delete.retention.ms": ("0", "delete_retention_ms", 0),
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
        ("cleanup.policy", "compact,truncate"),
        ("cleanup.policy", ""),
        ("min.cleanable.dirty.ratio", "1.5"),
        ("min.cleanable.dirty.ratio", "half"),
        ("delete.retention.ms", "-1"),
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


# --- each topic config and its broker setting (what DescribeConfigs/AlterConfigs will ask) -------

BROKER_KEYS = {
    "segment.bytes": "log.segment.bytes",
    "segment.ms": "log.roll.ms",
    "segment.index.bytes": "log.index.size.max.bytes",
    "index.interval.bytes": "log.index.interval.bytes",
    "retention.ms": "log.retention.ms",
    "retention.bytes": "log.retention.bytes",
    "flush.messages": "log.flush.interval.messages",
    "flush.ms": "log.flush.interval.ms",
    "max.message.bytes": "message.max.bytes",
    "min.insync.replicas": "min.insync.replicas",
    "unclean.leader.election.enable": "unclean.leader.election.enable",
    "cleanup.policy": "log.cleanup.policy",
    "min.cleanable.dirty.ratio": "log.cleaner.min.cleanable.ratio",
    "min.compaction.lag.ms": "log.cleaner.min.compaction.lag.ms",
    "max.compaction.lag.ms": "log.cleaner.max.compaction.lag.ms",
    "delete.retention.ms": "log.cleaner.delete.retention.ms",
    "message.timestamp.type": None,
}


@pytest.mark.parametrize("key", sorted(VALID))
def test_each_topic_config_names_the_broker_setting_supplying_its_default(key: str) -> None:
    assert topic_setting(key).broker_key == BROKER_KEYS[key]


def test_built_in_defaults_are_the_broker_settings_defaults() -> None:
    broker_defaults = BrokerConfig(broker_id=1, zookeeper_connect="zk:2181")
    assert topic_setting("retention.ms").default == 7 * 24 * 3600 * 1000
    assert topic_setting("max.message.bytes").default == broker_defaults.message_max_bytes
    assert topic_setting("unclean.leader.election.enable").default is False
    assert topic_setting("cleanup.policy").default == ("delete",)
    assert topic_setting("message.timestamp.type").default == "CreateTime"
    for key, (_, field, _) in VALID.items():
        if field is not None:  # a log setting: LogConfig's default, the broker's default
            assert topic_setting(key).default == getattr(LogConfig(), field), key
            assert topic_setting(key).default == getattr(broker_defaults.log_config(), field)


SAMPLES = [
    "", "abc", "1.5", "1_000", "+4", "-2", "-1", "0", "1", "63", "64", "127", "128", "4096",
    "2147483647", "2147483648", "9223372036854775807", "9223372036854775808",
    "true", "TRUE", "False", "yes",
]  # fmt: skip


@pytest.mark.parametrize("key", sorted(k for k, b in BROKER_KEYS.items() if b is not None))
def test_a_topic_config_accepts_exactly_what_its_broker_setting_accepts(key: str) -> None:
    broker_key = BROKER_KEYS[key]
    for value in SAMPLES:
        try:
            load_config(None, ["broker.id=1", "zookeeper.connect=zk:2181", f"{broker_key}={value}"])
            broker_ok = True
        except ConfigError:
            broker_ok = False
        try:
            topic_ok = topic_setting(key).validate(value) == value
        except TopicConfigError as e:
            topic_ok = False
            assert key in str(e) and repr(value) in str(e) and "expected" in str(e)
        assert topic_ok == broker_ok, (key, value)


def test_validate_is_one_call_per_key() -> None:
    assert topic_setting("retention.ms").validate("1000") == "1000"
    with pytest.raises(TopicConfigError, match=r"retention\.ms.*expected a long integer >= -1"):
        topic_setting("retention.ms").validate("-5")
    with pytest.raises(TopicConfigError, match=r"segment\.bytes.*expected an integer >= 128"):
        topic_setting("segment.bytes").validate("100")
    assert topic_setting("cleanup.policy").validate("compact") == "compact"
    with pytest.raises(TopicConfigError, match="expected delete, compact, or compact,delete"):
        topic_setting("cleanup.policy").validate("compact,truncate")


def test_unknown_topic_config_suggests_the_closest() -> None:
    with pytest.raises(TopicConfigError, match=r"did you mean 'retention\.ms'"):
        topic_setting("retention.msx")
    assert set(TOPIC_SETTINGS) == set(TOPIC_CONFIG_KEYS)
