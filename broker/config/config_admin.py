"""Altering and describing configs (Kafka's ConfigAdminManager and ConfigHelper): pure.

`altered_topic_config` / `altered_broker_defaults` apply IncrementalAlterConfigs' SET and DELETE
operations to what is stored, checking every key and value exactly as at topic creation or in
server.properties; a failure names the key and carries Kafka's error code (INVALID_CONFIG for
an unknown key or a bad value, INVALID_REQUEST for a request that makes no sense, such as a
broker setting that is not dynamic). `describe_topic`, `describe_broker` and
`describe_broker_defaults` give each config's value with its source and synonyms, highest
precedence first: topic override, dynamic cluster-wide default, server.properties, built-in.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from typing import Final

from broker.config.broker_config import SECRET_KEYS, BrokerConfig, value_of
from broker.config.config_def import InvalidValue, Setting, Type, format_value
from broker.config.dynamic_update import BrokerDefaults, with_dynamic_defaults
from broker.config.settings import KNOWN_KEYS, SETTINGS, setting
from broker.config.topic_config import (
    TOPIC_CONFIG_KEYS,
    TopicConfigError,
    topic_setting,
    validate_topic_config,
)
from protocol.errors import ErrorCode
from protocol.messages.describe_configs import (
    ConfigSource,
    ConfigType,
    DescribeConfigsResourceResult,
    DescribeConfigsSynonym,
)
from protocol.messages.incremental_alter_configs import AlterableConfig, AlterConfigOpType

__all__ = [
    "DYNAMIC_BROKER_KEYS",
    "AlterConfigError",
    "altered_broker_defaults",
    "altered_topic_config",
    "describe_broker",
    "describe_broker_defaults",
    "describe_topic",
    "static_defaults",
]

DYNAMIC_BROKER_KEYS: Final = tuple(s.key for s in SETTINGS if s.dynamic)
_CONFIG_TYPES: Final = {
    Type.INT: ConfigType.INT,
    Type.LONG: ConfigType.LONG,
    Type.BOOLEAN: ConfigType.BOOLEAN,
    Type.STRING: ConfigType.STRING,
    Type.LIST: ConfigType.LIST,
    Type.DOUBLE: ConfigType.DOUBLE,
}


class AlterConfigError(Exception):
    """A resource's alteration is refused: Kafka's error code and a message naming the key."""

    def __init__(self, code: ErrorCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


# --- altering -------------------------------------------------------------------------------


def altered_topic_config(
    current: Mapping[str, str], ops: Sequence[AlterableConfig]
) -> dict[str, str]:
    """The topic's stored overrides after `ops`, each key and value checked as CreateTopics
    checks them (broker/config/topic_config.py), the result as a whole too."""
    config = dict(current)
    for op in _checked_ops(ops):
        try:
            entry = topic_setting(op.name)
        except TopicConfigError as exc:
            raise AlterConfigError(ErrorCode.INVALID_CONFIG, str(exc)) from None
        if op.config_operation == AlterConfigOpType.DELETE:
            config.pop(op.name, None)
            continue
        try:
            config[op.name] = entry.validate(op.value)
        except TopicConfigError as exc:
            raise AlterConfigError(ErrorCode.INVALID_CONFIG, str(exc)) from None
    try:
        return validate_topic_config(config)
    except TopicConfigError as exc:
        raise AlterConfigError(ErrorCode.INVALID_CONFIG, str(exc)) from None


def altered_broker_defaults(
    current: Mapping[str, str], ops: Sequence[AlterableConfig], static: BrokerDefaults
) -> dict[str, str]:
    """The cluster-wide dynamic defaults after `ops`. A key must be a broker setting that
    Kafka lets change dynamically (`Setting.dynamic`); values are checked as in
    server.properties, and together with `static` (this broker's) as a log config."""
    config = dict(current)
    for op in _checked_ops(ops):
        if op.name not in KNOWN_KEYS:
            raise AlterConfigError(ErrorCode.INVALID_CONFIG, f"unknown broker config {op.name!r}")
        entry = setting(op.name)
        if not entry.dynamic:
            raise AlterConfigError(
                ErrorCode.INVALID_REQUEST,
                f"broker config {op.name} cannot be updated dynamically (read-only: set it in "
                f"server.properties); dynamic ones: {', '.join(DYNAMIC_BROKER_KEYS)}",
            )
        if op.config_operation == AlterConfigOpType.DELETE:
            config.pop(op.name, None)
            continue
        if op.value is None:
            message = f"broker config {op.name} needs a value"
            raise AlterConfigError(ErrorCode.INVALID_CONFIG, message)
        try:
            entry.parse(op.value)
        except InvalidValue as exc:
            raise AlterConfigError(
                ErrorCode.INVALID_CONFIG,
                f"invalid value {op.value!r} for broker config {op.name}: expected {exc.expected}",
            ) from None
        config[op.name] = op.value
    _, skipped = with_dynamic_defaults(static, config)
    if skipped:
        key, why = next(iter(skipped.items()))
        raise AlterConfigError(ErrorCode.INVALID_CONFIG, f"broker config {key}: {why}")
    return config


def _checked_ops(ops: Sequence[AlterableConfig]) -> Sequence[AlterableConfig]:
    """The operations, if each is SET or DELETE and names a key once (Kafka's rules)."""
    seen: set[str] = set()
    for op in ops:
        if op.name in seen:
            raise AlterConfigError(ErrorCode.INVALID_REQUEST, f"config {op.name} named twice")
        seen.add(op.name)
        if op.config_operation in (AlterConfigOpType.APPEND, AlterConfigOpType.SUBTRACT):
            name = AlterConfigOpType(op.config_operation).name
            raise AlterConfigError(
                ErrorCode.INVALID_CONFIG,
                f"{name} is for list configs; {op.name} is not one (use SET)",
            )
        if op.config_operation not in (AlterConfigOpType.SET, AlterConfigOpType.DELETE):
            raise AlterConfigError(
                ErrorCode.INVALID_REQUEST,
                f"unknown config operation {op.config_operation} for {op.name}",
            )
    return ops


# --- describing -----------------------------------------------------------------------------


def static_defaults(config: BrokerConfig) -> BrokerDefaults:
    """The broker's defaults as server.properties (and the built-in defaults) set them."""
    return BrokerDefaults(
        config.log_config(), config.min_insync_replicas, config.unclean_leader_election_enable
    )


def describe_topic(
    config: BrokerConfig, dynamic_defaults: Mapping[str, str], overrides: Mapping[str, str]
) -> list[DescribeConfigsResourceResult]:
    """Every topic config: the topic's override, else its broker setting's value here."""
    out = []
    for key in TOPIC_CONFIG_KEYS:
        topic_entry = topic_setting(key)
        synonyms: list[DescribeConfigsSynonym] = []
        if key in overrides:
            synonyms.append(
                DescribeConfigsSynonym(key, overrides[key], ConfigSource.DYNAMIC_TOPIC_CONFIG)
            )
        if topic_entry.broker_key is not None:
            value, broker = _broker_value(config, dynamic_defaults, topic_entry.broker_key)
            synonyms += broker
        else:
            value = _text(topic_entry.setting.default)
            synonyms.append(DescribeConfigsSynonym(key, value, ConfigSource.DEFAULT_CONFIG))
        if key in overrides:
            value = overrides[key]
        out.append(_entry(key, value, topic_entry.setting, synonyms, read_only=False))
    return out


def describe_broker(
    config: BrokerConfig, dynamic_defaults: Mapping[str, str]
) -> list[DescribeConfigsResourceResult]:
    """Every broker setting of this broker; the dynamic ones are not read-only."""
    out = []
    for entry in SETTINGS:
        value, synonyms = _broker_value(config, dynamic_defaults, entry.key)
        out.append(_entry(entry.key, value, entry, synonyms, read_only=not entry.dynamic))
    return out


def describe_broker_defaults(
    dynamic_defaults: Mapping[str, str],
) -> list[DescribeConfigsResourceResult]:
    """The cluster-wide dynamic defaults that are set (Kafka describes only those)."""
    out = []
    for key, text in sorted(dynamic_defaults.items()):
        source = ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
        synonyms = [DescribeConfigsSynonym(key, text, source)]
        entry = setting(key) if key in KNOWN_KEYS else None
        out.append(_entry(key, text, entry, synonyms, read_only=False))
    return out


def _broker_value(
    config: BrokerConfig, dynamic_defaults: Mapping[str, str], key: str
) -> tuple[str | None, list[DescribeConfigsSynonym]]:
    """Broker setting `key`'s value in force here, and where values of it may come from,
    highest first (Kafka's synonyms: the first is in force). A setting with a fallback lists
    the fallback's sources too, and its value is the resolved one: log.retention.hours=1 in
    server.properties gives log.retention.ms 3600000, from STATIC_BROKER_CONFIG."""
    entry = setting(key)
    chain = _fallback_chain(entry) if _has_own_value(entry) else [entry]
    synonyms: list[DescribeConfigsSynonym] = []
    if entry.dynamic and key in dynamic_defaults:
        synonyms.append(
            DescribeConfigsSynonym(
                key, dynamic_defaults[key], ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG
            )
        )
    synonyms += [
        DescribeConfigsSynonym(link.key, config.given[link.key], ConfigSource.STATIC_BROKER_CONFIG)
        for link in chain
        if link.key in config.given
    ]
    with_default = next((link for link in chain if link.default is not None), chain[-1])
    synonyms.append(
        DescribeConfigsSynonym(
            with_default.key, _text(with_default.default), ConfigSource.DEFAULT_CONFIG
        )
    )
    if key in SECRET_KEYS:  # Kafka's sensitive configs: described, never their values
        return None, [replace(s, value=None) for s in synonyms]
    if synonyms[0].source == ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG:
        return synonyms[0].value, synonyms
    return _effective(config, entry), synonyms


def _effective(config: BrokerConfig, entry: Setting) -> str | None:
    """The value this broker runs with (server.properties or built-in)."""
    if not _has_own_value(entry):
        # It only supplies another's default (log.retention.hours...): its value as given.
        given = config.given.get(entry.key)
        return given if given is not None else _text(entry.default)
    return _text(value_of(config, entry.key))


def _has_own_value(entry: Setting) -> bool:
    """Whether the broker resolves this setting to a value it uses (fallbacks followed)."""
    return entry.attr is not None or entry.key in ("listeners", "advertised.listeners")


def _fallback_chain(entry: Setting) -> list[Setting]:
    chain = [entry]
    while chain[-1].fallback is not None:
        chain.append(setting(chain[-1].fallback.key))
    return chain


def _text(value: object) -> str | None:
    if value is None:
        return None
    return format_value(value)  # type: ignore[arg-type]


def _entry(
    name: str,
    value: str | None,
    entry: Setting | None,
    synonyms: Sequence[DescribeConfigsSynonym],
    *,
    read_only: bool,
) -> DescribeConfigsResourceResult:
    return DescribeConfigsResourceResult(
        name,
        value,
        read_only,
        synonyms[0].source,
        is_sensitive=name in SECRET_KEYS,
        synonyms=tuple(synonyms),
        config_type=_CONFIG_TYPES[entry.type] if entry is not None else ConfigType.UNKNOWN,
        documentation=entry.doc if entry is not None else None,
    )
