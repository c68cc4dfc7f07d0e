"""BrokerConfig: reading server.properties, Kafka's defaults and precedence, and clear errors."""

from __future__ import annotations

import dataclasses
import re
import socket
import typing
from pathlib import Path

import pytest

from broker.config import settings_doc
from broker.config.broker_config import (
    KNOWN_KEYS,
    BrokerConfig,
    ConfigError,
    describe,
    load_config,
    value_of,
)
from broker.config.config_def import Type, format_value
from broker.config.log_config import LogConfig
from broker.config.settings import SETTINGS, default_of
from protocol.java_properties import parse_properties

REQUIRED = ("broker.id=1", "zookeeper.connect=127.0.0.1:2181")
EXAMPLE = Path(__file__).resolve().parents[3] / "docs" / "examples" / "server.properties"
HOUR_MS = 3600 * 1000
LONG_MAX = (1 << 63) - 1


def load(*overrides: str) -> BrokerConfig:
    return load_config(None, [*REQUIRED, *overrides])


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "server.properties"
    path.write_text(text, encoding="utf-8")
    return path


def test_a_malformed_escape_in_the_file_is_a_config_error_naming_the_line(
    tmp_path: Path,
) -> None:
    path = write(tmp_path, "broker.id=1\nzookeeper.connect=\\u12\n")
    with pytest.raises(ConfigError, match=r"server.properties line 2: malformed \\uxxxx"):
        load_config(path)


# --- loading: defaults, files, overrides --------------------------------------------------------


def test_defaults_are_kafkas() -> None:
    config = load()
    assert config.broker_id == 1
    assert config.zookeeper_connect == "127.0.0.1:2181"
    assert (config.listener_host, config.listener_port) == ("127.0.0.1", 9092)
    assert (config.advertised_host, config.advertised_port) == ("127.0.0.1", 9092)
    assert config.broker_rack is None
    assert config.zookeeper_session_timeout_ms == 18000
    assert config.zookeeper_connection_timeout_ms == 18000
    assert config.log_dirs == (Path("/tmp/highwater-logs"),)
    assert config.num_partitions == 1
    assert config.default_replication_factor == 1
    assert config.message_max_bytes == 1048588
    assert config.socket_request_max_bytes == 104857600
    assert config.log_segment_bytes == 1073741824
    assert config.log_roll_ms == 168 * HOUR_MS
    assert config.log_index_size_max_bytes == 10485760
    assert config.log_index_interval_bytes == 4096
    assert config.log_retention_ms == 168 * HOUR_MS
    assert config.log_retention_bytes == -1
    assert config.log_retention_check_interval_ms == 300000
    assert config.log_flush_interval_messages == LONG_MAX
    assert config.log_flush_interval_ms == LONG_MAX
    assert config.log_flush_scheduler_interval_ms == LONG_MAX
    assert config.replica_lag_time_max_ms == 30000
    assert config.replica_fetch_wait_max_ms == 500
    assert config.replica_fetch_min_bytes == 1
    assert config.replica_fetch_max_bytes == 1048576
    assert config.min_insync_replicas == 1
    assert config.unclean_leader_election_enable is False
    assert config.auto_create_topics_enable is False  # Highwater's default, unlike Kafka
    assert config.controlled_shutdown_enable is True
    assert config.auto_leader_rebalance_enable is True
    assert config.leader_imbalance_per_broker_percentage == 10
    assert config.leader_imbalance_check_interval_seconds == 300
    assert config.delete_topic_enable is True
    assert config.fetch_max_bytes == 57671680
    assert config.request_timeout_ms == 30000
    # Constructing directly gives the same defaults as loading.
    assert config == BrokerConfig(broker_id=1, zookeeper_connect="127.0.0.1:2181")


