"""Per-topic configs (`--config k=v` at creation), with Kafka's names, checked up front.

Stored in `/config/topics/<t>`; the log settings override the broker's defaults for that
topic's logs.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping

from broker.log.config import LogConfig

__all__ = ["TOPIC_CONFIG_KEYS", "TopicConfigError", "log_config_for", "validate_topic_config"]


class TopicConfigError(ValueError):
    pass


# topic config name -> LogConfig field (None: not a log setting)
_LOG_FIELDS: dict[str, str | None] = {
    "segment.bytes": "segment_bytes",
    "segment.ms": "segment_ms",
    "segment.index.bytes": "segment_index_bytes",
    "index.interval.bytes": "index_interval_bytes",
    "retention.ms": "retention_ms",
    "retention.bytes": "retention_bytes",
    "flush.messages": "flush_messages",
    "flush.ms": "flush_ms",
    "max.message.bytes": "max_message_bytes",
    "min.insync.replicas": None,
    "unclean.leader.election.enable": None,
}
_CHOICES: dict[str, tuple[str, ...]] = {
    "cleanup.policy": ("delete",),  # compaction is not supported
    "message.timestamp.type": ("CreateTime",),  # LogAppendTime is not supported
    "unclean.leader.election.enable": ("true", "false"),
}
TOPIC_CONFIG_KEYS = tuple(sorted({*_LOG_FIELDS, *_CHOICES}))
_INTEGER = re.compile(r"-?[0-9]+")  # Java's Long.parseLong: no "_", no "+", no spaces
_MIN_VALUE = {"retention.ms": -1, "retention.bytes": -1, "min.insync.replicas": 1}


def validate_topic_config(config: Mapping[str, str | None]) -> dict[str, str]:
    """The config with every key known and every value well formed, or TopicConfigError."""
    checked: dict[str, str] = {}
    for key, value in config.items():
        if key not in TOPIC_CONFIG_KEYS:
            raise TopicConfigError(
                f"unknown topic config {key!r} (known: {', '.join(TOPIC_CONFIG_KEYS)})"
            )
        if value is None:
            raise TopicConfigError(f"topic config {key!r} needs a value")
        if key in _CHOICES:
            if value not in _CHOICES[key]:
                raise TopicConfigError(f"{key}={value!r}: must be one of {_CHOICES[key]}")
        else:
            if not _INTEGER.fullmatch(value) or not -(2**63) <= int(value) < 2**63:
                raise TopicConfigError(f"{key}={value!r}: must be a 64-bit integer")
            number = int(value)
            if number < _MIN_VALUE.get(key, 0):
                raise TopicConfigError(f"{key}={value!r}: must be >= {_MIN_VALUE.get(key, 0)}")
        checked[key] = value
    if checked:
        log_config_for(LogConfig(), checked)  # LogConfig's own range checks
    return checked


def log_config_for(defaults: LogConfig, config: Mapping[str, str]) -> LogConfig:
    changes = {
        field: int(config[key])
        for key, field in _LOG_FIELDS.items()
        if field is not None and key in config
    }
    try:
        return dataclasses.replace(defaults, **changes)
    except ValueError as exc:
        raise TopicConfigError(str(exc)) from exc
