"""IncrementalAlterConfigs' checks and DescribeConfigs' values and sources
(broker/config/config_admin.py): pure, from a BrokerConfig and the stored configs."""

from __future__ import annotations

import pytest

from broker.config.broker_config import load_config
from broker.config.config_admin import (
    AlterConfigError,
    altered_broker_defaults,
    altered_topic_config,
    describe_broker,
    describe_broker_defaults,
    describe_topic,
    static_defaults,
)
from broker.config.topic_config import TOPIC_CONFIG_KEYS
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import ConfigSource, DescribeConfigsResourceResult
from protocol.messages.incremental_alter_configs import AlterableConfig, AlterConfigOpType

SET, DELETE = AlterConfigOpType.SET, AlterConfigOpType.DELETE
CONFIG = load_config(
    None,
    ["broker.id=1", "zookeeper.connect=zk:2181", "log.retention.hours=1", "message.max.bytes=5000"],
)
STATIC = static_defaults(CONFIG)


def op(name: str, value: str | None = None, kind: int = SET) -> AlterableConfig:
    return AlterableConfig(name, kind, value)


def refused(call: object) -> AlterConfigError:
    assert callable(call)
    with pytest.raises(AlterConfigError) as info:
        call()
    return info.value


# --- altering a topic --------------------------------------------------------------------------


def test_set_and_delete_apply_to_what_is_stored() -> None:
    stored = {"retention.ms": "1000", "segment.bytes": "4096"}
    altered = altered_topic_config(
        stored, [op("retention.ms", "60000"), op("segment.bytes", kind=DELETE), op("flush.ms", "5")]
    )
    assert altered == {"retention.ms": "60000", "flush.ms": "5"}
    assert stored == {"retention.ms": "1000", "segment.bytes": "4096"}  # not mutated


def test_deleting_a_key_that_is_not_set_is_fine() -> None:
    assert altered_topic_config({}, [op("retention.ms", kind=DELETE)]) == {}


@pytest.mark.parametrize(
    ("ops", "code", "names"),
    [
        ([op("retention.mss", "1")], ErrorCode.INVALID_CONFIG, "retention.mss"),
        ([op("retention.mss", kind=DELETE)], ErrorCode.INVALID_CONFIG, "retention.mss"),
        ([op("retention.ms", "soon")], ErrorCode.INVALID_CONFIG, "retention.ms"),
        ([op("segment.bytes", "12")], ErrorCode.INVALID_CONFIG, "segment.bytes"),
        ([op("cleanup.policy", "compaction")], ErrorCode.INVALID_CONFIG, "cleanup.policy"),
        ([op("retention.ms", None)], ErrorCode.INVALID_CONFIG, "retention.ms"),
        ([op("retention.ms", "1"), op("retention.ms", "2")], ErrorCode.INVALID_REQUEST, "twice"),
        ([op("retention.ms", "1", AlterConfigOpType.APPEND)], ErrorCode.INVALID_CONFIG, "list"),
        ([op("retention.ms", "1", 7)], ErrorCode.INVALID_REQUEST, "retention.ms"),
    ],
)
def test_a_bad_operation_refuses_the_resource_naming_the_key(
    ops: list[AlterableConfig], code: ErrorCode, names: str
) -> None:
    error = refused(lambda: altered_topic_config({}, ops))
    assert error.code == code
    assert names in error.message


def test_values_are_checked_exactly_as_at_creation() -> None:
    """The same message as CreateTopics gives (broker/config/topic_config.py)."""
    error = refused(lambda: altered_topic_config({}, [op("retention.ms", "-2")]))
    assert error.message == (
        "invalid value '-2' for topic config retention.ms: "
        "expected a long integer >= -1 (-1: no limit)"
    )
    assert (
        "did you mean 'retention.ms'"
        in refused(lambda: altered_topic_config({}, [op("retention.mss", "1")])).message
    )


# --- altering the broker defaults --------------------------------------------------------------


def test_dynamic_broker_settings_may_be_set_as_cluster_wide_defaults() -> None:
    altered = altered_broker_defaults(
        {"log.retention.ms": "5"},
        [op("log.retention.ms", kind=DELETE), op("log.segment.bytes", "2048")],
        STATIC,
    )
    assert altered == {"log.segment.bytes": "2048"}