def test_every_key_parses(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "broker.id=7\n"
        "broker.rack=r1\n"
        "listeners=PLAINTEXT://0.0.0.0:9093\n"
        "advertised.listeners=PLAINTEXT://broker7.example:19093\n"
        "zookeeper.connect=zk1:2181,zk2:2182/highwater\n"
        "zookeeper.session.timeout.ms=6000\n"
        "zookeeper.connection.timeout.ms=3000\n"
        "log.dirs=/d1, /d2\n"
        "num.partitions=6\n"
        "default.replication.factor=3\n"
        "message.max.bytes=2000000\n"
        "socket.request.max.bytes=5000000\n"
        "log.segment.bytes=1048576\n"
        "log.roll.hours=2\n"
        "log.index.size.max.bytes=4096\n"
        "log.index.interval.bytes=0\n"
        "log.retention.hours=1\n"
        "log.retention.bytes=1000000\n"
        "log.retention.check.interval.ms=1000\n"
        "log.flush.interval.messages=10\n"
        "log.flush.interval.ms=20\n"
        "log.flush.scheduler.interval.ms=30\n"
        "replica.lag.time.max.ms=10000\n"
        "replica.fetch.wait.max.ms=100\n"
        "replica.fetch.min.bytes=5\n"
        "replica.fetch.max.bytes=2000\n"
        "min.insync.replicas=2\n"
        "unclean.leader.election.enable=TRUE\n"
        "auto.create.topics.enable=true\n"
        "controlled.shutdown.enable=false\n"
        "auto.leader.rebalance.enable=False\n"
        "leader.imbalance.per.broker.percentage=0\n"
        "leader.imbalance.check.interval.seconds=5\n"
        "delete.topic.enable=false\n"
        "fetch.max.bytes=1024\n"
        "request.timeout.ms=100\n"
        "num.network.threads=5\n"
        "num.io.threads=5\n",
    )
    config = load_config(path, [])
    assert config == BrokerConfig(
        broker_id=7,
        zookeeper_connect="zk1:2181,zk2:2182/highwater",
        listener_host="0.0.0.0",
        listener_port=9093,
        advertised_host="broker7.example",
        advertised_port=19093,
        broker_rack="r1",
        zookeeper_session_timeout_ms=6000,
        zookeeper_connection_timeout_ms=3000,
        log_dirs=(Path("/d1"), Path("/d2")),
        num_partitions=6,
        default_replication_factor=3,
        message_max_bytes=2000000,
        socket_request_max_bytes=5000000,
        log_segment_bytes=1048576,
        log_roll_ms=2 * HOUR_MS,
        log_index_size_max_bytes=4096,
        log_index_interval_bytes=0,
        log_retention_ms=HOUR_MS,
        log_retention_bytes=1000000,
        log_retention_check_interval_ms=1000,
        log_flush_interval_messages=10,
        log_flush_interval_ms=20,
        log_flush_scheduler_interval_ms=30,
        replica_lag_time_max_ms=10000,
        replica_fetch_wait_max_ms=100,
        replica_fetch_min_bytes=5,
        replica_fetch_max_bytes=2000,
        min_insync_replicas=2,
        unclean_leader_election_enable=True,
        auto_create_topics_enable=True,
        controlled_shutdown_enable=False,
        auto_leader_rebalance_enable=False,
        leader_imbalance_per_broker_percentage=0,
        leader_imbalance_check_interval_seconds=5,
        delete_topic_enable=False,
        fetch_max_bytes=1024,
        request_timeout_ms=100,
    )


def test_overrides_win_over_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "broker.id=1\nzookeeper.connect=zk:2181\nnum.partitions=3\n")
    config = load_config(path, ["num.partitions=12", " broker.id = 2 "])
    assert (config.num_partitions, config.broker_id) == (12, 2)


def test_override_values_may_contain_equals_signs() -> None:
    assert load("broker.rack=a=b").broker_rack == "a=b"


def test_the_documented_example_loads_and_lists_every_key() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    mentioned = set(re.findall(r"^#?([a-z][a-z.]+)=", text, flags=re.MULTILINE))
    assert mentioned == KNOWN_KEYS
    config = load_config(EXAMPLE, [])
    assert config == BrokerConfig(broker_id=1, zookeeper_connect="127.0.0.1:2181")


def test_the_examples_commented_defaults_are_the_real_defaults() -> None:
    text = EXAMPLE.read_text(encoding="utf-8")
    # Uncomment every "#key=value" line that has a value: the result must change nothing.
    uncommented = re.sub(r"^#([a-z][a-z.]+=\S)", r"\1", text, flags=re.MULTILINE)
    properties = parse_properties(uncommented)
    config = load_config(None, [f"{k}={v}" for k, v in properties.items() if v])
    assert config == BrokerConfig(broker_id=1, zookeeper_connect="127.0.0.1:2181")


# --- precedence ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("settings", "expected_ms"),
    [
        (["log.retention.hours=2"], 2 * HOUR_MS),
        (["log.retention.hours=2", "log.retention.minutes=3"], 3 * 60_000),
        (["log.retention.hours=2", "log.retention.minutes=3", "log.retention.ms=4"], 4),
        (["log.retention.minutes=3", "log.retention.ms=4"], 4),
        (["log.retention.hours=-1"], -1),
        (["log.retention.minutes=-1", "log.retention.hours=5"], -1),
        (["log.retention.ms=-1", "log.retention.minutes=5"], -1),
        (["log.retention.ms=0"], 0),
    ],
)
def test_retention_ms_over_minutes_over_hours(settings: list[str], expected_ms: int) -> None:
    assert load(*settings).log_retention_ms == expected_ms


def test_roll_ms_over_hours() -> None:
    assert load("log.roll.hours=3").log_roll_ms == 3 * HOUR_MS
    assert load("log.roll.hours=3", "log.roll.ms=1234").log_roll_ms == 1234


def test_log_dirs_over_log_dir() -> None:
    assert load("log.dir=/single").log_dirs == (Path("/single"),)
    assert load("log.dir=/single", "log.dirs=/a,/b,").log_dirs == (Path("/a"), Path("/b"))


