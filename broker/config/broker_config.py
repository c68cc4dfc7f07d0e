"""Broker configuration: Kafka's `server.properties` names, format, defaults and precedence.

`load_config(path, overrides)` reads a java .properties file, applies `key=value` overrides
(the CLI's `--override`) and checks every value against the table in broker/config/settings.py
(names, types, defaults, bounds, fallbacks), returning a frozen `BrokerConfig`. Anything wrong
raises `ConfigError` naming the key, the value and what was expected, so a broker fails at
start-up instead of running with a setting it silently misread. Deliberate differences from
Kafka: see docs/examples/server.properties (unknown keys are errors, topics are not created
automatically, loopback listener by default, PLAINTEXT only).
"""

from __future__ import annotations

import difflib
import re
import socket
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from broker.config.checks import (
    check_metrics_listener,
    check_security,
    check_zookeeper_login,
    control_plane_listener,
    inter_broker_listener,
    only_plaintext,
)
from broker.config.config_def import (
    InvalidValue,
    Type,
    Value,
    format_value,
    number,
)
from broker.config.log_config import LogConfig
from broker.config.settings import (
    ACL_AUTHORIZER,
    KNOWN_KEYS,
    MECHANISMS,
    SETTINGS,
    default_of,
    resolve,
    setting,
)
from broker.core.principal import Principal, parse_super_users
from broker.listeners import (
    Listener,
    ListenerAddress,
    Mismatch,
    SecurityProtocol,
    parse_listener_list,
    parse_protocol_map,
    parse_wire_map,
    resolve_listeners,
)
from protocol.jaas import JaasLogin, parse_jaas_login
from protocol.java_properties import PropertiesFormatError, property_lines

__all__ = [
    "KNOWN_KEYS",
    "SECRET_KEYS",
    "BrokerConfig",
    "ConfigError",
    "describe",
    "load_config",
    "value_of",
]

_OVERRIDE_ORIGIN: Final = "--override"


