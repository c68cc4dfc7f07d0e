"""Broker configuration: Kafka's `server.properties` names, format, defaults and precedence.

`load_config(path, overrides)` reads a java .properties file, applies `key=value` overrides
(the CLI's `--override`), validates every value and returns a frozen `BrokerConfig`. Anything
wrong raises `ConfigError` naming the key, the value and what was expected, so a broker fails
at start-up instead of running with a setting it silently misread.

Deliberate differences from Kafka (see docs/examples/server.properties):
- unknown keys are errors, not warnings (a typo must not silently fall back to a default);
- `auto.create.topics.enable` defaults to false: topics are created explicitly;
- the default listener is `PLAINTEXT://127.0.0.1:9092` (loopback), not every interface;
- only PLAINTEXT listeners exist (no `listener.security.protocol.map`);
- `num.network.threads` / `num.io.threads` are accepted for compatibility, no effect
  (one trio event loop serves every connection).
"""

from __future__ import annotations

import dataclasses
import difflib
import re
import socket
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from broker.log.config import LogConfig

__all__ = [
    "KNOWN_KEYS",
    "BrokerConfig",
    "ConfigError",
    "describe",
    "load_config",
    "parse_properties",
]

_INT_MAX: Final = (1 << 31) - 1  # Java int
_LONG_MAX: Final = (1 << 63) - 1  # Java long; Kafka's "never" for the flush settings
_MS_PER_MINUTE: Final = 60 * 1000
_MS_PER_HOUR: Final = 60 * _MS_PER_MINUTE
_DEFAULT_LISTENERS: Final = "PLAINTEXT://127.0.0.1:9092"
_DEFAULT_LOG_DIR: Final = "/tmp/highwater-logs"
_OVERRIDE_ORIGIN: Final = "--override"

KNOWN_KEYS: Final = frozenset(
    {
        "broker.id",
        "broker.rack",
        "listeners",
        "advertised.listeners",
        "zookeeper.connect",
        "zookeeper.session.timeout.ms",
        "zookeeper.connection.timeout.ms",
        "log.dirs",
        "log.dir",
        "num.partitions",
        "default.replication.factor",
        "message.max.bytes",
        "socket.request.max.bytes",
        "connections.max.idle.ms",
        "max.connections",
        "log.segment.bytes",
        "log.roll.ms",
        "log.roll.hours",
        "log.index.size.max.bytes",
        "log.index.interval.bytes",
        "log.retention.ms",
        "log.retention.minutes",
        "log.retention.hours",
        "log.retention.bytes",
        "log.retention.check.interval.ms",
        "log.flush.interval.messages",
        "log.flush.interval.ms",
        "log.flush.scheduler.interval.ms",
        "replica.lag.time.max.ms",
        "replica.fetch.wait.max.ms",
        "replica.fetch.min.bytes",
        "replica.fetch.max.bytes",
        "replica.fetch.backoff.ms",
        "replica.high.watermark.checkpoint.interval.ms",
        "producer.id.expiration.ms",
        "producer.id.expiration.check.interval.ms",
        # Highwater: Kafka hard-codes these (ReplicaManager's isr-change-propagation); they
        # are settings here so tests can run the damping fast.
        "isr.change.propagation.interval.ms",
        "isr.change.propagation.blackout.ms",
        "isr.change.propagation.max.delay.ms",
        "controlled.shutdown.max.retries",
        "controlled.shutdown.retry.backoff.ms",
        "min.insync.replicas",
        "unclean.leader.election.enable",
        "auto.create.topics.enable",
        "controlled.shutdown.enable",
        "auto.leader.rebalance.enable",
        "leader.imbalance.per.broker.percentage",
        "leader.imbalance.check.interval.seconds",
        "delete.topic.enable",
        "fetch.max.bytes",
        "request.timeout.ms",
        # Accepted for compatibility, no effect: one trio event loop serves every connection.
        "num.network.threads",
        "num.io.threads",
    }
)


