"""Config changes on a running broker (Kafka's DynamicLogConfig and TopicConfigHandler): what a
change of the cluster-wide broker defaults or of a topic's configs changes, and where.

`entities_to_read` decides, from the notifications since the last round, what to read again:
the defaults, and which topics' configs. `with_dynamic_defaults` lays the dynamic defaults
(`/config/brokers/<default>`) over the broker's static ones; `plan_config_update` compares
every open log's config, and its partition's min.insync.replicas, with what the defaults and
the topic's overrides now say; `apply_config_update` carries out the difference: the new config
applies to the open segments at once (retention, max.message.bytes, segment size and time,
flushes), and logs whose retention limits were lowered are checked at once rather than at the
next log.retention.check.interval.ms. The shells (broker/config/change_listener.py, and the
simulated broker in tests/simulation) read ZooKeeper and call these.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from broker.config.config_def import InvalidValue, Value
from broker.config.log_config import LogConfig
from broker.config.settings import KNOWN_KEYS, setting
from broker.config.topic_config import TopicConfigError, log_config_for
from controller.zk_configs import BROKERS, TOPICS
from controller.zk_data import DEFAULT_BROKER_ENTITY
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.core.state import BrokerState

__all__ = [
    "BrokerDefaults",
    "ConfigUpdate",
    "EntitiesToRead",
    "PartitionConfig",
    "apply_config_update",
    "entities_to_read",
    "open_log_configs",
    "partition_config",
    "plan_config_update",
    "with_dynamic_defaults",
]

_MIN_INSYNC_REPLICAS = "min.insync.replicas"


@dataclass(frozen=True, slots=True)
class BrokerDefaults:
    """What a topic without overrides gets: the broker's settings, static or dynamic."""

    log_config: LogConfig
    min_insync_replicas: int
    unclean_leader_election_enable: bool
    # The dynamic defaults in force, parsed (key -> value): for settings applied elsewhere.
    dynamic: Mapping[str, Value] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PartitionConfig:
    """One log's config, and its partition's min.insync.replicas override (None: the broker
    default)."""

    log_config: LogConfig
    min_insync_replicas: int | None = None


@dataclass(frozen=True, slots=True)
class ConfigUpdate:
    defaults: BrokerDefaults
    changed: Mapping[TopicPartition, PartitionConfig]  # the logs whose config changes
    retention_now: tuple[TopicPartition, ...]  # retention lowered: check these logs now
    problems: Mapping[str, str]  # topic -> why its stored configs were left unapplied


@dataclass(frozen=True, slots=True)
class EntitiesToRead:
    defaults: bool  # the cluster-wide dynamic defaults (/config/brokers/<default>)
    topics: frozenset[str]  # the topics whose configs to read (each with a log here)


def entities_to_read(
    changed: Iterable[tuple[str, str]], hosted: Collection[str], *, everything: bool
) -> EntitiesToRead:
    """What a round reads, given the entities (type, name) the notifications since the last
    round name and the topics with a log here. `everything` (at start, after a reconnection
    or a failed round: notifications may have been missed) reads the defaults and every hosted
    topic; so does a change of the defaults, which every log may inherit. Otherwise only the
    hosted topics named (Kafka's TopicConfigHandler ignores topics it has no log of)."""
    named = set(changed)
    defaults = everything or (BROKERS, DEFAULT_BROKER_ENTITY) in named
    topics = set(hosted)
    if not defaults:
        topics &= {name for kind, name in named if kind == TOPICS}
    return EntitiesToRead(defaults, frozenset(topics))


def with_dynamic_defaults(
    static: BrokerDefaults, dynamic: Mapping[str, str]
) -> tuple[BrokerDefaults, dict[str, str]]:
    """`static` with the dynamic defaults over it (a dynamic default beats server.properties,
    as in Kafka), and what was skipped (key -> why): a stored key that is unknown or not
    dynamic, or a value its setting refuses (written by hand, or by a newer version)."""
    skipped: dict[str, str] = {}
    parsed: dict[str, Value] = {}
    for key, text in sorted(dynamic.items()):
        if key not in KNOWN_KEYS or not setting(key).dynamic:
            skipped[key] = "not a dynamic broker setting"
            continue
        try:
            value = setting(key).parse(text)
        except InvalidValue as exc:
            skipped[key] = f"invalid value {text!r}: expected {exc.expected}"
            continue
        if value is not None:
            parsed[key] = value
    log_fields: dict[str, Any] = {
        entry.log_field: value
        for key, value in parsed.items()
        if (entry := setting(key)).log_field is not None
    }
    try:
        log_config = dataclasses.replace(static.log_config, **log_fields)
    except (TypeError, ValueError) as exc:
        skipped.update(dict.fromkeys((k for k in parsed if setting(k).log_field), str(exc)))
        log_config = static.log_config
    min_isr = parsed.get(_MIN_INSYNC_REPLICAS, static.min_insync_replicas)
    unclean = parsed.get("unclean.leader.election.enable", static.unclean_leader_election_enable)
    assert isinstance(min_isr, int) and isinstance(unclean, bool)
    return BrokerDefaults(log_config, min_isr, unclean, parsed), skipped