class ConfigError(ValueError):
    """A broker setting is unknown, missing or malformed; `key` names it (None: not one key)."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


# Typed fields whose defaults come from the table (a field's "key" names its setting).


def _int(key: str) -> int:
    value = default_of(key)
    if not isinstance(value, int) or isinstance(value, bool):
        raise TypeError(f"{key}: the default {value!r} is not an integer")
    return field(default=value, metadata={"key": key})


def _bool(key: str) -> bool:
    value = default_of(key)
    if not isinstance(value, bool):
        raise TypeError(f"{key}: the default {value!r} is not a boolean")
    return field(default=value, metadata={"key": key})


def _optional_str(key: str) -> str | None:
    value = default_of(key)
    if value is not None and not isinstance(value, str):
        raise TypeError(f"{key}: the default {value!r} is not a string")
    return field(default=value, metadata={"key": key})


def _float(key: str) -> float:
    value = default_of(key)
    if not isinstance(value, float):
        raise TypeError(f"{key}: the default {value!r} is not a number")
    return field(default=value, metadata={"key": key})


def _strs(key: str) -> tuple[str, ...]:
    value = default_of(key)
    if not isinstance(value, tuple):
        raise TypeError(f"{key}: the default {value!r} is not a list")
    return field(default=value, metadata={"key": key})


def _paths(key: str) -> tuple[Path, ...]:
    value = default_of(key)
    if not isinstance(value, tuple):
        raise TypeError(f"{key}: the default {value!r} is not a list")
    return field(default=tuple(Path(v) for v in value), metadata={"key": key})


_DEFAULT_ADDRESS = parse_listener_list(str(default_of("listeners")))[0]
_DEFAULT_HOST, _DEFAULT_PORT = _DEFAULT_ADDRESS.host, _DEFAULT_ADDRESS.port


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """The effective broker settings: one typed attribute per setting of broker/config/settings.py.

    Built by `load_config`, which validates; constructing one directly (tests, in-process
    brokers) skips validation, so keep values sane there.
    """

    broker_id: int = field(metadata={"key": "broker.id"})
    zookeeper_connect: str = field(metadata={"key": "zookeeper.connect"})
    # The inter-broker listener (`listeners`, `advertised.listeners`): where it binds (port 0:
    # any free port) and what this broker registers for it. Port 0 only when it is unset and
    # listeners asks for port 0: register the bound port.
    listener_host: str = _DEFAULT_HOST
    listener_port: int = _DEFAULT_PORT
    advertised_host: str = _DEFAULT_HOST
    advertised_port: int = _DEFAULT_PORT
    # Every listener, the inter-broker one included (empty: only that one, PLAINTEXT, as above).
    listeners: tuple[Listener, ...] = ()
    inter_broker_listener_name: str = SecurityProtocol.PLAINTEXT.value
    # control.plane.listener.name (KIP-291); None: the inter-broker listener takes the
    # controller's requests.
    control_plane_listener_name: str | None = _optional_str("control.plane.listener.name")
    ssl_keystore_location: str | None = _optional_str("ssl.keystore.location")
    ssl_key_password: str | None = field(
        default=None, metadata={"key": "ssl.key.password"}, repr=False
    )
    ssl_truststore_location: str | None = _optional_str("ssl.truststore.location")
    ssl_client_auth: str = field(default="none", metadata={"key": "ssl.client.auth"})
    ssl_enabled_protocols: tuple[str, ...] = _strs("ssl.enabled.protocols")
    ssl_endpoint_identification_algorithm: str = field(
        default="https", metadata={"key": "ssl.endpoint.identification.algorithm"}
    )
    sasl_enabled_mechanisms: tuple[str, ...] = _strs("sasl.enabled.mechanisms")
    sasl_mechanism_inter_broker_protocol: str = field(
        default="SCRAM-SHA-512", metadata={"key": "sasl.mechanism.inter.broker.protocol"}
    )
    # sasl.jaas.config: this broker's own login on a SASL inter-broker listener.
    inter_broker_login: JaasLogin | None = field(default=None, repr=False)
    sasl_server_max_receive_size: int = _int("sasl.server.max.receive.size")
    connections_authentication_timeout_ms: int = _int("connections.authentication.timeout.ms")
    connections_max_reauth_ms: int = _int("connections.max.reauth.ms")
    authorizer_enabled: bool = False  # authorizer.class.name
    super_users: frozenset[Principal] = frozenset()
    allow_everyone_if_no_acl_found: bool = _bool("allow.everyone.if.no.acl.found")
    broker_rack: str | None = _optional_str("broker.rack")
    zookeeper_session_timeout_ms: int = _int("zookeeper.session.timeout.ms")
    zookeeper_connection_timeout_ms: int = _int("zookeeper.connection.timeout.ms")
    zookeeper_set_acl: bool = _bool("zookeeper.set.acl")
    zookeeper_digest_username: str | None = _optional_str("zookeeper.digest.username")
    zookeeper_digest_password: str | None = field(
        default=None, metadata={"key": "zookeeper.digest.password"}, repr=False
    )
    log_dirs: tuple[Path, ...] = _paths("log.dirs")
    num_partitions: int = _int("num.partitions")
    default_replication_factor: int = _int("default.replication.factor")
    message_max_bytes: int = _int("message.max.bytes")
    socket_request_max_bytes: int = _int("socket.request.max.bytes")
    connections_max_idle_ms: int = _int("connections.max.idle.ms")
    max_connections: int = _int("max.connections")
    max_connections_per_ip: int = _int("max.connections.per.ip")
    max_connections_per_ip_overrides: str = field(
        default="", metadata={"key": "max.connections.per.ip.overrides"}
    )
    max_connection_creation_rate: int = _int("max.connection.creation.rate")
    # listener.name.<name>.max.connections: (listener name, limit) for each one given.
    listener_max_connections: tuple[tuple[str, int], ...] = ()
    # listener.name.<name>.<mechanism>.connections.max.reauth.ms: (listener name, mechanism,
    # session lifetime) for each one given.
    listener_max_reauth_ms: tuple[tuple[str, str, int], ...] = ()
    connection_failed_authentication_delay_ms: int = _int(
        "connection.failed.authentication.delay.ms"
    )
    quota_window_num: int = _int("quota.window.num")
    quota_window_size_seconds: int = _int("quota.window.size.seconds")
    log_segment_bytes: int = _int("log.segment.bytes")
    log_roll_ms: int = _int("log.roll.ms")
    log_index_size_max_bytes: int = _int("log.index.size.max.bytes")
    log_index_interval_bytes: int = _int("log.index.interval.bytes")
    log_retention_ms: int = _int("log.retention.ms")
    log_retention_bytes: int = _int("log.retention.bytes")
    log_retention_check_interval_ms: int = _int("log.retention.check.interval.ms")
    log_flush_interval_messages: int = _int("log.flush.interval.messages")
    log_flush_interval_ms: int = _int("log.flush.interval.ms")
    log_flush_scheduler_interval_ms: int = _int("log.flush.scheduler.interval.ms")
    log_flush_offset_checkpoint_interval_ms: int = _int("log.flush.offset.checkpoint.interval.ms")
    log_cleanup_policy: tuple[str, ...] = _strs("log.cleanup.policy")
    log_cleaner_enable: bool = _bool("log.cleaner.enable")
    log_cleaner_threads: int = _int("log.cleaner.threads")
    log_cleaner_min_cleanable_ratio: float = _float("log.cleaner.min.cleanable.ratio")
    log_cleaner_min_compaction_lag_ms: int = _int("log.cleaner.min.compaction.lag.ms")
    log_cleaner_max_compaction_lag_ms: int = _int("log.cleaner.max.compaction.lag.ms")
    log_cleaner_delete_retention_ms: int = _int("log.cleaner.delete.retention.ms")
    log_cleaner_backoff_ms: int = _int("log.cleaner.backoff.ms")
    log_cleaner_dedupe_buffer_size: int = _int("log.cleaner.dedupe.buffer.size")
    replica_lag_time_max_ms: int = _int("replica.lag.time.max.ms")
    replica_fetch_wait_max_ms: int = _int("replica.fetch.wait.max.ms")
    replica_fetch_min_bytes: int = _int("replica.fetch.min.bytes")
    replica_fetch_max_bytes: int = _int("replica.fetch.max.bytes")
    replica_fetch_backoff_ms: int = _int("replica.fetch.backoff.ms")
    max_incremental_fetch_session_cache_slots: int = _int(
        "max.incremental.fetch.session.cache.slots"
    )
    replica_high_watermark_checkpoint_interval_ms: int = _int(
        "replica.high.watermark.checkpoint.interval.ms"
    )
    producer_id_expiration_ms: int = _int("producer.id.expiration.ms")
    producer_id_expiration_check_interval_ms: int = _int("producer.id.expiration.check.interval.ms")
    isr_change_propagation_interval_ms: int = _int("isr.change.propagation.interval.ms")
    isr_change_propagation_blackout_ms: int = _int("isr.change.propagation.blackout.ms")
    isr_change_propagation_max_delay_ms: int = _int("isr.change.propagation.max.delay.ms")
    controlled_shutdown_max_retries: int = _int("controlled.shutdown.max.retries")
    controlled_shutdown_retry_backoff_ms: int = _int("controlled.shutdown.retry.backoff.ms")
    controlled_shutdown_timeout_ms: int = _int("controlled.shutdown.timeout.ms")
    min_insync_replicas: int = _int("min.insync.replicas")
    unclean_leader_election_enable: bool = _bool("unclean.leader.election.enable")
    auto_create_topics_enable: bool = _bool("auto.create.topics.enable")
    controlled_shutdown_enable: bool = _bool("controlled.shutdown.enable")
    auto_leader_rebalance_enable: bool = _bool("auto.leader.rebalance.enable")
    leader_imbalance_per_broker_percentage: int = _int("leader.imbalance.per.broker.percentage")
    leader_imbalance_check_interval_seconds: int = _int("leader.imbalance.check.interval.seconds")
    delete_topic_enable: bool = _bool("delete.topic.enable")
    fetch_max_bytes: int = _int("fetch.max.bytes")
    request_timeout_ms: int = _int("request.timeout.ms")
    offsets_topic_num_partitions: int = _int("offsets.topic.num.partitions")
    offsets_topic_replication_factor: int = _int("offsets.topic.replication.factor")
    offsets_topic_segment_bytes: int = _int("offsets.topic.segment.bytes")
    offsets_retention_minutes: int = _int("offsets.retention.minutes")
    offsets_retention_check_interval_ms: int = _int("offsets.retention.check.interval.ms")
    offsets_commit_timeout_ms: int = _int("offsets.commit.timeout.ms")
    offset_metadata_max_bytes: int = _int("offset.metadata.max.bytes")
    group_consumer_session_timeout_ms: int = _int("group.consumer.session.timeout.ms")
    group_consumer_heartbeat_interval_ms: int = _int("group.consumer.heartbeat.interval.ms")
    group_consumer_max_size: int = _int("group.consumer.max.size")
    metrics_listener: str | None = _optional_str("metrics.listener")
    metrics_listener_authentication_method: str = field(
        default="none", metadata={"key": "metrics.listener.authentication.method"}
    )
    metrics_listener_allow_unauthenticated: bool = _bool("metrics.listener.allow.unauthenticated")
    metrics_max_connections: int = _int("metrics.max.connections")
    metrics_max_header_bytes: int = _int("metrics.max.header.bytes")
    metrics_read_timeout_ms: int = _int("metrics.read.timeout.ms")
    # The settings given in server.properties and --override, as their text (what
    # DescribeConfigs reports as STATIC_BROKER_CONFIG). Not compared: configs with the same
    # values are equal however they were spelled.
    given: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def all_listeners(self) -> tuple[Listener, ...]:
        """Every listener; a config built without `listeners` has its one PLAINTEXT listener."""
        if self.listeners:
            return self.listeners
        return (
            Listener(
                self.inter_broker_listener_name,
                SecurityProtocol.PLAINTEXT,
                self.listener_host,
                self.listener_port,
                self.advertised_host,
                self.advertised_port,
            ),
        )

    @property
    def zookeeper_digest(self) -> tuple[str, str] | None:
        """The ZooKeeper login (user, password), if any (checked together by load_config)."""
        if self.zookeeper_digest_username is None or self.zookeeper_digest_password is None:
            return None
        return self.zookeeper_digest_username, self.zookeeper_digest_password

    @property
    def inter_broker_listener(self) -> Listener:
        return next(x for x in self.all_listeners() if x.name == self.inter_broker_listener_name)

    @property
    def control_plane_listener(self) -> Listener:
        """Where the controller's requests come in: control.plane.listener.name, else the
        inter-broker listener."""
        name = self.control_plane_listener_name or self.inter_broker_listener_name
        return next(x for x in self.all_listeners() if x.name == name)

    def takes_controller_requests(self, listener: str | None) -> bool:
        """Whether requests meant for brokers only (LeaderAndIsr, StopReplica, UpdateMetadata,
        ControlledShutdown) may come in on `listener` (None: in-process, not a listener)."""
        return listener is None or listener == self.control_plane_listener.name

    def takes_follower_fetches(self, listener: str | None) -> bool:
        """Whether a follower's fetch (replica_id >= 0) may come in on `listener`: the
        inter-broker listener, where followers connect, or the control-plane listener."""
        return listener is None or listener in (
            self.inter_broker_listener_name,
            self.control_plane_listener.name,
        )

    def log_config(self) -> LogConfig:
        """The broker-wide defaults for every log (topic configs may override them)."""
        fields: dict[str, Any] = {
            s.log_field: getattr(self, s.attr) for s in SETTINGS if s.log_field and s.attr
        }
        return LogConfig(**fields)


def value_of(config: BrokerConfig, key: str) -> Value | None:
    """The effective value of setting `key` (KeyError: none, or one with no attribute)."""
    if key == "listeners":
        return ",".join(_listener_url(x.name, x.host, x.port) for x in config.all_listeners())
    if key == "advertised.listeners":
        return ",".join(
            _listener_url(x.name, x.advertised_host, x.advertised_port)
            for x in config.all_listeners()
        )
    if key == "listener.security.protocol.map":
        return ",".join(f"{x.name}:{x.security_protocol}" for x in config.all_listeners())
    if key == "listener.wire.protocol.map":
        return ",".join(f"{x.name}:{x.wire}" for x in config.all_listeners())
    if key in ("inter.broker.listener.name", "security.inter.broker.protocol"):
        listener = config.inter_broker_listener
        return listener.name if key == "inter.broker.listener.name" else listener.security_protocol
    if key == "authorizer.class.name":
        return ACL_AUTHORIZER if config.authorizer_enabled else ""
    if key == "super.users":
        return ";".join(sorted(map(str, config.super_users))) or None
    if key in _SECRETS:
        return None if config.given.get(key) is None else "[hidden]"
    attr = setting(key).attr
    if attr is None:
        raise KeyError(f"{key} has no value of its own (it only supplies a default)")
    value: object = getattr(config, attr)
    if isinstance(value, tuple):
        return tuple(str(v) for v in value)
    if value is None or isinstance(value, int | float | str):
        return value
    raise TypeError(f"{attr}: unexpected {type(value).__name__}")


def describe(config: BrokerConfig) -> list[tuple[str, str]]:
    """(Kafka name, effective value) pairs, for logging the configuration at start-up."""
    return [
        (s.key, format_value(value_of(config, s.key)))
        for s in SETTINGS
        if s.attr is not None or s.key in _COMPUTED
    ]


SECRET_KEYS: Final = frozenset(
    {"ssl.key.password", "sasl.jaas.config", "zookeeper.digest.password"}
)
_SECRETS = SECRET_KEYS
_COMPUTED: Final = frozenset(
    {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "listener.wire.protocol.map",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "authorizer.class.name",
        "super.users",
        *_SECRETS,
    }
)


def _listener_url(name: str, host: str, port: int) -> str:
    return f"{name}://[{host}]:{port}" if ":" in host else f"{name}://{host}:{port}"


# --- loading and validation -------------------------------------------------------------------


def load_config(path: Path | None, overrides: Sequence[str] = ()) -> BrokerConfig:
    """Read `path` (a server.properties file; None: none), apply `key=value` overrides, validate.

    Raises ConfigError on an unreadable file, an unknown key, a malformed value, a missing
    required key (broker.id, zookeeper.connect) or inconsistent settings.
    """
    raw: dict[str, tuple[str, str]] = {}  # key -> (value, where it came from)
    if path is not None:
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise ConfigError(f"cannot read config file {path}: {e}") from None
        try:
            for line_number, key, value in property_lines(text, str(path)):
                raw[key] = (value, f"{path} line {line_number}")
        except PropertiesFormatError as e:
            raise ConfigError(str(e)) from None
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"invalid override {override!r}: expected key=value")
        raw[key.strip()] = (value.strip(), _OVERRIDE_ORIGIN)
    for key, (value, origin) in raw.items():
        if key not in KNOWN_KEYS and not any(p.fullmatch(key) for p in _LISTENER_PREFIXED):
            raise ConfigError(_unknown_key_message(key, value, origin), key=key)
    return _build(_Given(raw))


# Kafka's per-listener overrides of max.connections and (per SASL mechanism, as Kafka's
# KafkaConfig takes it) connections.max.reauth.ms; the names in them are the listener's and
# the mechanism's, in lower case (ListenerName.configPrefix, saslMechanismConfigPrefix). The
# only listener-prefixed settings taken so far.
_LISTENER_MAX_CONNECTIONS: Final = re.compile(r"listener\.name\.([^.]+)\.max\.connections")
_LISTENER_LIMIT: Final = number(
    Type.INT, "listener.name.<name>.max.connections", None, "one listener's connections"
)
_LISTENER_MAX_REAUTH_MS: Final = re.compile(
    r"listener\.name\.([^.]+)\.([^.]+)\.connections\.max\.reauth\.ms"
)
_LISTENER_REAUTH: Final = number(
    Type.LONG,
    "listener.name.<name>.<mechanism>.connections.max.reauth.ms",
    None,
    "one listener's SASL session lifetime for one mechanism",
)
_LISTENER_PREFIXED: Final = (_LISTENER_MAX_CONNECTIONS, _LISTENER_MAX_REAUTH_MS)


def _unknown_key_message(key: str, value: str, origin: str) -> str:
    close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1, cutoff=0.6)
    hint = (
        f"did you mean {close[0]!r}?"
        if close
        else "expected one of the keys listed in docs/examples/server.properties"
    )
    return f"unknown config key {key!r} (value {value!r}, {origin}): {hint}"


class _Given:
    """The settings given, each parsed by its table entry; every failure names key, value,
    origin and expectation."""

    def __init__(self, raw: dict[str, tuple[str, str]]) -> None:
        self._raw = raw
        self._parsed: dict[str, Value | None] = {}
        for entry in SETTINGS:  # every given value is checked, even one another key overrides
            if entry.key in raw:
                try:
                    self._parsed[entry.key] = entry.parse(raw[entry.key][0])
                except InvalidValue as e:
                    raise self.fail(entry.key, e.expected) from None

    def is_set(self, key: str) -> bool:
        return key in self._raw

    def texts(self) -> dict[str, str]:
        """key -> value as given, for every setting given."""
        return {key: value for key, (value, _) in self._raw.items()}

    def value(self, key: str) -> Value | None:
        """The effective value: given, else by fallback or default; ConfigError if required."""
        value = resolve(key, self._parsed)
        if value is None and setting(key).required:
            raise self.fail(key, setting(key).expected)
        return value

    def text(self, key: str) -> str:
        return str(self.value(key))

    def fail(self, key: str, expected: str) -> ConfigError:
        if key not in self._raw:
            return ConfigError(
                f"missing required config {key}: expected {expected} "
                f"(set it in the config file or with --override {key}=...)",
                key=key,
            )
        value, origin = self._raw[key]
        return ConfigError(
            f"invalid value {value!r} for {key} ({origin}): expected {expected}", key=key
        )


def _build(given: _Given) -> BrokerConfig:
    values: dict[str, Any] = {s.attr: given.value(s.key) for s in SETTINGS if s.attr is not None}
    values["given"] = given.texts()
    values["log_dirs"] = tuple(Path(d) for d in values["log_dirs"])
    listeners = _listeners(given)
    inter_broker = inter_broker_listener(given, listeners)
    values["listener_max_connections"] = _listener_limits(given, listeners)
    values["listener_max_reauth_ms"] = _listener_reauth(given, listeners)
    values.update(
        listener_host=inter_broker.host,
        listener_port=inter_broker.port,
        advertised_host=inter_broker.advertised_host,
        advertised_port=inter_broker.advertised_port,
        # A lone PLAINTEXT listener is implied (all_listeners), as in a config built directly.
        listeners=() if only_plaintext(listeners) else listeners,
        inter_broker_listener_name=inter_broker.name,
        ssl_key_password=given.value("ssl.key.password"),
        authorizer_enabled=given.value("authorizer.class.name") == ACL_AUTHORIZER,
        super_users=parse_super_users(str(given.value("super.users") or "")),
    )
    values["control_plane_listener_name"] = control_plane_listener(given, listeners, inter_broker)
    jaas = given.value("sasl.jaas.config")
    values["inter_broker_login"] = parse_jaas_login(str(jaas)) if jaas else None
    check_security(given, listeners, inter_broker, values)
    check_zookeeper_login(given, values)
    check_metrics_listener(given, values)
    if values["replica_fetch_wait_max_ms"] > values["replica_lag_time_max_ms"]:
        # Kafka's rule: a follower parked longer than the lag time would drop out of the ISR.
        raise given.fail(
            "replica.fetch.wait.max.ms",
            f"at most replica.lag.time.max.ms ({values['replica_lag_time_max_ms']})",
        )
    return BrokerConfig(**values)


def _listeners(given: _Given) -> tuple[Listener, ...]:
    bound = parse_listener_list(given.text("listeners"))
    advertised: tuple[ListenerAddress, ...] = ()
    if given.is_set("advertised.listeners"):
        advertised = parse_listener_list(given.text("advertised.listeners"))
    protocols = parse_protocol_map(given.text("listener.security.protocol.map"))
    wires = parse_wire_map(given.text("listener.wire.protocol.map"))
    try:
        # Kafka registers the canonical host name for an empty listener host.
        return resolve_listeners(bound, advertised, protocols, socket.gethostname(), wires)
    except Mismatch as exc:
        raise given.fail(exc.key, exc.expected) from None


def _listener_limits(given: _Given, listeners: tuple[Listener, ...]) -> tuple[tuple[str, int], ...]:
    """listener.name.<name>.max.connections, each for a listener that exists."""
    names = {x.name.lower(): x.name for x in listeners}
    limits = []
    for key in given.texts():
        match = _LISTENER_MAX_CONNECTIONS.fullmatch(key)
        if match is None:
            continue
        name = names.get(match[1].lower())
        if name is None:
            raise given.fail(key, f"a listener's name in the key ({', '.join(names.values())})")
        try:
            limit = _LISTENER_LIMIT.parse(given.texts()[key])
        except InvalidValue as exc:
            raise given.fail(key, exc.expected) from None
        assert isinstance(limit, int)
        limits.append((name, limit))
    return tuple(sorted(limits))


def _listener_reauth(
    given: _Given, listeners: tuple[Listener, ...]
) -> tuple[tuple[str, str, int], ...]:
    """listener.name.<name>.<mechanism>.connections.max.reauth.ms, each for a listener that
    exists and a SASL mechanism."""
    names = {x.name.lower(): x.name for x in listeners}
    found = []
    for key, text in given.texts().items():
        match = _LISTENER_MAX_REAUTH_MS.fullmatch(key)
        if match is None:
            continue
        name = names.get(match[1].lower())
        if name is None:
            raise given.fail(key, f"a listener's name in the key ({', '.join(names.values())})")
        mechanism = match[2].upper()
        if mechanism not in MECHANISMS:
            raise given.fail(key, f"a SASL mechanism in the key ({', '.join(MECHANISMS)})")
        try:
            lifetime_ms = _LISTENER_REAUTH.parse(text)
        except InvalidValue as exc:
            raise given.fail(key, exc.expected) from None
        assert isinstance(lifetime_ms, int)
        found.append((name, mechanism, lifetime_ms))
    return tuple(sorted(found))