class ConfigError(ValueError):
    """A broker setting is unknown, missing or malformed; `key` names it (None: not one key)."""

    def __init__(self, message: str, *, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def _key(name: str) -> Any:
    """Dataclass field metadata: the Kafka name `describe` prints for this attribute."""
    return {"key": name}


@dataclass(frozen=True, slots=True)
class BrokerConfig:
    """The effective broker settings: Kafka's names, units last (docs/examples/server.properties).

    Built by `load_config`, which validates; constructing one directly (tests, in-process
    brokers) skips validation, so keep values sane there.
    """

    broker_id: int = field(metadata=_key("broker.id"))
    zookeeper_connect: str = field(metadata=_key("zookeeper.connect"))  # "h:p[,h:p][/chroot]"
    # First (only) PLAINTEXT listener: where to bind. Port 0: any free port.
    listener_host: str = "127.0.0.1"
    listener_port: int = 9092
    # What this broker registers in ZooKeeper and clients connect to. Port 0 only when
    # advertised.listeners is unset and listeners asks for port 0: register the bound port.
    advertised_host: str = "127.0.0.1"
    advertised_port: int = 9092
    broker_rack: str | None = field(default=None, metadata=_key("broker.rack"))
    zookeeper_session_timeout_ms: int = field(
        default=18000, metadata=_key("zookeeper.session.timeout.ms")
    )
    zookeeper_connection_timeout_ms: int = field(
        default=18000, metadata=_key("zookeeper.connection.timeout.ms")
    )
    log_dirs: tuple[Path, ...] = field(default=(Path(_DEFAULT_LOG_DIR),), metadata=_key("log.dirs"))
    num_partitions: int = field(default=1, metadata=_key("num.partitions"))
    default_replication_factor: int = field(default=1, metadata=_key("default.replication.factor"))
    message_max_bytes: int = field(default=1048588, metadata=_key("message.max.bytes"))
    socket_request_max_bytes: int = field(
        default=104857600, metadata=_key("socket.request.max.bytes")
    )
    # A connection that sends nothing this long is closed (Kafka's 10 min).
    connections_max_idle_ms: int = field(default=600_000, metadata=_key("connections.max.idle.ms"))
    # Connections beyond this are closed as soon as they are accepted (Kafka: unlimited by
    # default; here a bound, so idle sockets cannot use up the broker's file descriptors).
    max_connections: int = field(default=10_000, metadata=_key("max.connections"))
    log_segment_bytes: int = field(default=1073741824, metadata=_key("log.segment.bytes"))
    log_roll_ms: int = field(default=168 * _MS_PER_HOUR, metadata=_key("log.roll.ms"))
    log_index_size_max_bytes: int = field(
        default=10485760, metadata=_key("log.index.size.max.bytes")
    )
    log_index_interval_bytes: int = field(default=4096, metadata=_key("log.index.interval.bytes"))
    log_retention_ms: int = field(  # -1: keep forever
        default=168 * _MS_PER_HOUR, metadata=_key("log.retention.ms")
    )
    log_retention_bytes: int = field(default=-1, metadata=_key("log.retention.bytes"))  # -1: none
    log_retention_check_interval_ms: int = field(
        default=300000, metadata=_key("log.retention.check.interval.ms")
    )
    log_flush_interval_messages: int = field(
        default=_LONG_MAX, metadata=_key("log.flush.interval.messages")
    )
    log_flush_interval_ms: int = field(default=_LONG_MAX, metadata=_key("log.flush.interval.ms"))
    log_flush_scheduler_interval_ms: int = field(
        default=_LONG_MAX, metadata=_key("log.flush.scheduler.interval.ms")
    )
    replica_lag_time_max_ms: int = field(default=30000, metadata=_key("replica.lag.time.max.ms"))
    replica_fetch_wait_max_ms: int = field(default=500, metadata=_key("replica.fetch.wait.max.ms"))
    replica_fetch_min_bytes: int = field(default=1, metadata=_key("replica.fetch.min.bytes"))
    replica_fetch_max_bytes: int = field(default=1048576, metadata=_key("replica.fetch.max.bytes"))
    replica_fetch_backoff_ms: int = field(default=1000, metadata=_key("replica.fetch.backoff.ms"))
    replica_high_watermark_checkpoint_interval_ms: int = field(
        default=5000, metadata=_key("replica.high.watermark.checkpoint.interval.ms")
    )
    # How long an idle idempotent producer's state is kept (KIP-854), and how often to look.
    producer_id_expiration_ms: int = field(
        default=86_400_000, metadata=_key("producer.id.expiration.ms")
    )
    producer_id_expiration_check_interval_ms: int = field(
        default=600_000, metadata=_key("producer.id.expiration.check.interval.ms")
    )
    isr_change_propagation_interval_ms: int = field(
        default=2500, metadata=_key("isr.change.propagation.interval.ms")
    )
    isr_change_propagation_blackout_ms: int = field(
        default=5000, metadata=_key("isr.change.propagation.blackout.ms")
    )
    isr_change_propagation_max_delay_ms: int = field(
        default=60000, metadata=_key("isr.change.propagation.max.delay.ms")
    )
    controlled_shutdown_max_retries: int = field(
        default=3, metadata=_key("controlled.shutdown.max.retries")
    )
    controlled_shutdown_retry_backoff_ms: int = field(
        default=5000, metadata=_key("controlled.shutdown.retry.backoff.ms")
    )
    min_insync_replicas: int = field(default=1, metadata=_key("min.insync.replicas"))
    unclean_leader_election_enable: bool = field(
        default=False, metadata=_key("unclean.leader.election.enable")
    )
    auto_create_topics_enable: bool = field(  # Kafka: true; Highwater: topics are explicit
        default=False, metadata=_key("auto.create.topics.enable")
    )
    controlled_shutdown_enable: bool = field(
        default=True, metadata=_key("controlled.shutdown.enable")
    )
    auto_leader_rebalance_enable: bool = field(
        default=True, metadata=_key("auto.leader.rebalance.enable")
    )
    leader_imbalance_per_broker_percentage: int = field(
        default=10, metadata=_key("leader.imbalance.per.broker.percentage")
    )
    leader_imbalance_check_interval_seconds: int = field(
        default=300, metadata=_key("leader.imbalance.check.interval.seconds")
    )
    delete_topic_enable: bool = field(default=True, metadata=_key("delete.topic.enable"))
    fetch_max_bytes: int = field(default=57671680, metadata=_key("fetch.max.bytes"))
    request_timeout_ms: int = field(default=30000, metadata=_key("request.timeout.ms"))

    def log_config(self) -> LogConfig:
        """The broker-wide defaults for every log (topic configs may override them later)."""
        return LogConfig(
            segment_bytes=self.log_segment_bytes,
            segment_ms=self.log_roll_ms,
            segment_index_bytes=self.log_index_size_max_bytes,
            index_interval_bytes=self.log_index_interval_bytes,
            retention_ms=self.log_retention_ms,
            retention_bytes=self.log_retention_bytes,
            flush_messages=self.log_flush_interval_messages,
            flush_ms=self.log_flush_interval_ms,
            max_message_bytes=self.message_max_bytes,
            producer_id_expiration_ms=self.producer_id_expiration_ms,
        )


def describe(config: BrokerConfig) -> list[tuple[str, str]]:
    """(Kafka name, effective value) pairs, for logging the configuration at start-up."""
    pairs = [
        ("broker.id", str(config.broker_id)),
        ("listeners", _listener_url(config.listener_host, config.listener_port)),
        ("advertised.listeners", _listener_url(config.advertised_host, config.advertised_port)),
    ]
    for f in dataclasses.fields(config):
        name = f.metadata.get("key")
        if name is not None and name != "broker.id":
            pairs.append((name, _format_value(getattr(config, f.name))))
    return pairs


def _listener_url(host: str, port: int) -> str:
    return f"PLAINTEXT://[{host}]:{port}" if ":" in host else f"PLAINTEXT://{host}:{port}"


def _format_value(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, tuple):
        return ",".join(str(v) for v in value)
    return str(value)


# --- java.util.Properties format --------------------------------------------------------------

_WHITESPACE: Final = " \t\f"
_ESCAPES: Final = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def parse_properties(text: str, *, source: str = "<string>") -> dict[str, str]:
    """Parse java .properties text (as `java.util.Properties.load` does); later keys win.

    `key=value`, `key: value` or `key value`; `#`/`!` comment lines; a line ending in an odd
    number of backslashes continues on the next (whose leading whitespace is dropped); escapes
    `\\t \\n \\r \\f \\uXXXX`, and `\\x` is `x` otherwise. Values are trimmed, as Kafka trims
    the values it parses.
    """
    return {key: value for _, key, value in _parse_lines(text, source)}


def _parse_lines(text: str, source: str) -> Iterator[tuple[int, str, str]]:
    """(1-based line number, key, value) for each logical line that holds a property."""
    lines = re.split(r"\r\n|\r|\n", text)
    i = 0
    while i < len(lines):
        line_number = i + 1
        logical = lines[i].lstrip(_WHITESPACE)
        i += 1
        if not logical or logical[0] in "#!":
            continue  # comments are natural lines: a trailing backslash does not continue them
        while _continues(logical):
            logical = logical[:-1]
            if i == len(lines):
                break
            logical += lines[i].lstrip(_WHITESPACE)
            i += 1
        key, value = _split_key_value(logical)
        try:
            yield line_number, _unescape(key).strip(), _unescape(_rstrip_unescaped(value))
        except ValueError as e:
            raise ConfigError(f"{source} line {line_number}: {e}") from None


def _continues(line: str) -> bool:
    trailing = len(line) - len(line.rstrip("\\"))
    return trailing % 2 == 1


def _split_key_value(line: str) -> tuple[str, str]:
    """Split at the first unescaped '=', ':' or whitespace, as Properties.load does."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in "=:" or c in _WHITESPACE:
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip(_WHITESPACE)
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(_WHITESPACE)
    return key, rest


def _rstrip_unescaped(value: str) -> str:
    """Drop trailing whitespace, but keep an escaped one ("a\\ " stays "a\\ ")."""
    stripped = value.rstrip(_WHITESPACE)
    if len(stripped) < len(value) and _continues(stripped):  # odd backslashes: escaped space
        return value[: len(stripped) + 1]
    return stripped


def _unescape(raw: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(raw):
        c = raw[i]
        if c != "\\":
            out.append(c)
            i += 1
            continue
        if i + 1 == len(raw):
            break  # a lone trailing backslash is dropped, as in Java
        nxt = raw[i + 1]
        if nxt == "u":
            digits = raw[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uxxxx escape {raw[i : i + 6]!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)


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
        for line_number, key, value in _parse_lines(text, str(path)):
            raw[key] = (value, f"{path} line {line_number}")
    for override in overrides:
        key, sep, value = override.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"invalid override {override!r}: expected key=value")
        raw[key.strip()] = (value.strip(), _OVERRIDE_ORIGIN)
    for key, (value, origin) in raw.items():
        if key not in KNOWN_KEYS:
            raise ConfigError(_unknown_key_message(key, value, origin), key=key)
    return _build(_Reader(raw))


def _unknown_key_message(key: str, value: str, origin: str) -> str:
    close = difflib.get_close_matches(key, sorted(KNOWN_KEYS), n=1, cutoff=0.6)
    hint = (
        f"did you mean {close[0]!r}?"
        if close
        else "expected one of the keys listed in docs/examples/server.properties"
    )
    return f"unknown config key {key!r} (value {value!r}, {origin}): {hint}"


class _Reader:
    """Typed access to the raw strings; every failure names key, value, origin and expectation."""

    def __init__(self, raw: dict[str, tuple[str, str]]) -> None:
        self._raw = raw

    def is_set(self, key: str) -> bool:
        return key in self._raw

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

    def string(self, key: str, default: str | None = None) -> str:
        if key in self._raw:
            return self._raw[key][0]
        if default is None:
            raise self.fail(key, "a value")
        return default

    def optional_string(self, key: str) -> str | None:
        """None when unset or empty (Kafka's null)."""
        value = self._raw.get(key, ("", ""))[0]
        return value or None

    def integer(
        self,
        key: str,
        default: int | None = None,
        *,
        minimum: int = 0,
        maximum: int = _INT_MAX,
    ) -> int:
        value = self.optional_integer(key, minimum=minimum, maximum=maximum)
        if value is not None:
            return value
        if default is None:
            raise self.fail(key, _int_expectation(minimum, maximum))
        return default

    def optional_integer(
        self, key: str, *, minimum: int = 0, maximum: int = _INT_MAX
    ) -> int | None:
        if key not in self._raw:
            return None
        text = self._raw[key][0]
        # Java's Integer/Long.parseLong syntax: no underscores, no spaces inside.
        if re.fullmatch(r"[+-]?[0-9]+", text) is None:
            raise self.fail(key, _int_expectation(minimum, maximum))
        value = int(text)
        if not minimum <= value <= maximum:
            raise self.fail(key, _int_expectation(minimum, maximum))
        return value

    def long(self, key: str, default: int, *, minimum: int = 0) -> int:
        return self.integer(key, default, minimum=minimum, maximum=_LONG_MAX)

    def optional_long(self, key: str, *, minimum: int = 0) -> int | None:
        return self.optional_integer(key, minimum=minimum, maximum=_LONG_MAX)

    def boolean(self, key: str, default: bool) -> bool:
        if key not in self._raw:
            return default
        text = self._raw[key][0].lower()
        if text not in ("true", "false"):
            raise self.fail(key, "true or false")
        return text == "true"


def _int_expectation(minimum: int, maximum: int) -> str:
    if maximum in (_INT_MAX, _LONG_MAX):
        kind = "an integer" if maximum == _INT_MAX else "a long integer"
        extra = " (-1: no limit)" if minimum == -1 else ""
        return f"{kind} >= {minimum}{extra}"
    return f"an integer from {minimum} to {maximum}"


def _build(r: _Reader) -> BrokerConfig:
    broker_id = r.integer("broker.id", minimum=0)
    listener_host, listener_port = _parse_listeners(r, "listeners", _DEFAULT_LISTENERS)
    advertised_host, advertised_port = _advertised(r, listener_host, listener_port)
    listener_host = listener_host or "0.0.0.0"  # PLAINTEXT://:9092 binds every interface
    zookeeper_connect = _parse_zookeeper_connect(r)
    session_timeout_ms = r.integer("zookeeper.session.timeout.ms", 18000, minimum=1)
    replica_lag_time_max_ms = r.long("replica.lag.time.max.ms", 30000, minimum=1)
    replica_fetch_wait_max_ms = r.integer("replica.fetch.wait.max.ms", 500)
    if replica_fetch_wait_max_ms > replica_lag_time_max_ms:
        # Kafka's rule: a follower parked longer than the lag time would drop out of the ISR.
        raise r.fail(
            "replica.fetch.wait.max.ms",
            f"at most replica.lag.time.max.ms ({replica_lag_time_max_ms})",
        )
    flush_scheduler_interval_ms = r.long("log.flush.scheduler.interval.ms", _LONG_MAX, minimum=1)
    config = BrokerConfig(
        broker_id=broker_id,
        zookeeper_connect=zookeeper_connect,
        listener_host=listener_host,
        listener_port=listener_port,
        advertised_host=advertised_host,
        advertised_port=advertised_port,
        broker_rack=r.optional_string("broker.rack"),
        zookeeper_session_timeout_ms=session_timeout_ms,
        zookeeper_connection_timeout_ms=r.integer(
            "zookeeper.connection.timeout.ms", session_timeout_ms, minimum=1
        ),
        log_dirs=_parse_log_dirs(r),
        num_partitions=r.integer("num.partitions", 1, minimum=1),
        default_replication_factor=r.integer("default.replication.factor", 1, minimum=1),
        message_max_bytes=r.integer("message.max.bytes", 1048588, minimum=1),
        socket_request_max_bytes=r.integer("socket.request.max.bytes", 104857600, minimum=1),
        connections_max_idle_ms=r.long("connections.max.idle.ms", 600_000, minimum=1),
        max_connections=r.integer("max.connections", 10_000, minimum=1),
        # Minimums below are LogConfig's, so log_config() cannot fail on a loaded config.
        log_segment_bytes=r.integer("log.segment.bytes", 1073741824, minimum=128),
        log_roll_ms=_roll_ms(r),
        log_index_size_max_bytes=r.integer("log.index.size.max.bytes", 10485760, minimum=64),
        log_index_interval_bytes=r.integer("log.index.interval.bytes", 4096),
        log_retention_ms=_retention_ms(r),
        log_retention_bytes=r.long("log.retention.bytes", -1, minimum=-1),
        log_retention_check_interval_ms=r.long(
            "log.retention.check.interval.ms", 300000, minimum=1
        ),
        log_flush_interval_messages=r.long("log.flush.interval.messages", _LONG_MAX, minimum=1),
        # Kafka: unset log.flush.interval.ms means the scheduler interval.
        log_flush_interval_ms=r.long("log.flush.interval.ms", flush_scheduler_interval_ms),
        log_flush_scheduler_interval_ms=flush_scheduler_interval_ms,
        replica_lag_time_max_ms=replica_lag_time_max_ms,
        replica_fetch_wait_max_ms=replica_fetch_wait_max_ms,
        replica_fetch_min_bytes=r.integer("replica.fetch.min.bytes", 1),
        replica_fetch_max_bytes=r.integer("replica.fetch.max.bytes", 1048576),
        replica_fetch_backoff_ms=r.integer("replica.fetch.backoff.ms", 1000),
        replica_high_watermark_checkpoint_interval_ms=r.long(
            "replica.high.watermark.checkpoint.interval.ms", 5000, minimum=1
        ),
        producer_id_expiration_ms=r.long("producer.id.expiration.ms", 86_400_000, minimum=1),
        producer_id_expiration_check_interval_ms=r.long(
            "producer.id.expiration.check.interval.ms", 600_000, minimum=1
        ),
        isr_change_propagation_interval_ms=r.long(
            "isr.change.propagation.interval.ms", 2500, minimum=1
        ),
        isr_change_propagation_blackout_ms=r.long("isr.change.propagation.blackout.ms", 5000),
        isr_change_propagation_max_delay_ms=r.long("isr.change.propagation.max.delay.ms", 60000),
        controlled_shutdown_max_retries=r.integer("controlled.shutdown.max.retries", 3),
        controlled_shutdown_retry_backoff_ms=r.long("controlled.shutdown.retry.backoff.ms", 5000),
        min_insync_replicas=r.integer("min.insync.replicas", 1, minimum=1),
        unclean_leader_election_enable=r.boolean("unclean.leader.election.enable", False),
        auto_create_topics_enable=r.boolean("auto.create.topics.enable", False),
        controlled_shutdown_enable=r.boolean("controlled.shutdown.enable", True),
        auto_leader_rebalance_enable=r.boolean("auto.leader.rebalance.enable", True),
        leader_imbalance_per_broker_percentage=r.integer(
            "leader.imbalance.per.broker.percentage", 10, maximum=100
        ),
        leader_imbalance_check_interval_seconds=r.long(
            "leader.imbalance.check.interval.seconds", 300, minimum=1
        ),
        delete_topic_enable=r.boolean("delete.topic.enable", True),
        fetch_max_bytes=r.integer("fetch.max.bytes", 57671680, minimum=1024),
        request_timeout_ms=r.integer("request.timeout.ms", 30000),
    )
    # Accepted for compatibility, no effect; still validated so a typo'd value is caught.
    r.integer("num.network.threads", 3, minimum=1)
    r.integer("num.io.threads", 8, minimum=1)
    return config


def _roll_ms(r: _Reader) -> int:
    """log.roll.ms wins over log.roll.hours (Kafka's precedence)."""
    roll_ms = r.optional_long("log.roll.ms", minimum=1)
    if roll_ms is not None:
        return roll_ms
    return r.integer("log.roll.hours", 168, minimum=1) * _MS_PER_HOUR


def _retention_ms(r: _Reader) -> int:
    """log.retention.ms over .minutes over .hours; -1 (any of them): keep forever."""
    retention_ms = r.optional_long("log.retention.ms", minimum=-1)
    if retention_ms is None:
        minutes = r.optional_integer("log.retention.minutes", minimum=-1)
        if minutes is not None:
            retention_ms = minutes * _MS_PER_MINUTE
        else:
            retention_ms = r.integer("log.retention.hours", 168, minimum=-1) * _MS_PER_HOUR
    return -1 if retention_ms < 0 else retention_ms


def _parse_log_dirs(r: _Reader) -> tuple[Path, ...]:
    """log.dirs wins over log.dir; a comma-separated list (Kafka's parseCsvList)."""
    key = "log.dirs" if r.is_set("log.dirs") else "log.dir"
    dirs = [d.strip() for d in r.string(key, _DEFAULT_LOG_DIR).split(",")]
    dirs = [d for d in dirs if d]
    if not dirs:
        raise r.fail(key, "a comma-separated list of one or more directories")
    if len(set(dirs)) != len(dirs):
        raise r.fail(key, "distinct directories")
    return tuple(Path(d) for d in dirs)


_LISTENER: Final = re.compile(
    r"(?P<name>[A-Za-z0-9_]+)://(?:\[(?P<ipv6>[0-9A-Fa-f:.%A-Za-z]+)\]|(?P<host>[A-Za-z0-9.\-_]*))"
    r":(?P<port>[0-9]{1,5})"
)
_LISTENER_EXPECTED: Final = (
    "a comma-separated list of PLAINTEXT://host:port (host may be empty for every interface, "
    "IPv6 in brackets; Highwater speaks PLAINTEXT only)"
)


def _parse_listeners(r: _Reader, key: str, default: str) -> tuple[str, int]:
    """(host, port) of the PLAINTEXT listener in `key`; host "" when the URL leaves it empty."""
    found: tuple[str, int] | None = None
    names: set[str] = set()
    for entry in (e.strip() for e in r.string(key, default).split(",")):
        match = _LISTENER.fullmatch(entry)
        if match is None or int(match["port"]) > 65535:
            raise r.fail(key, _LISTENER_EXPECTED)
        name = match["name"].upper()
        if name != "PLAINTEXT" or name in names:
            # No listener.security.protocol.map: any other name would need one. Kafka also
            # rejects a listener name used twice.
            raise r.fail(key, _LISTENER_EXPECTED + ", each name once")
        names.add(name)
        host = match["ipv6"] if match["ipv6"] is not None else match["host"]
        found = (host, int(match["port"]))
    if found is None:
        raise r.fail(key, _LISTENER_EXPECTED)
    return found


def _advertised(r: _Reader, listener_host: str, listener_port: int) -> tuple[str, int]:
    """advertised.listeners, defaulting to listeners; never a wildcard address."""
    if r.is_set("advertised.listeners"):
        host, port = _parse_listeners(r, "advertised.listeners", _DEFAULT_LISTENERS)
        if port == 0:
            raise r.fail("advertised.listeners", "a port from 1 to 65535")
        source = "advertised.listeners"
    else:
        host, port = listener_host, listener_port
        source = "listeners"
    if host in ("0.0.0.0", "::"):
        hint = ""
        if source == "listeners":
            hint = " (advertised.listeners defaults to listeners: set it)"
        raise r.fail(source, f"a routable advertised host, not the wildcard {host}{hint}")
    if not host:
        # Kafka registers the canonical host name for an empty listener host.
        host = socket.gethostname()
    return host, port


_ZK_HOST: Final = re.compile(r"(?:\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.\-_]+)(?::(?P<port>[0-9]{1,5}))?")


def _parse_zookeeper_connect(r: _Reader) -> str:
    """Validate "h:p[,h:p][/chroot]" (ZooKeeper's connect string; port defaults to 2181)."""
    expected = "host:port[,host:port...][/chroot], e.g. 127.0.0.1:2181 or zk1:2181,zk2:2181/kafka"
    value = r.string("zookeeper.connect")
    hosts, slash, chroot = value.partition("/")
    if slash and (not chroot or chroot.endswith("/") or "//" in chroot):
        raise r.fail("zookeeper.connect", expected)
    for host in hosts.split(","):
        match = _ZK_HOST.fullmatch(host.strip())
        if match is None or (match["port"] is not None and not 0 < int(match["port"]) <= 65535):
            raise r.fail("zookeeper.connect", expected)
    return value