def test_connection_timeout_defaults_to_session_timeout() -> None:
    config = load("zookeeper.session.timeout.ms=6000")
    assert config.zookeeper_connection_timeout_ms == 6000


def test_flush_interval_defaults_to_the_scheduler_interval() -> None:
    config = load("log.flush.scheduler.interval.ms=2000")
    assert (config.log_flush_interval_ms, config.log_flush_scheduler_interval_ms) == (2000, 2000)
    assert (
        load(
            "log.flush.scheduler.interval.ms=2000", "log.flush.interval.ms=5"
        ).log_flush_interval_ms
        == 5
    )


# --- listeners and zookeeper.connect ------------------------------------------------------------


@pytest.mark.parametrize(
    ("listeners", "host", "port"),
    [
        ("PLAINTEXT://127.0.0.1:9092", "127.0.0.1", 9092),
        ("plaintext://localhost:19092", "localhost", 19092),
        ("PLAINTEXT://broker-1.example.com:9092", "broker-1.example.com", 9092),
        ("PLAINTEXT://[::1]:9092", "::1", 9092),
        (" PLAINTEXT://127.0.0.1:0 ", "127.0.0.1", 0),
    ],
)
def test_listener_parsing(listeners: str, host: str, port: int) -> None:
    config = load(f"listeners={listeners}")
    assert (config.listener_host, config.listener_port) == (host, port)
    assert (config.advertised_host, config.advertised_port) == (host, port)