def test_a_read_only_broker_setting_is_an_invalid_request_naming_it() -> None:
    error = refused(lambda: altered_broker_defaults({}, [op("log.dirs", "/x")], STATIC))
    assert error.code == ErrorCode.INVALID_REQUEST
    assert "log.dirs cannot be updated dynamically" in error.message
    error = refused(lambda: altered_broker_defaults({}, [op("log.retention.hours", "1")], STATIC))
    assert error.code == ErrorCode.INVALID_REQUEST


def test_unknown_broker_settings_and_bad_values_are_invalid_config() -> None:
    error = refused(lambda: altered_broker_defaults({}, [op("log.retention.mss", "1")], STATIC))
    assert (error.code, "log.retention.mss" in error.message) == (ErrorCode.INVALID_CONFIG, True)
    error = refused(lambda: altered_broker_defaults({}, [op("log.segment.bytes", "1")], STATIC))
    assert error.code == ErrorCode.INVALID_CONFIG
    assert error.message.startswith("invalid value '1' for broker config log.segment.bytes")


# --- describing ----------------------------------------------------------------------------------


def by_name(
    entries: list[DescribeConfigsResourceResult],
) -> dict[str, DescribeConfigsResourceResult]:
    return {e.name: e for e in entries}


def test_a_topic_shows_every_config_with_its_source_and_synonyms() -> None:
    described = by_name(
        describe_topic(CONFIG, {"log.segment.bytes": "2048"}, {"max.message.bytes": "100"})
    )
    assert sorted(described) == sorted(TOPIC_CONFIG_KEYS)
    override = described["max.message.bytes"]
    assert (override.value, override.config_source) == ("100", ConfigSource.DYNAMIC_TOPIC_CONFIG)
    assert [(s.name, s.value, s.source) for s in override.synonyms] == [
        ("max.message.bytes", "100", ConfigSource.DYNAMIC_TOPIC_CONFIG),
        ("message.max.bytes", "5000", ConfigSource.STATIC_BROKER_CONFIG),
        ("message.max.bytes", "1048588", ConfigSource.DEFAULT_CONFIG),
    ]
    dynamic = described["segment.bytes"]
    assert (dynamic.value, dynamic.config_source) == (
        "2048",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    # A fallback in server.properties: the resolved value, and where it came from.
    retention = described["retention.ms"]
    assert (retention.value, retention.config_source) == (
        "3600000",
        ConfigSource.STATIC_BROKER_CONFIG,
    )
    assert [(s.name, s.value) for s in retention.synonyms] == [
        ("log.retention.hours", "1"),
        ("log.retention.hours", "168"),
    ]
    builtin = described["segment.ms"]
    assert (builtin.value, builtin.config_source) == ("604800000", ConfigSource.DEFAULT_CONFIG)
    assert described["cleanup.policy"].value == "delete"
    assert not any(e.read_only for e in described.values())
    assert described["retention.ms"].documentation


def test_a_broker_shows_every_setting_read_only_unless_dynamic() -> None:
    described = by_name(describe_broker(CONFIG, {"log.retention.ms": "60000"}))
    assert described["broker.id"].value == "1"
    assert described["broker.id"].read_only
    assert described["log.dirs"].read_only
    retention = described["log.retention.ms"]
    assert not retention.read_only
    assert (retention.value, retention.config_source) == (
        "60000",
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
    )
    assert [s.source for s in retention.synonyms] == [
        ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG,
        ConfigSource.STATIC_BROKER_CONFIG,
        ConfigSource.DEFAULT_CONFIG,
    ]
    assert described["log.retention.hours"].value == "1"
    assert described["log.retention.minutes"].value is None  # unset, no default of its own
    assert described["broker.rack"].value is None
    assert described["message.max.bytes"].config_source == ConfigSource.STATIC_BROKER_CONFIG


def test_the_cluster_wide_defaults_show_what_is_set() -> None:
    described = describe_broker_defaults({"log.retention.ms": "60000", "old.key": "x"})
    assert [(e.name, e.value, e.config_source) for e in described] == [
        ("log.retention.ms", "60000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        ("old.key", "x", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
    ]