def partition_config(defaults: LogConfig, overrides: Mapping[str, str]) -> PartitionConfig:
    """A topic's log config (its overrides over `defaults`) and min.insync.replicas override.
    TopicConfigError if a stored value is malformed."""
    log_config = log_config_for(defaults, overrides)
    text = overrides.get(_MIN_INSYNC_REPLICAS)
    try:
        min_isr = int(text) if text is not None else None
    except ValueError as exc:
        raise TopicConfigError(f"{_MIN_INSYNC_REPLICAS}: {exc}") from None
    return PartitionConfig(log_config, min_isr)


def plan_config_update(
    defaults: BrokerDefaults,
    topic_configs: Mapping[str, Mapping[str, str]],
    current: Mapping[TopicPartition, PartitionConfig],
) -> ConfigUpdate:
    """What to change so that each log in `current` (the open logs concerned, with their
    config now) has what `defaults` and its topic's overrides (`topic_configs`, as stored
    now; a topic missing has none) say. A topic whose stored configs do not validate keeps
    what it has (`problems`)."""
    changed: dict[TopicPartition, PartitionConfig] = {}
    retention_now: list[TopicPartition] = []
    problems: dict[str, str] = {}
    for tp, now in sorted(current.items()):
        if tp.topic in problems:
            continue
        try:
            wanted = partition_config(defaults.log_config, topic_configs.get(tp.topic, {}))
        except TopicConfigError as exc:
            problems[tp.topic] = str(exc)
            continue
        if wanted != now:
            changed[tp] = wanted
        if _retention_lowered(now.log_config, wanted.log_config):
            retention_now.append(tp)
    return ConfigUpdate(defaults, changed, tuple(retention_now), problems)


def open_log_configs(
    state: BrokerState, topics: Collection[str] | None = None
) -> dict[TopicPartition, PartitionConfig]:
    """Every open log's config now (only those of `topics`, if given), with its partition's
    min.insync.replicas override (None for a log this broker does not serve)."""
    partitions = state.replica_manager.partitions
    out: dict[TopicPartition, PartitionConfig] = {}
    for tp, log in state.replica_manager.log_manager.logs.items():
        if topics is not None and tp.topic not in topics:
            continue
        partition = partitions.get(tp)
        min_isr = partition.min_insync_replicas if partition is not None else None
        out[TopicPartition(*tp)] = PartitionConfig(log.config, min_isr)
    return out


def apply_config_update(state: BrokerState, update: ConfigUpdate, now_ms: int) -> int:
    """Carry out `update` on the broker; how many segments the retention checks it asked for
    deleted. New logs (LeaderAndIsr) take the new defaults from here on."""
    replicas = state.replica_manager
    replicas.log_manager.default_config = update.defaults.log_config
    state.min_insync_replicas = update.defaults.min_insync_replicas
    for tp, config in update.changed.items():
        log = replicas.log_manager.get_log(tp)
        if log is not None:
            log.config = config.log_config
        partition = replicas.partitions.get(tp)
        if partition is not None:
            partition.min_insync_replicas = config.min_insync_replicas
    deleted = 0
    for tp in update.retention_now:
        log = replicas.log_manager.get_log(tp)
        if log is not None:
            deleted += log.delete_retention_breached_segments(now_ms)
    return deleted


def _retention_lowered(old: LogConfig, new: LogConfig) -> bool:
    """A retention limit set where there was none, or made smaller (-1: none)."""
    return any(
        (before < 0 <= after) or (0 <= after < before)
        for before, after in (
            (old.retention_ms, new.retention_ms),
            (old.retention_bytes, new.retention_bytes),
        )
    )