def test_an_empty_listener_host_binds_everything_and_advertises_the_host_name(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(socket, "gethostname", lambda: "box.example")
    config = load("listeners=PLAINTEXT://:9092")
    assert (config.listener_host, config.listener_port) == ("0.0.0.0", 9092)
    assert (config.advertised_host, config.advertised_port) == ("box.example", 9092)


def test_advertised_listeners_are_separate() -> None:
    config = load(
        "listeners=PLAINTEXT://0.0.0.0:9092", "advertised.listeners=PLAINTEXT://kafka-1:19092"
    )
    assert (config.listener_host, config.listener_port) == ("0.0.0.0", 9092)
    assert (config.advertised_host, config.advertised_port) == ("kafka-1", 19092)


@pytest.mark.parametrize(
    "value",
    [
        "127.0.0.1:9092",
        "PLAINTEXT://127.0.0.1",
        "PLAINTEXT://127.0.0.1:99999",
        "PLAINTEXT://127.0.0.1:port",
        "PLAINTEXT://127.0.0.1:9092/",
        "PLAINTEXT://a:9092,PLAINTEXT://b:9093",
        "PLAINTEXT://a:9092,",
        "",
    ],
)
def test_bad_listeners(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(f"listeners={value}")
    assert_names(raised.value, "listeners", value.strip(), "NAME://host:port")


@pytest.mark.parametrize("wildcard", ["0.0.0.0", "[::]"])
def test_advertised_host_must_not_be_the_wildcard(wildcard: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(f"advertised.listeners=PLAINTEXT://{wildcard}:9092")
    assert_names(raised.value, "advertised.listeners", f"PLAINTEXT://{wildcard}:9092", "routable")


def test_a_wildcard_listener_needs_advertised_listeners() -> None:
    with pytest.raises(ConfigError, match="set it") as raised:
        load("listeners=PLAINTEXT://0.0.0.0:9092")
    assert_names(raised.value, "listeners", "PLAINTEXT://0.0.0.0:9092", "routable")


def test_advertised_port_zero_is_rejected() -> None:
    with pytest.raises(ConfigError) as raised:
        load("advertised.listeners=PLAINTEXT://h:0")
    assert_names(raised.value, "advertised.listeners", "PLAINTEXT://h:0", "port")


@pytest.mark.parametrize(
    "value",
    ["zk:2181", "zk1:2181,zk2:2182,zk3", "10.0.0.1:2181/highwater/prod", "[::1]:2181,zk:2181"],
)
def test_good_zookeeper_connect(value: str) -> None:
    config = load_config(None, ["broker.id=1", f"zookeeper.connect={value}"])
    assert config.zookeeper_connect == value


@pytest.mark.parametrize(
    "value", ["", "zk:", "zk:abc", "zk:70000", "zk:2181,", "zk:2181/", "zk:2181/a//b", "/chroot"]
)
def test_bad_zookeeper_connect(value: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load_config(None, ["broker.id=1", f"zookeeper.connect={value}"])
    assert_names(raised.value, "zookeeper.connect", value, "host:port")


# --- errors -------------------------------------------------------------------------------------


def assert_names(error: ConfigError, key: str, value: str, expected_fragment: str) -> None:
    message = str(error)
    assert error.key == key
    assert key in message
    assert repr(value) in message
    assert "expected" in message
    assert expected_fragment in message


@pytest.mark.parametrize(
    ("key", "value", "expected_fragment"),
    [
        ("broker.id", "abc", "integer >= 0"),
        ("broker.id", "-1", "integer >= 0"),
        ("broker.id", "", "integer >= 0"),
        ("broker.id", "1_000", "integer"),
        ("broker.id", "1.5", "integer"),
        ("broker.id", "2147483648", "integer"),  # a Java int
        ("num.partitions", "0", ">= 1"),
        ("default.replication.factor", "0", ">= 1"),
        ("min.insync.replicas", "0", ">= 1"),
        ("message.max.bytes", "0", ">= 1"),
        ("socket.request.max.bytes", "-5", ">= 1"),
        ("zookeeper.session.timeout.ms", "0", ">= 1"),
        ("zookeeper.connection.timeout.ms", "x", ">= 1"),
        ("log.segment.bytes", "100", ">= 128"),
        ("log.roll.ms", "0", ">= 1"),
        ("log.roll.hours", "0", ">= 1"),
        ("log.index.size.max.bytes", "10", ">= 64"),
        ("log.index.interval.bytes", "-1", ">= 0"),
        ("log.retention.ms", "-2", ">= -1"),
        ("log.retention.minutes", "-2", ">= -1"),
        ("log.retention.hours", "1h", ">= -1"),
        ("log.retention.bytes", "-2", ">= -1"),
        ("log.retention.check.interval.ms", "0", ">= 1"),
        ("log.flush.interval.messages", "0", ">= 1"),
        ("log.flush.interval.ms", "-1", ">= 0"),
        ("log.flush.scheduler.interval.ms", "9223372036854775808", "long integer"),
        ("replica.lag.time.max.ms", "0", ">= 1"),
        ("replica.fetch.wait.max.ms", "-1", ">= 0"),
        ("replica.fetch.wait.max.ms", "30001", "at most replica.lag.time.max.ms"),
        ("replica.fetch.min.bytes", "-1", ">= 0"),
        ("replica.fetch.max.bytes", "-1", ">= 0"),
        ("unclean.leader.election.enable", "yes", "true or false"),
        ("auto.create.topics.enable", "1", "true or false"),
        ("controlled.shutdown.enable", "", "true or false"),
        ("auto.leader.rebalance.enable", "on", "true or false"),
        ("delete.topic.enable", "no", "true or false"),
        ("leader.imbalance.per.broker.percentage", "101", "from 0 to 100"),
        ("leader.imbalance.check.interval.seconds", "0", ">= 1"),
        ("fetch.max.bytes", "1000", ">= 1024"),
        ("request.timeout.ms", "-1", ">= 0"),
        ("num.network.threads", "0", ">= 1"),
        ("num.io.threads", "many", ">= 1"),
        ("log.dirs", " , ", "directories"),
        ("log.dirs", "/a,/a", "distinct"),
        ("log.dir", "", "directories"),
    ],
)
def test_malformed_values_name_key_value_and_expectation(
    key: str, value: str, expected_fragment: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(f"{key}={value}")
    assert_names(raised.value, key, value.strip(), expected_fragment)


def test_errors_say_where_the_value_came_from(tmp_path: Path) -> None:
    path = write(tmp_path, "broker.id=1\nzookeeper.connect=zk:2181\n\nnum.partitions=zero\n")
    with pytest.raises(ConfigError, match=rf"{re.escape(str(path))} line 4"):
        load_config(path, [])
    with pytest.raises(ConfigError, match="--override"):
        load_config(path, ["num.partitions=-3"])


@pytest.mark.parametrize("key", ["broker.id", "zookeeper.connect"])
def test_missing_required_keys(key: str) -> None:
    overrides = [o for o in REQUIRED if not o.startswith(key)]
    with pytest.raises(ConfigError, match=rf"missing required config {re.escape(key)}: expected"):
        load_config(None, overrides)


@pytest.mark.parametrize(
    ("typo", "suggestion"),
    [
        ("broker.idd", "broker.id"),
        ("zookeeper.conect", "zookeeper.connect"),
        ("log.retention.hour", "log.retention.hours"),
        ("num.partition", "num.partitions"),
        ("advertised.listener", "advertised.listeners"),
    ],
)
def test_unknown_keys_suggest_the_closest_known_key(typo: str, suggestion: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(f"{typo}=5")
    message = str(raised.value)
    assert raised.value.key == typo
    assert f"unknown config key {typo!r}" in message
    assert "'5'" in message
    assert f"did you mean {suggestion!r}?" in message


def test_unknown_key_without_a_close_match(tmp_path: Path) -> None:
    path = write(tmp_path, "broker.id=1\nzookeeper.connect=zk:2181\nsasl.kerberos.service.name=x\n")
    with pytest.raises(ConfigError, match=r"docs/examples/server.properties") as raised:
        load_config(path, [])
    assert "sasl.kerberos.service.name" in str(raised.value)
    assert "line 3" in str(raised.value)


def test_override_without_equals() -> None:
    with pytest.raises(ConfigError, match=r"invalid override 'num.partitions': expected key=value"):
        load("num.partitions")


def test_unreadable_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.properties"
    with pytest.raises(ConfigError, match=re.escape(str(missing))):
        load_config(missing, [])


def test_java_integer_syntax() -> None:
    assert load("num.partitions=+4").num_partitions == 4
    assert load("log.retention.bytes=9223372036854775807").log_retention_bytes == LONG_MAX


def test_compatibility_keys_are_accepted_with_no_effect() -> None:
    config = load("num.network.threads=16", "num.io.threads=32")
    assert config == load()


def test_empty_rack_is_none() -> None:
    assert load("broker.rack=").broker_rack is None
    assert load("broker.rack=us-east-1a").broker_rack == "us-east-1a"


# --- mapping and description --------------------------------------------------------------------


def test_log_config_mapping() -> None:
    config = load(
        "log.segment.bytes=1000",
        "log.roll.ms=2000",
        "log.index.size.max.bytes=3000",
        "log.index.interval.bytes=40",
        "log.retention.ms=5000",
        "log.retention.bytes=6000",
        "log.flush.interval.messages=7",
        "log.flush.interval.ms=8",
        "message.max.bytes=900",
    )
    assert config.log_config() == LogConfig(
        segment_bytes=1000,
        segment_ms=2000,
        segment_index_bytes=3000,
        index_interval_bytes=40,
        retention_ms=5000,
        retention_bytes=6000,
        flush_messages=7,
        flush_ms=8,
        max_message_bytes=900,
    )


def test_default_log_config_is_the_log_engines_default() -> None:
    assert load().log_config() == LogConfig()


def test_describe_lists_effective_settings_by_kafka_name() -> None:
    config = load(
        "log.dirs=/a,/b", "log.retention.hours=1", "advertised.listeners=PLAINTEXT://[::1]:1"
    )
    pairs = describe(config)
    names = [name for name, _ in pairs]
    assert len(names) == len(set(names))
    assert set(names) <= KNOWN_KEYS
    as_dict = dict(pairs)
    assert names[0] == "broker.id"
    assert as_dict["broker.id"] == "1"
    assert as_dict["listeners"] == "PLAINTEXT://127.0.0.1:9092"
    assert as_dict["advertised.listeners"] == "PLAINTEXT://[::1]:1"
    assert as_dict["log.dirs"] == "/a,/b"
    assert as_dict["log.retention.ms"] == str(HOUR_MS)
    assert as_dict["auto.create.topics.enable"] == "false"
    assert as_dict["broker.rack"] == "null"
    assert all(isinstance(value, str) for _, value in pairs)


def test_config_is_frozen() -> None:
    config = load()
    with pytest.raises(dataclasses.FrozenInstanceError):
        config.broker_id = 2  # type: ignore[misc]


# --- the settings table -------------------------------------------------------------------------


def test_the_table_names_every_known_key_once() -> None:
    keys = [s.key for s in SETTINGS]
    assert len(keys) == len(set(keys))
    assert set(keys) == KNOWN_KEYS


def test_every_attribute_of_the_table_is_a_typed_field_with_the_tables_default() -> None:
    fields = {f.name: f for f in dataclasses.fields(BrokerConfig)}
    hints = typing.get_type_hints(BrokerConfig)
    python_type = {
        Type.INT: int,
        Type.LONG: int,
        Type.BOOLEAN: bool,
        Type.STRING: str,
        Type.DOUBLE: float,
    }
    attrs = {s.attr for s in SETTINGS if s.attr is not None}
    listener_fields = {"listener_host", "listener_port", "advertised_host", "advertised_port"}
    # Computed from several settings (listeners, the protocol map, sasl.jaas.config, ...).
    listener_fields |= {
        "listeners",
        "inter_broker_listener_name",
        "inter_broker_login",
        "authorizer_enabled",
        "super_users",
        "listener_max_connections",  # listener.name.<name>.max.connections
        "listener_max_reauth_ms",  # listener.name.<name>.<mechanism>.connections.max.reauth.ms
    }
    assert set(fields) == attrs | listener_fields | {"given"}
    for s in SETTINGS:
        if s.attr is None:
            continue
        f = fields[s.attr]
        assert f.metadata["key"] == s.key
        assert s.attr == s.key.replace(".", "_")  # Kafka's name, units last
        paths = s.key == "log.dirs"
        if s.type is Type.LIST:
            assert hints[s.attr] == (tuple[Path, ...] if paths else tuple[str, ...])
        elif s.nullable:
            assert hints[s.attr] == python_type[s.type] | None
        else:
            assert hints[s.attr] is python_type[s.type], s.key
        if not s.required:
            default = default_of(s.key)
            if s.type is Type.LIST and paths:
                assert isinstance(default, tuple)
                default = tuple(Path(d) for d in default)
            assert f.default == default, s.key


def test_the_log_engines_fields_each_come_from_one_setting() -> None:
    log_fields = [s.log_field for s in SETTINGS if s.log_field is not None]
    assert sorted(log_fields) == sorted(f.name for f in dataclasses.fields(LogConfig))
    for s in SETTINGS:
        if s.log_field is not None:
            assert default_of(s.key) == getattr(LogConfig(), s.log_field), s.key


def test_describe_names_every_setting_with_a_value_of_its_own() -> None:
    config = load()
    names = [name for name, _ in describe(config)]
    with_values = {s.key for s in SETTINGS if s.attr is not None}
    computed = {
        "listeners",
        "advertised.listeners",
        "listener.security.protocol.map",
        "listener.wire.protocol.map",
        "inter.broker.listener.name",
        "security.inter.broker.protocol",
        "authorizer.class.name",
        "super.users",
        "sasl.jaas.config",
    }
    assert set(names) == with_values | computed
    for s in SETTINGS:
        if s.attr is not None:
            assert value_of(config, s.key) == default_of(s.key) or s.required, s.key


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        (["log.roll.ms=5", "log.roll.hours=abc"], "log.roll.hours"),
        (["log.retention.ms=5", "log.retention.hours=x"], "log.retention.hours"),
        (["log.dirs=/a", "log.dir="], "log.dir"),
    ],
)
def test_a_value_is_checked_even_when_another_key_takes_precedence(
    settings: list[str], key: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(*settings)
    assert raised.value.key == key


def test_the_examples_commented_defaults_are_the_tables() -> None:
    """Each "#key=value" line of docs/examples/server.properties shows the table's default
    (the no-effect compatibility keys included, which loading cannot check)."""
    text = EXAMPLE.read_text(encoding="utf-8")
    shown = dict(re.findall(r"^#([a-z][a-z.]+)=(\S+)$", text, flags=re.MULTILINE))
    assert len(shown) > 40
    for key, value in shown.items():
        assert format_value(default_of(key)) == value, key


def test_operations_md_settings_tables_are_up_to_date() -> None:
    """Regenerate with `python -m broker.config.settings_doc` after changing the settings table."""
    text = settings_doc.DOC.read_text(encoding="utf-8")
    assert settings_doc.update(text) == text, "run: python -m broker.config.settings_doc"
    assert settings_doc.main(["--check"]) == 0
    for s in SETTINGS:
        assert f"| `{s.key}` |" in text


def test_the_doc_generator_rewrites_only_between_the_markers(tmp_path: Path) -> None:
    doc = tmp_path / "doc.md"
    doc.write_text(f"before\n{settings_doc.START}\nstale\n{settings_doc.END}\nafter\n")
    assert settings_doc.main(["--check", "--file", str(doc)]) == 1
    assert settings_doc.main(["--file", str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith(f"before\n{settings_doc.START}\n<!-- generated")
    assert text.endswith(f"{settings_doc.END}\nafter\n") and "stale" not in text
    assert settings_doc.main(["--check", "--file", str(doc)]) == 0


# --- named listeners and security ---------------------------------------------------------------


def test_named_listeners_with_protocols_and_the_inter_broker_one() -> None:
    config = load(
        "listeners=INTERNAL://0.0.0.0:9092,EXTERNAL://:19092",
        "advertised.listeners=INTERNAL://broker-1:9092,EXTERNAL://127.0.0.1:19092",
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,EXTERNAL:SASL_SSL",
        "inter.broker.listener.name=INTERNAL",
        "ssl.keystore.location=/etc/highwater/server.pem",
    )
    internal, external = config.all_listeners()
    assert (internal.name, internal.security_protocol, internal.port) == (
        "INTERNAL",
        "PLAINTEXT",
        9092,
    )
    assert (external.host, external.advertised_host, external.advertised_port) == (
        "0.0.0.0",
        "127.0.0.1",
        19092,
    )
    assert (config.advertised_host, config.advertised_port) == ("broker-1", 9092)
    assert config.inter_broker_listener is internal


@pytest.mark.parametrize(
    ("settings", "key", "expected"),
    [
        (["listeners=INTERNAL://:9092"], "listener.security.protocol.map", "INTERNAL"),
        (["listeners=A://:9092,B://:9092"], "listeners", "a different port"),
        (
            ["listeners=PLAINTEXT://h:9092", "advertised.listeners=OTHER://h:9092"],
            "advertised.listeners",
            "only names that listeners has",
        ),
        (
            ["listeners=SSL://h:9093", "security.inter.broker.protocol=SSL"],
            "ssl.keystore.location",
            "PEM file",
        ),
        (
            ["listeners=SASL_PLAINTEXT://h:9093", "security.inter.broker.protocol=SASL_PLAINTEXT"],
            "sasl.jaas.config",
            "login",
        ),
        (
            ["listeners=INTERNAL://h:9092", "listener.security.protocol.map=INTERNAL:PLAINTEXT"],
            "security.inter.broker.protocol",
            "inter.broker.listener.name",
        ),
        (["super.users=alice"], "super.users", "User:name"),
        (["ssl.enabled.protocols=TLSv1.1"], "ssl.enabled.protocols", "TLSv1.2"),
        (["sasl.enabled.mechanisms=GSSAPI"], "sasl.enabled.mechanisms", "SCRAM-SHA-256"),
    ],
)
def test_listener_and_security_mistakes_name_the_setting(
    settings: list[str], key: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(*settings)
    assert raised.value.key == key
    assert expected in str(raised.value)


def test_secrets_are_not_described() -> None:
    config = load(
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="broker" password="s3cret";',
        "ssl.key.password=k3y",
        "zookeeper.digest.username=zk-broker",
        "zookeeper.digest.password=zk-s3cret",
    )
    described = dict(describe(config))
    assert described["sasl.jaas.config"] == "[hidden]"
    assert described["ssl.key.password"] == "[hidden]"
    assert described["zookeeper.digest.password"] == "[hidden]"
    assert "s3cret" not in repr(config) and "k3y" not in repr(config)
    assert config.zookeeper_digest == ("zk-broker", "zk-s3cret")


@pytest.mark.parametrize(
    ("settings", "key"),
    [
        (["zookeeper.set.acl=true"], "zookeeper.digest.username"),
        (["zookeeper.digest.username=zk"], "zookeeper.digest.password"),
        (["zookeeper.digest.password=p"], "zookeeper.digest.username"),
        (
            ["zookeeper.digest.username=a:b", "zookeeper.digest.password=p"],
            "zookeeper.digest.username",
        ),
    ],
)
def test_zookeeper_acls_need_a_whole_digest_login(settings: list[str], key: str) -> None:
    with pytest.raises(ConfigError) as raised:
        load(*settings)
    assert raised.value.key == key


def test_zookeeper_acls_with_a_login_load() -> None:
    config = load(
        "zookeeper.set.acl=true", "zookeeper.digest.username=zk", "zookeeper.digest.password=p"
    )
    assert config.zookeeper_set_acl and config.zookeeper_digest == ("zk", "p")
    assert not load().zookeeper_set_acl and load().zookeeper_digest is None


def test_control_plane_listener_takes_controller_requests_followers_fetch_inter_broker() -> None:
    three = (
        "listeners=INTERNAL://:9092,CONTROL://:9093,CLIENT://:9094",
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,CONTROL:PLAINTEXT,CLIENT:PLAINTEXT",
        "inter.broker.listener.name=INTERNAL",
    )
    unset = load(*three)
    assert unset.control_plane_listener_name is None
    assert value_of(unset, "control.plane.listener.name") is None
    assert unset.control_plane_listener.name == "INTERNAL"
    names = ("INTERNAL", "CONTROL", "CLIENT", None)
    assert [unset.takes_controller_requests(x) for x in names] == [True, False, False, True]
    config = load(*three, "control.plane.listener.name=control")
    assert config.control_plane_listener_name == "CONTROL"
    assert value_of(config, "control.plane.listener.name") == "CONTROL"
    assert [config.takes_controller_requests(x) for x in names] == [False, True, False, True]
    assert [config.takes_follower_fetches(x) for x in names] == [True, True, False, True]
    for wrong in ("INTERNAL", "ELSEWHERE"):
        with pytest.raises(ConfigError) as raised:
            load(*three, f"control.plane.listener.name={wrong}")
        assert_names(raised.value, "control.plane.listener.name", wrong, "(CONTROL, CLIENT)")


# --- the metrics listener's exposure -----------------------------------------------------------

ACLS = "authorizer.class.name=kafka.security.authorizer.AclAuthorizer"
KEYSTORE = "ssl.keystore.location=/etc/highwater/server.pem"


@pytest.mark.parametrize(
    ("settings", "key", "expected"),
    [
        # Every interface, or an address others reach, with ACLs on and no authentication.
        ([ACLS, "metrics.listener=http://0.0.0.0:9644"], "metrics.listener", "loopback"),
        ([ACLS, "metrics.listener=http://:9644"], "metrics.listener", "allow.unauthenticated"),
        ([ACLS, "metrics.listener=http://10.1.2.3:9644"], "metrics.listener", "method=basic"),
        ([ACLS, "metrics.listener=http://broker-1:9644"], "metrics.listener", "loopback"),
        ([ACLS, KEYSTORE, "metrics.listener=https://[::]:9644"], "metrics.listener", "loopback"),
        # A password in clear beyond this host.
        (
            [
                "metrics.listener=http://0.0.0.0:9644",
                "metrics.listener.authentication.method=basic",
            ],
            "metrics.listener",
            "https://",
        ),
        (["metrics.listener=https://127.0.0.1:9644"], "ssl.keystore.location", "https://"),
        (["metrics.listener=ftp://127.0.0.1:9644"], "metrics.listener", "https://host:port"),
        (
            ["metrics.listener.authentication.method=digest"],
            "metrics.listener.authentication.method",
            "basic",
        ),
    ],
)
def test_a_metrics_listener_open_to_others_is_refused(
    settings: list[str], key: str, expected: str
) -> None:
    with pytest.raises(ConfigError) as raised:
        load(*settings)
    assert raised.value.key == key
    assert expected in str(raised.value)


@pytest.mark.parametrize(
    "settings",
    [
        [ACLS, "metrics.listener=http://127.0.0.1:9644"],
        [ACLS, "metrics.listener=http://[::1]:9644"],
        [ACLS, "metrics.listener=http://localhost:9644"],
        [
            ACLS,
            "metrics.listener=http://0.0.0.0:9644",
            "metrics.listener.allow.unauthenticated=true",
        ],
        [
            ACLS,
            KEYSTORE,
            "metrics.listener=https://0.0.0.0:9644",
            "metrics.listener.authentication.method=basic",
        ],
        ["metrics.listener=http://0.0.0.0:9644"],  # no authorizer: nothing is protected anyway
        ["metrics.listener=http://127.0.0.1:9644", "metrics.listener.authentication.method=basic"],
    ],
)
def test_a_metrics_listener_on_loopback_or_authenticated_or_allowed_is_accepted(
    settings: list[str],
) -> None:
    config = load(*settings)
    given = dict(s.split("=", 1) for s in settings)
    assert config.metrics_listener == given["metrics.listener"]
    method = given.get("metrics.listener.authentication.method", "none")
    assert config.metrics_listener_authentication_method == method


def test_session_lifetimes_broker_wide_and_per_listener_and_mechanism() -> None:
    base = [
        "broker.id=1",
        "zookeeper.connect=zk:2181",
        "listeners=INTERNAL://127.0.0.1:9093,CLIENT://127.0.0.1:9092",
        "listener.security.protocol.map=INTERNAL:PLAINTEXT,CLIENT:SASL_SSL",
        "inter.broker.listener.name=INTERNAL",
        "ssl.keystore.location=/etc/highwater/server.pem",
    ]
    assert load_config(None, base).connections_max_reauth_ms == 0  # Kafka's default: off
    config = load_config(
        None,
        [
            *base,
            "connections.max.reauth.ms=3600000",
            "listener.name.client.scram-sha-512.connections.max.reauth.ms=60000",
            "listener.name.CLIENT.plain.connections.max.reauth.ms=0",
        ],
    )
    assert config.connections_max_reauth_ms == 3_600_000
    assert config.listener_max_reauth_ms == (
        ("CLIENT", "PLAIN", 0),
        ("CLIENT", "SCRAM-SHA-512", 60_000),
    )
    for bad, key in [
        ("connections.max.reauth.ms=-1", "connections.max.reauth.ms"),
        (
            "listener.name.other.plain.connections.max.reauth.ms=5",
            "listener.name.other.plain.connections.max.reauth.ms",
        ),
        (
            "listener.name.client.gssapi.connections.max.reauth.ms=5",
            "listener.name.client.gssapi.connections.max.reauth.ms",
        ),
        (
            "listener.name.client.plain.connections.max.reauth.ms=x",
            "listener.name.client.plain.connections.max.reauth.ms",
        ),
    ]:
        with pytest.raises(ConfigError) as raised:
            load_config(None, [*base, bad])
        assert raised.value.key == key


def test_connection_limits_per_listener_and_per_address() -> None:
    config = load_config(
        None,
        [
            "broker.id=1",
            "zookeeper.connect=zk:2181",
            "listeners=INTERNAL://127.0.0.1:9093,CLIENT://127.0.0.1:9092",
            "listener.security.protocol.map=INTERNAL:PLAINTEXT,CLIENT:PLAINTEXT",
            "inter.broker.listener.name=INTERNAL",
            "listener.name.client.max.connections=500",
            "listener.name.INTERNAL.max.connections=50",
            "max.connections.per.ip=20",
            "max.connections.per.ip.overrides=10.0.0.7:100, [::1]:3",
            "max.connection.creation.rate=30",
        ],
    )
    assert config.listener_max_connections == (("CLIENT", 500), ("INTERNAL", 50))
    assert config.max_connections_per_ip == 20
    assert config.max_connections_per_ip_overrides == "10.0.0.7:100, [::1]:3"
    assert config.max_connection_creation_rate == 30
    for bad, key in [
        ("listener.name.other.max.connections=5", "listener.name.other.max.connections"),
        ("listener.name.plaintext.max.connections=-1", "listener.name.plaintext.max.connections"),
        ("max.connections.per.ip.overrides=10.0.0.7", "max.connections.per.ip.overrides"),
        ("max.connections.per.ip.overrides=h:x", "max.connections.per.ip.overrides"),
        ("max.connection.creation.rate=0", "max.connection.creation.rate"),
    ]:
        with pytest.raises(ConfigError) as raised:
            load_config(None, ["broker.id=1", "zookeeper.connect=zk:2181", bad])
        assert raised.value.key == key
