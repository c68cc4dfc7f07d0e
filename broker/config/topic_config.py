"""Per-topic configs (`--config k=v` at creation), with Kafka's names, checked up front.

Each topic config names the broker setting that supplies its default (Kafka's mapping, e.g.
`retention.ms` <- `log.retention.ms`) and is parsed by that setting's table entry, so a value
is checked exactly as in server.properties. Stored in `/config/topics/<t>`; the log settings
override the broker's defaults for that topic's logs.
"""

from __future__ import annotations

import dataclasses
import difflib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from broker.config.config_def import InvalidValue, Setting, Value, string
from broker.config.log_config import LogConfig
from broker.config.settings import default_of, setting

__all__ = [
    "TOPIC_CONFIG_KEYS",
    "TOPIC_SETTINGS",
    "TopicConfigError",
    "TopicSetting",
    "log_config_for",
    "topic_setting",
    "validate_topic_config",
]


class TopicConfigError(ValueError):
    pass


@dataclass(frozen=True, slots=True)
class TopicSetting:
    """A topic config: its type, bounds and doc are `setting`'s, the broker's when it has one."""

    key: str
    setting: Setting
    broker_key: str | None  # the broker setting whose value is this topic's default

    @property
    def default(self) -> Value | None:
        """The built-in default: the broker setting's (fallbacks followed), or the topic's own."""
        return default_of(self.broker_key) if self.broker_key else self.setting.default

    @property
    def log_field(self) -> str | None:
        """The LogConfig field this config overrides (None: not a log setting)."""
        return self.setting.log_field

    def validate(self, value: str | None) -> str:
        """`value` if it is valid for this config, as given; TopicConfigError otherwise."""
        if value is None:
            raise TopicConfigError(f"topic config {self.key!r} needs a value")
        try:
            self.setting.parse(value)
        except InvalidValue as e:
            raise TopicConfigError(
                f"invalid value {value!r} for topic config {self.key}: expected {e.expected}"
            ) from None
        return value


def _from_broker(key: str, broker_key: str) -> TopicSetting:
    return TopicSetting(key, setting(broker_key), broker_key)


def _topic_only(entry: Setting) -> TopicSetting:
    return TopicSetting(entry.key, entry, None)


TOPIC_SETTINGS: Final = {
    t.key: t
    for t in (
        _from_broker("segment.bytes", "log.segment.bytes"),
        _from_broker("segment.ms", "log.roll.ms"),
        _from_broker("segment.index.bytes", "log.index.size.max.bytes"),
        _from_broker("index.interval.bytes", "log.index.interval.bytes"),
        _from_broker("retention.ms", "log.retention.ms"),
        _from_broker("retention.bytes", "log.retention.bytes"),
        _from_broker("flush.messages", "log.flush.interval.messages"),
        _from_broker("flush.ms", "log.flush.interval.ms"),
        _from_broker("max.message.bytes", "message.max.bytes"),
        _from_broker("min.insync.replicas", "min.insync.replicas"),
        _from_broker("unclean.leader.election.enable", "unclean.leader.election.enable"),
        _from_broker("cleanup.policy", "log.cleanup.policy"),
        _from_broker("min.cleanable.dirty.ratio", "log.cleaner.min.cleanable.ratio"),
        _from_broker("min.compaction.lag.ms", "log.cleaner.min.compaction.lag.ms"),
        _from_broker("max.compaction.lag.ms", "log.cleaner.max.compaction.lag.ms"),
        _from_broker("delete.retention.ms", "log.cleaner.delete.retention.ms"),
        # Kafka's broker default log.message.timestamp.type does not exist here: only one
        # value is supported.
        _topic_only(
            string(
                "message.timestamp.type",
                "CreateTime",
                "Record timestamps are the producer's (LogAppendTime is not supported).",
                choices=("CreateTime",),
                attr=None,
            )
        ),
    )
}
TOPIC_CONFIG_KEYS: Final = tuple(sorted(TOPIC_SETTINGS))


def topic_setting(key: str) -> TopicSetting:
    """The topic config named `key`; TopicConfigError if there is none."""
    found = TOPIC_SETTINGS.get(key)
    if found is None:
        close = difflib.get_close_matches(key, TOPIC_CONFIG_KEYS, n=1, cutoff=0.6)
        hint = f"did you mean {close[0]!r}? " if close else ""
        raise TopicConfigError(
            f"unknown topic config {key!r} ({hint}known: {', '.join(TOPIC_CONFIG_KEYS)})"
        )
    return found


def validate_topic_config(config: Mapping[str, str | None]) -> dict[str, str]:
    """The config with every key known and every value well formed, or TopicConfigError."""
    checked = {key: topic_setting(key).validate(value) for key, value in config.items()}
    if checked:
        log_config_for(LogConfig(), checked)  # LogConfig's own range checks
    return checked


def log_config_for(defaults: LogConfig, config: Mapping[str, str]) -> LogConfig:
    """`defaults` with the log settings of `config` (a topic's stored configs) applied."""
    try:
        changes: dict[str, Any] = {
            t.log_field: t.setting.parse(config[key])
            for key, t in TOPIC_SETTINGS.items()
            if t.log_field is not None and key in config
        }
    except InvalidValue as exc:
        raise TopicConfigError(f"invalid topic config value: expected {exc.expected}") from None
    try:
        return dataclasses.replace(defaults, **changes)
    except ValueError as exc:
        raise TopicConfigError(str(exc)) from exc
