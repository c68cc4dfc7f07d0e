"""The broker's settings: one entry each (Kafka name, attribute, type, default, bounds, doc).

broker_config.py parses and checks server.properties and --override with it, BrokerConfig's
defaults and describe() come from it, topic configs name their broker setting in it, and
docs/operations.md's tables are rendered from it (`python -m broker.config.settings_doc`). The log
engine's defaults and minimums stay in log_config.py, which this table reads. Past
500 lines by design: one entry per setting, in one place, as Kafka's KafkaConfig defines them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Final

from broker.config.config_def import (
    INT_MAX,
    PER_IP_OVERRIDES_SYNTAX,
    ZK_SYNTAX,
    Fallback,
    InvalidValue,
    Setting,
    Type,
    Value,
    boolean,
    check_directories,
    check_metrics_listener,
    check_per_ip_overrides,
    check_zookeeper_connect,
    double,
    number,
    string,
    strings,
)
from broker.config.log_config import (
    CLEANUP_POLICIES,
    MIN_SEGMENT_BYTES,
    MIN_SEGMENT_INDEX_BYTES,
    NO_LIMIT,
    LogConfig,
)
from broker.core.principal import parse_super_users
from broker.listeners import (
    DEFAULT_PROTOCOL_MAP,
    LISTENERS_SYNTAX,
    PROTOCOL_MAP_SYNTAX,
    WIRE_MAP_SYNTAX,
    SecurityProtocol,
    check_listener_list,
    check_protocol_map,
    check_wire_map,
)
from protocol.jaas import parse_jaas_login

__all__ = [
    "ACL_AUTHORIZER",
    "KNOWN_KEYS",
    "MECHANISMS",
    "MS_PER_HOUR",
    "MS_PER_MINUTE",
    "SETTINGS",
    "default_of",
    "resolve",
    "setting",
]

MS_PER_MINUTE: Final = 60 * 1000
MS_PER_HOUR: Final = 60 * MS_PER_MINUTE
_LOG: Final = LogConfig()  # the log engine's defaults


def _check_cleanup_policy(value: Value) -> None:
    if not value or not isinstance(value, tuple) or set(value) - set(CLEANUP_POLICIES):
        raise InvalidValue("delete, compact, or compact,delete")


MECHANISMS: Final = ("SCRAM-SHA-256", "SCRAM-SHA-512", "PLAIN")
ACL_AUTHORIZER: Final = "kafka.security.authorizer.AclAuthorizer"


def _check_tls_versions(value: Value) -> None:
    if not value or not isinstance(value, tuple) or set(value) - {"TLSv1.2", "TLSv1.3"}:
        raise InvalidValue("TLSv1.2 and/or TLSv1.3")


def _check_mechanisms(value: Value) -> None:
    if not value or not isinstance(value, tuple) or set(value) - set(MECHANISMS):
        raise InvalidValue(f"one or more of {', '.join(MECHANISMS)}")


def _check_jaas(value: Value) -> None:
    try:
        parse_jaas_login(str(value))
    except ValueError as exc:
        raise InvalidValue(f"a JAAS login module line with username and password: {exc}") from None


def _check_super_users(value: Value) -> None:
    try:
        parse_super_users(str(value))
    except ValueError as exc:
        raise InvalidValue(f"User:name[;User:name...] ({exc})") from None


def _hours(ms: int) -> int:
    hours, rest = divmod(ms, MS_PER_HOUR)
    if rest:
        raise ValueError(f"{ms} ms is not a whole number of hours")
    return hours


# --- the table ----------------------------------------------------------------------------------


def _section(title: str, *settings: Setting) -> tuple[Setting, ...]:
    return tuple(replace(s, section=title) for s in settings)


INT, LONG = Type.INT, Type.LONG
_METRICS_SYNTAX: Final = "http://host:port or https://host:port"
_DIRECTORIES: Final = "comma-separated directories"
_NO_EFFECT: Final = "Accepted for compatibility, no effect: one trio event loop serves all."

SETTINGS: Final[tuple[Setting, ...]] = (
    *_section(
        "Broker identity",
        number(
            INT,
            "broker.id",
            None,
            "Unique per broker; a broker restarted with a dead one's id takes over its data.",
            required=True,
        ),
        string("broker.rack", None, "Rack of this broker (unset: none)."),
    ),
    *_section(
        "Sockets",
        string(
            "listeners",
            "PLAINTEXT://127.0.0.1:9092",
            "Named listeners to bind. An empty host binds every interface; port 0 picks a free "
            "port.",
            syntax=LISTENERS_SYNTAX,
            check=check_listener_list,
            attr=None,  # BrokerConfig.listeners (and listener_host/port: the inter-broker one)
        ),
        string(
            "advertised.listeners",
            None,
            "What is registered for clients, per listener name (a listener left out advertises "
            "its own address): routable (not 0.0.0.0); an empty host: host name.",
            syntax=LISTENERS_SYNTAX,
            check=check_listener_list,
            attr=None,  # BrokerConfig.listeners' advertised addresses
            fallback=Fallback("listeners"),
        ),
        string(
            "listener.security.protocol.map",
            DEFAULT_PROTOCOL_MAP,
            "Each listener name's security protocol: PLAINTEXT, SSL, SASL_PLAINTEXT, SASL_SSL.",
            syntax=PROTOCOL_MAP_SYNTAX,
            check=check_protocol_map,
            attr=None,  # BrokerConfig.listeners' protocols
        ),
        string(
            "listener.wire.protocol.map",
            "",
            "Each listener name's wire protocol: highwater (msgpack, the default for a name "
            "left out) or kafka (Kafka's own, for Kafka clients: docs/kafka.md). The "
            "inter-broker listener speaks highwater.",
            syntax=WIRE_MAP_SYNTAX,
            check=check_wire_map,
            attr=None,  # BrokerConfig.listeners' wires
        ),
        string(
            "inter.broker.listener.name",
            None,
            "The listener brokers (and the controller) use to reach each other; unset: the "
            "one named by security.inter.broker.protocol.",
            syntax="a listener name",
            attr=None,  # BrokerConfig.inter_broker_listener_name
        ),
        string(
            "control.plane.listener.name",
            None,
            "The listener (KIP-291) on which this broker takes the controller's requests "
            "(LeaderAndIsr, StopReplica, UpdateMetadata) and, at the controller, "
            "ControlledShutdown; the controller and brokers connect to it. Unset: the "
            "inter-broker listener takes them. Set it the same on every broker; it must not "
            "be the inter-broker listener.",
            syntax="a listener name",
        ),
        string(
            "security.inter.broker.protocol",
            "PLAINTEXT",
            "Names the inter-broker listener when inter.broker.listener.name is unset (Kafka's).",
            choices=tuple(SecurityProtocol),
            attr=None,
        ),
        number(
            INT,
            "socket.request.max.bytes",
            104857600,
            "The largest request frame accepted; a larger one closes the connection.",
            minimum=1,
        ),
        number(
            LONG,
            "connections.max.idle.ms",
            600_000,
            "A connection that sends nothing this long is closed.",
            minimum=1,
        ),
        number(
            INT,
            "max.connections",
            10_000,
            "Connections beyond this, over every listener, are closed when accepted (Kafka: "
            "unlimited; here a bound). With several listeners the inter-broker one is exempt "
            "(KIP-402); listener.name.<name>.max.connections caps one listener.",
            minimum=1,
        ),
        number(
            INT,
            "max.connections.per.ip",
            INT_MAX,
            "Connections from one address beyond this are closed when accepted (the "
            "inter-broker listener's are not counted when there are several listeners).",
        ),
        string(
            "max.connections.per.ip.overrides",
            "",
            "Per-address exceptions to max.connections.per.ip, e.g. 10.0.0.7:500,edge-host:50 "
            "(host names are resolved at start-up).",
            syntax=PER_IP_OVERRIDES_SYNTAX,
            check=check_per_ip_overrides,
        ),
        number(
            INT,
            "max.connection.creation.rate",
            INT_MAX,
            "Connections accepted per second over every listener but the inter-broker one "
            "(KIP-612); past it a listener waits before it accepts the next.",
            minimum=1,
        ),
        number(INT, "num.network.threads", 3, _NO_EFFECT, minimum=1, attr=None),
        number(INT, "num.io.threads", 8, _NO_EFFECT, minimum=1, attr=None),
    ),
    *_section(
        "Client quotas",
        number(
            INT,
            "quota.window.num",
            11,
            "Client quotas (producer_byte_rate, consumer_byte_rate, request_percentage) are "
            "measured over this many windows (Kafka's ClientQuotaManager).",
            minimum=1,
        ),
        number(
            INT,
            "quota.window.size.seconds",
            1,
            "The length of one client quota window; a throttle lasts at most "
            "quota.window.num of them.",
            minimum=1,
        ),
    ),
    *_section(
        "ZooKeeper",
        string(
            "zookeeper.connect",
            None,
            "The ZooKeeper ensemble, and the chroot holding this cluster's znodes.",
            syntax=ZK_SYNTAX,
            check=check_zookeeper_connect,
            required=True,
        ),
        number(INT, "zookeeper.session.timeout.ms", 18000, "ZooKeeper session timeout.", minimum=1),
        number(
            INT,
            "zookeeper.connection.timeout.ms",
            None,
            "How long to wait for the first connection.",
            minimum=1,
            fallback=Fallback("zookeeper.session.timeout.ms"),
        ),
        boolean(
            "zookeeper.set.acl",
            False,
            "Give every znode a broker creates ACLs: only the brokers' ZooKeeper login may "
            "change it, and only it may read credentials (/config/users) and broker configs; "
            "needs zookeeper.digest.username and .password. Secure an existing tree with "
            "`highwater zookeeper-security-migration --zookeeper.acl secure`.",
        ),
        string(
            "zookeeper.digest.username",
            None,
            "Highwater only (Kafka: the Client section of its JAAS file, DigestLoginModule): "
            "the brokers' ZooKeeper login (digest scheme), the same on every broker.",
        ),
        string(
            "zookeeper.digest.password",
            None,
            "Highwater only: the password of zookeeper.digest.username (never shown).",
        ),
    ),
    *_section(
        "Topics",
        number(
            INT, "num.partitions", 1, "Partitions of a topic created without a count.", minimum=1
        ),
        number(
            INT,
            "default.replication.factor",
            1,
            "Replication factor of a topic created without one.",
            minimum=1,
        ),
        number(
            INT,
            "min.insync.replicas",
            1,
            "With acks=all, the fewest in-sync replicas a write needs (NOT_ENOUGH_REPLICAS).",
            minimum=1,
            dynamic=True,
        ),
        boolean(
            "auto.create.topics.enable",
            False,
            "Kafka's default is true; Highwater creates topics only by CreateTopics "
            "(true is accepted, no effect yet).",
        ),
        boolean("delete.topic.enable", True, "Whether DeleteTopics is allowed."),
    ),
    *_section(
        "Log storage",
        strings(
            "log.dirs",
            None,
            "Directories holding partition data.",
            syntax=_DIRECTORIES,
            check=check_directories,
            fallback=Fallback("log.dir"),
        ),
        strings(
            "log.dir",
            ("/tmp/highwater-logs",),
            "Used when log.dirs is unset.",
            syntax=_DIRECTORIES,
            check=check_directories,
            attr=None,
        ),
        number(
            INT,
            "message.max.bytes",
            _LOG.max_message_bytes,
            "The largest record batch accepted (MESSAGE_TOO_LARGE above).",
            minimum=1,
            log_field="max_message_bytes",
            dynamic=True,
        ),
        number(
            INT,
            "log.segment.bytes",
            _LOG.segment_bytes,
            "Roll when the active segment would exceed this.",
            minimum=MIN_SEGMENT_BYTES,
            log_field="segment_bytes",
            dynamic=True,
        ),
        number(
            LONG,
            "log.roll.ms",
            None,
            "Roll when the newest batch timestamp is this far past the segment's first.",
            minimum=1,
            fallback=Fallback("log.roll.hours", MS_PER_HOUR),
            log_field="segment_ms",
            dynamic=True,
        ),
        number(
            INT,
            "log.roll.hours",
            _hours(_LOG.segment_ms),
            "Used when log.roll.ms is unset.",
            minimum=1,
            attr=None,
        ),
        number(
            INT,
            "log.index.size.max.bytes",
            _LOG.segment_index_bytes,
            "Roll when an index reaches this size.",
            minimum=MIN_SEGMENT_INDEX_BYTES,
            log_field="segment_index_bytes",
            dynamic=True,
        ),
        number(
            INT,
            "log.index.interval.bytes",
            _LOG.index_interval_bytes,
            "Bytes between sparse index entries.",
            log_field="index_interval_bytes",
            dynamic=True,
        ),
        number(
            LONG,
            "log.retention.ms",
            None,
            "Delete whole segments whose newest timestamp is older (-1: keep forever).",
            minimum=NO_LIMIT,
            fallback=Fallback("log.retention.minutes", MS_PER_MINUTE),
            log_field="retention_ms",
            dynamic=True,
        ),
        number(
            INT,
            "log.retention.minutes",
            None,
            "Used when log.retention.ms is unset.",
            minimum=NO_LIMIT,
            attr=None,
            fallback=Fallback("log.retention.hours", 60),
        ),
        number(
            INT,
            "log.retention.hours",
            _hours(_LOG.retention_ms),
            "Used when log.retention.ms and log.retention.minutes are unset.",
            minimum=NO_LIMIT,
            attr=None,
        ),
        number(
            LONG,
            "log.retention.bytes",
            _LOG.retention_bytes,
            "Delete the oldest whole segments while a partition is larger (-1: no limit).",
            minimum=NO_LIMIT,
            log_field="retention_bytes",
            dynamic=True,
        ),
        number(
            LONG,
            "log.retention.check.interval.ms",
            300000,
            "How often retention is applied.",
            minimum=1,
        ),
        number(
            LONG,
            "log.flush.interval.messages",
            _LOG.flush_messages,
            "fsync after this many records (default: never; durability comes from replicas).",
            minimum=1,
            log_field="flush_messages",
            dynamic=True,
        ),
        number(
            LONG,
            "log.flush.interval.ms",
            None,
            "fsync when records waited this long (checked every scheduler interval).",
            fallback=Fallback("log.flush.scheduler.interval.ms"),
            log_field="flush_ms",
            dynamic=True,
        ),
        number(
            LONG,
            "log.flush.scheduler.interval.ms",
            _LOG.flush_ms,
            "How often logs are checked for a time-based fsync.",
            minimum=1,
        ),
        number(
            INT,
            "log.flush.offset.checkpoint.interval.ms",
            60000,
            "How often each log dir's recovery-point and log-start-offset checkpoints are written.",
            minimum=1,
        ),
    ),
    *_section(
        "Log compaction",
        strings(
            "log.cleanup.policy",
            _LOG.cleanup_policy,
            "delete: retention deletes old segments; compact: keep the latest record per key.",
            syntax="delete, compact, or compact,delete",
            check=_check_cleanup_policy,
            log_field="cleanup_policy",
            dynamic=True,
        ),
        boolean("log.cleaner.enable", True, "Run the log cleaner (compacted topics need it)."),
        number(
            INT,
            "log.cleaner.threads",
            1,
            "How many logs are cleaned at once (each in a worker process of its own).",
            minimum=1,
        ),
        double(
            "log.cleaner.min.cleanable.ratio",
            _LOG.min_cleanable_dirty_ratio,
            "Clean a log once this share of it is dirty (not cleaned yet).",
            minimum=0,
            maximum=1,
            log_field="min_cleanable_dirty_ratio",
            dynamic=True,
        ),
        number(
            LONG,
            "log.cleaner.min.compaction.lag.ms",
            _LOG.min_compaction_lag_ms,
            "Records younger than this are never cleaned.",
            log_field="min_compaction_lag_ms",
            dynamic=True,
        ),
        number(
            LONG,
            "log.cleaner.max.compaction.lag.ms",
            _LOG.max_compaction_lag_ms,
            "A log with records dirty for longer is cleaned whatever its dirty ratio.",
            minimum=1,
            log_field="max_compaction_lag_ms",
            dynamic=True,
        ),
        number(
            LONG,
            "log.cleaner.delete.retention.ms",
            _LOG.delete_retention_ms,
            "How long a tombstone (null value) is kept before the cleaner removes it.",
            log_field="delete_retention_ms",
            dynamic=True,
        ),
        number(
            LONG,
            "log.cleaner.backoff.ms",
            15000,
            "How long the cleaner waits when no log needs cleaning.",
        ),
        number(
            LONG,
            "log.cleaner.dedupe.buffer.size",
            128 * 1024 * 1024,
            "Memory for the key -> offset map of one cleaning (fewer keys per pass if small).",
            minimum=1024 * 1024,
        ),
    ),
    *_section(
        "Replication",
        number(
            LONG,
            "replica.lag.time.max.ms",
            30000,
            "A follower that has not caught up for this long leaves the ISR.",
            minimum=1,
        ),
        number(
            INT,
            "replica.fetch.wait.max.ms",
            500,
            "How long a follower's fetch waits for data; at most replica.lag.time.max.ms.",
        ),
        number(INT, "replica.fetch.min.bytes", 1, "Bytes a follower's fetch waits for."),
        number(
            INT,
            "replica.fetch.max.bytes",
            1048576,
            "The most bytes a follower asks for in one fetch, and per partition.",
        ),
        number(
            INT,
            "replica.fetch.backoff.ms",
            1000,
            "How long a follower waits after a fetch error before trying that partition again.",
        ),
        number(
            INT,
            "max.incremental.fetch.session.cache.slots",
            1000,
            "Fetch sessions (KIP-227) this broker keeps; 0 turns them off.",
            minimum=0,
        ),
        number(
            LONG,
            "replica.high.watermark.checkpoint.interval.ms",
            5000,
            "How often high watermarks are written to disk.",
            minimum=1,
        ),
        number(
            LONG,
            "producer.id.expiration.ms",
            _LOG.producer_id_expiration_ms,
            "An idempotent producer id idle this long is forgotten by a partition "
            "(its next batch is then accepted at any sequence).",
            minimum=1,
            log_field="producer_id_expiration_ms",
            dynamic=True,
        ),
        number(
            LONG,
            "producer.id.expiration.check.interval.ms",
            600_000,
            "How often the broker looks for idle producer ids.",
            minimum=1,
        ),
        boolean(
            "unclean.leader.election.enable",
            False,
            "Let a replica outside the ISR lead when no ISR member is live (may lose data).",
            dynamic=True,
        ),
        number(
            LONG,
            "isr.change.propagation.interval.ms",
            2500,
            "Highwater only (Kafka hard-codes it): how often a leader looks for ISR changes "
            "to publish to the controller.",
            minimum=1,
        ),
        number(
            LONG,
            "isr.change.propagation.blackout.ms",
            5000,
            "Highwater only: publish gathered ISR changes once none happened for this long.",
        ),
        number(
            LONG,
            "isr.change.propagation.max.delay.ms",
            60000,
            "Highwater only: publish gathered ISR changes anyway when the last one is this old.",
        ),
    ),
    *_section(
        "Controller",
        boolean(
            "controlled.shutdown.enable",
            True,
            "Ask the controller to move leaderships away before stopping.",
        ),
        number(INT, "controlled.shutdown.max.retries", 3, "Attempts at a controlled shutdown."),
        number(
            LONG,
            "controlled.shutdown.retry.backoff.ms",
            5000,
            "Wait between controlled shutdown attempts.",
        ),
        number(
            LONG,
            "controlled.shutdown.timeout.ms",
            10000,
            "Highwater only: a controlled shutdown ends within this, its attempts sharing it "
            "(each at most request.timeout.ms); keep it well inside a container's stop grace "
            "period.",
            minimum=1,
        ),
        boolean(
            "auto.leader.rebalance.enable",
            True,
            "The controller moves leadership back to preferred replicas when imbalanced.",
        ),
        number(
            INT,
            "leader.imbalance.per.broker.percentage",
            10,
            "Above this share (%) of a broker's preferred partitions led elsewhere: rebalance.",
            maximum=100,
        ),
        number(
            LONG,
            "leader.imbalance.check.interval.seconds",
            300,
            "How often the controller checks the leader imbalance.",
            minimum=1,
        ),
    ),
    *_section(
        "Consumer groups",
        number(
            INT,
            "offsets.topic.num.partitions",
            50,
            "Partitions of __consumer_offsets (fixed once the topic exists).",
            minimum=1,
        ),
        number(
            INT,
            "offsets.topic.replication.factor",
            3,
            "Replication factor of __consumer_offsets: it is created once this many brokers live.",
            minimum=1,
        ),
        number(
            INT,
            "offsets.topic.segment.bytes",
            100 * 1024 * 1024,
            "segment.bytes of __consumer_offsets.",
            minimum=MIN_SEGMENT_BYTES,
        ),
        number(
            INT,
            "offsets.retention.minutes",
            7 * 24 * 60,
            "Committed offsets of a group with no members go this long after it became empty.",
            minimum=1,
        ),
        number(
            LONG,
            "offsets.retention.check.interval.ms",
            600_000,
            "How often expired offsets are looked for.",
            minimum=1,
        ),
        number(
            INT,
            "offsets.commit.timeout.ms",
            5000,
            "How long a commit or group change waits for __consumer_offsets' ISR.",
            minimum=1,
        ),
        number(
            INT,
            "offset.metadata.max.bytes",
            4096,
            "Largest metadata string of a committed offset (OFFSET_METADATA_TOO_LARGE above).",
        ),
        number(
            INT,
            "group.consumer.session.timeout.ms",
            45_000,
            "A member not heard from for this long is removed from its group.",
            minimum=1,
        ),
        number(
            INT,
            "group.consumer.heartbeat.interval.ms",
            5000,
            "How often members heartbeat (the coordinator tells them).",
            minimum=1,
        ),
        number(
            INT,
            "group.consumer.max.size",
            2**31 - 1,
            "Most members a group may have (GROUP_MAX_SIZE_REACHED above).",
            minimum=1,
        ),
    ),
    *_section(
        "Security",
        string(
            "ssl.keystore.type",
            "PEM",
            "The format of ssl.keystore.location: PEM only.",
            choices=("PEM",),
            attr=None,
        ),
        string(
            "ssl.keystore.location",
            None,
            "PEM file with this broker's certificate chain and private key (SSL, SASL_SSL "
            "listeners; also the client certificate it shows other brokers).",
            syntax="a file path",
        ),
        string(
            "ssl.key.password",
            None,
            "Password of an encrypted private key in ssl.keystore.location.",
            syntax="a password",
        ),
        string(
            "ssl.truststore.type",
            "PEM",
            "The format of ssl.truststore.location: PEM only.",
            choices=("PEM",),
            attr=None,
        ),
        string(
            "ssl.truststore.location",
            None,
            "PEM file of the CA certificates trusted for client certificates and other "
            "brokers' (unset: the system's).",
            syntax="a file path",
        ),
        string(
            "ssl.client.auth",
            "none",
            "required: clients must show a certificate the truststore trusts (mutual TLS); "
            "requested: verified if shown; none: not asked for.",
            choices=("required", "requested", "none"),
        ),
        strings(
            "ssl.enabled.protocols",
            ("TLSv1.2", "TLSv1.3"),
            "TLS versions accepted; nothing older than TLSv1.2 is.",
            syntax="TLSv1.2 and/or TLSv1.3",
            check=_check_tls_versions,
        ),
        string(
            "ssl.endpoint.identification.algorithm",
            "https",
            "https: a broker checks the host name in the certificate of the broker it "
            "connects to; empty: it does not.",
            choices=("https", ""),
        ),
        strings(
            "sasl.enabled.mechanisms",
            ("SCRAM-SHA-256", "SCRAM-SHA-512"),
            "Mechanisms SASL listeners offer (Kafka's default, GSSAPI, is not available); "
            "PLAIN only over SASL_SSL.",
            syntax="SCRAM-SHA-256, SCRAM-SHA-512, PLAIN",
            check=_check_mechanisms,
        ),
        string(
            "sasl.mechanism.inter.broker.protocol",
            "SCRAM-SHA-512",
            "The mechanism brokers log in to each other with on a SASL inter-broker listener.",
            choices=MECHANISMS,
        ),
        string(
            "sasl.jaas.config",
            None,
            "The broker's own login on a SASL inter-broker listener, in Kafka's JAAS syntax: "
            'org.apache.kafka.common.security.scram.ScramLoginModule required username="u" '
            'password="p";',
            syntax="a JAAS login module line with username and password",
            check=_check_jaas,
            attr=None,  # BrokerConfig.inter_broker_login
        ),
        number(
            INT,
            "sasl.server.max.receive.size",
            4096,
            "The largest frame accepted before a connection has authenticated (Kafka: 524288); "
            "a larger one closes it.",
            minimum=512,
        ),
        number(
            INT,
            "connections.authentication.timeout.ms",
            10_000,
            "Highwater only: a connection on an SSL or SASL listener that has not finished its "
            "TLS handshake and authentication within this is closed.",
            minimum=1,
        ),
        number(
            INT,
            "connection.failed.authentication.delay.ms",
            100,
            "A failed SASL authentication's answer, and the close after it, wait this long "
            "(slows down password guessing).",
        ),
        number(
            LONG,
            "connections.max.reauth.ms",
            0,
            "An authenticated SASL session lasts this long (KIP-368): SaslAuthenticate tells the "
            "client, which re-authenticates on the open connection before then; a request "
            "other than SaslHandshake after it closes the connection. 0: sessions never end. "
            "listener.name.<name>.<mechanism>.connections.max.reauth.ms (lower case, e.g. "
            "listener.name.external.scram-sha-512.connections.max.reauth.ms) overrides it for "
            "one listener and mechanism.",
        ),
        string(
            "authorizer.class.name",
            "",
            "Set to kafka.security.authorizer.AclAuthorizer to check ACLs on every request; "
            "empty: everything is allowed.",
            choices=("", ACL_AUTHORIZER),
            attr=None,  # BrokerConfig.authorizer_enabled
        ),
        string(
            "super.users",
            None,
            "Principals allowed everything, e.g. User:admin;User:broker (semicolon-separated).",
            syntax="User:name[;User:name...]",
            check=_check_super_users,
            attr=None,  # BrokerConfig.super_users
        ),
        boolean(
            "allow.everyone.if.no.acl.found",
            False,
            "With an authorizer: allow a request on a resource that no ACL names.",
        ),
    ),
    *_section(
        "Requests",
        number(
            INT,
            "fetch.max.bytes",
            57671680,
            "Kafka's cap on one Fetch response (accepted, not applied yet: the request's is).",
            minimum=1024,
        ),
        number(
            INT,
            "request.timeout.ms",
            30000,
            "Timeout of the broker's own requests (fetches from leaders, controlled shutdown).",
        ),
    ),
    *_section(
        "Metrics and status page",
        string(
            "metrics.listener",
            None,
            "HTTP listener for /metrics (Prometheus) and the status page; unset: none (off). "
            "https:// serves TLS with ssl.keystore.location, ssl.key.password and "
            "ssl.enabled.protocols (no client certificates asked for).",
            syntax=_METRICS_SYNTAX,
            check=check_metrics_listener,
        ),
        string(
            "metrics.listener.authentication.method",
            "none",
            "basic: every request needs HTTP basic authentication with a SCRAM user's name and "
            "password, and sees only what that user may DESCRIBE; none: no authentication.",
            choices=("none", "basic"),
        ),
        boolean(
            "metrics.listener.allow.unauthenticated",
            False,
            "With an authorizer: allow a metrics.listener without authentication on an address "
            "other than loopback (it shows every topic, group and committed offset).",
        ),
        number(
            INT,
            "metrics.max.connections",
            32,
            "HTTP connections beyond this are closed when accepted.",
            minimum=1,
        ),
        number(
            INT,
            "metrics.max.header.bytes",
            16384,
            "An HTTP request whose head is larger is refused (431).",
            minimum=1024,
        ),
        number(
            INT,
            "metrics.read.timeout.ms",
            10000,
            "An HTTP client silent this long mid-request is disconnected (idle keep-alive: 5 s).",
            minimum=1,
        ),
    ),
)

_BY_KEY: Final = {s.key: s for s in SETTINGS}
KNOWN_KEYS: Final = frozenset(_BY_KEY)


def setting(key: str) -> Setting:
    """The setting named `key` (KeyError if there is none)."""
    return _BY_KEY[key]


def resolve(key: str, given: Mapping[str, Value | None]) -> Value | None:
    """`key`'s effective value: as given, else its fallback's (scaled), else its default."""
    if key in given:
        return given[key]
    entry = _BY_KEY[key]
    if entry.fallback is None:
        return entry.default
    value = resolve(entry.fallback.key, given)
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value * entry.fallback.factor
    return value


def default_of(key: str) -> Value | None:
    """`key`'s built-in default, its fallbacks followed (None: required or null)."""
    return resolve(key, {})
