"""Dynamic configs in ZooKeeper (controller/zk_configs.py), and the controller reading the
unclean.leader.election.enable overrides when they change (zk_load.read_event), run against
the simulator's in-memory ZooKeeper (the same scripts the kazoo client runs)."""

from __future__ import annotations

import json

import pytest

from controller import zk_data
from controller.core import TopicsChanged
from controller.zk_configs import (
    BROKERS,
    CHANGE_EXPIRATION_MS,
    CLIENTS,
    TOPICS,
    USERS,
    ConfigChangedError,
    desanitize_entity_name,
    get_entity_config,
    purge_expired_changes,
    read_config_changes,
    read_quota_entities,
    sanitize_entity_name,
    set_entity_config,
)
from controller.zk_load import read_event
from controller.zk_script import create
from controller.zk_topics import create_topic
from controller.zk_types import WatchEvent, WatchKind
from tests.simulation.zk import SimZk

DEFAULT = zk_data.DEFAULT_BROKER_ENTITY


@pytest.fixture
def zk() -> SimZk:
    return SimZk()


@pytest.fixture
def session(zk: SimZk) -> int:
    return zk.open_session(1)


def notifications(zk: SimZk) -> list[dict[str, object]]:
    children = zk.children(zk_data.CONFIG_CHANGES_PATH)
    return [
        json.loads(zk.data(f"{zk_data.CONFIG_CHANGES_PATH}/{c}") or b"") for c in sorted(children)
    ]


def test_a_change_writes_the_entity_and_a_notification_as_kafka_does(
    zk: SimZk, session: int
) -> None:
    zk.run(session, create_topic("t", {0: (1,)}, {"retention.ms": "1"}))
    stored = zk.run(session, get_entity_config(TOPICS, "t"))
    assert (dict(stored.config), stored.version) == ({"retention.ms": "1"}, 0)
    zk.run(session, set_entity_config(TOPICS, "t", {"retention.ms": "5"}, stored.version))
    zk.run(session, set_entity_config(BROKERS, DEFAULT, {"log.retention.ms": "9"}, -1))
    assert json.loads(zk.data("/config/topics/t") or b"") == {
        "version": 1,
        "config": {"retention.ms": "5"},
    }
    assert json.loads(zk.data("/config/brokers/<default>") or b"") == {
        "version": 1,
        "config": {"log.retention.ms": "9"},
    }
    assert zk.children(zk_data.CONFIG_CHANGES_PATH) == [
        "config_change_0000000000",
        "config_change_0000000001",
    ]
    assert notifications(zk) == [
        {"version": 2, "entity_path": "topics/t"},
        {"version": 2, "entity_path": "brokers/<default>"},
    ]


def test_a_writer_that_read_an_older_version_loses(zk: SimZk, session: int) -> None:
    zk.run(session, set_entity_config(BROKERS, DEFAULT, {"a": "1"}, -1))
    with pytest.raises(ConfigChangedError):
        zk.run(session, set_entity_config(BROKERS, DEFAULT, {"a": "2"}, -1))  # exists now
    zk.run(session, set_entity_config(BROKERS, DEFAULT, {"a": "2"}, 0))
    with pytest.raises(ConfigChangedError):
        zk.run(session, set_entity_config(BROKERS, DEFAULT, {"a": "3"}, 0))
    assert dict(zk.run(session, get_entity_config(BROKERS, DEFAULT)).config) == {"a": "2"}
    assert len(notifications(zk)) == 2  # a refused write announces nothing


def test_missing_entities_read_as_empty(zk: SimZk, session: int) -> None:
    stored = zk.run(session, get_entity_config(TOPICS, "nope"))
    assert (dict(stored.config), stored.version) == ({}, -1)


def test_reading_changes_after_the_last_one_handled(zk: SimZk, session: int) -> None:
    assert zk.run(session, read_config_changes(-1)).entities == ()
    zk.run(session, set_entity_config(TOPICS, "t", {"a": "1"}, -1))
    zk.run(session, set_entity_config(TOPICS, "t", {"a": "2"}, 0))
    zk.run(session, set_entity_config(BROKERS, DEFAULT, {"b": "1"}, -1))
    changes = zk.run(session, read_config_changes(-1))
    assert changes.entities == ((TOPICS, "t"), (BROKERS, DEFAULT))  # each once, in order
    assert changes.last == 2
    assert zk.run(session, read_config_changes(changes.last)).entities == ()
    zk.run(session, set_entity_config(TOPICS, "u", {}, -1))
    later = zk.run(session, read_config_changes(changes.last))
    assert (later.entities, later.last) == (((TOPICS, "u"),), 3)
    numbers_only = zk.run(session, read_config_changes(-1, entities=False))
    assert (numbers_only.entities, numbers_only.last) == ((), 3)


def test_malformed_notifications_are_reported_and_skipped(zk: SimZk, session: int) -> None:
    zk.run(session, set_entity_config(TOPICS, "t", {}, -1))
    zk.run(session, create(f"{zk_data.CONFIG_CHANGES_PATH}/config_change_0000000001", b"{}"))
    zk.run(session, create(f"{zk_data.CONFIG_CHANGES_PATH}/something_else", b"{}"))
    changes = zk.run(session, read_config_changes(-1))
    assert changes.entities == ((TOPICS, "t"),)
    assert changes.malformed == ("config_change_0000000001",)


def test_notifications_older_than_fifteen_minutes_are_purged_oldest_first(
    zk: SimZk, session: int
) -> None:
    for i in range(4):
        zk.clock = lambda at_ms=i * 60_000: at_ms  # the server's clock: the notification's ctime
        zk.run(session, set_entity_config(TOPICS, f"t{i}", {}, -1))
    children = zk.run(session, read_config_changes(-1)).children
    now = 2 * 60_000 + CHANGE_EXPIRATION_MS + 1  # the first three are older than 15 minutes
    assert zk.run(session, purge_expired_changes(children, now, limit=2)) == 2
    assert zk.run(session, purge_expired_changes(children, now)) == 1  # gone ones are skipped
    assert zk.children(zk_data.CONFIG_CHANGES_PATH) == ["config_change_0000000003"]


def test_a_config_change_makes_the_controller_read_the_unclean_overrides(
    zk: SimZk, session: int
) -> None:
    """Topic override first, then the cluster-wide dynamic default, then (absent from the
    event) the controller's static setting."""
    zk.run(session, create_topic("a", {0: (1,)}, {"unclean.leader.election.enable": "false"}))
    zk.run(session, create_topic("b", {0: (1,)}, {}))
    event = WatchEvent(WatchKind.CHILDREN, zk_data.CONFIG_CHANGES_PATH)
    before = zk.run(session, read_event(1, event))
    assert isinstance(before, TopicsChanged)
    assert before.assignments == {"a": {0: (1,)}, "b": {0: (1,)}}
    assert before.unclean_overrides == {"a": False}
    assert before.topic_ids.keys() == {"a", "b"}  # each written with its topic
    zk.run(
        session, set_entity_config(BROKERS, DEFAULT, {"unclean.leader.election.enable": "true"}, -1)
    )
    after = zk.run(session, read_event(1, event))
    assert isinstance(after, TopicsChanged)
    assert after.unclean_overrides == {"a": False, "b": True}


@pytest.mark.parametrize(
    "data",
    [
        b'{"version":1,"entity_path":"topics/t"}',
        b'{"version":2,"entity_path":"users/u/c"}',
        b'{"version":2,"entity_path":"clients/c/clients/d"}',
        b'{"version":2,"entity_path":"topics/"}',
        b'{"version":2,"entity_path":"topics/a/b"}',
        b'{"version":2}',
        b"[]",
    ],
)
def test_malformed_notification_json_is_a_zk_data_error(data: bytes) -> None:
    with pytest.raises(zk_data.ZkDataError):
        zk_data.ConfigChangeNotification.decode(data)


def test_a_users_notification_names_the_user() -> None:
    # Written when a user's SCRAM credentials change (Kafka's `users/<name>` entity path).
    decoded = zk_data.ConfigChangeNotification.decode(b'{"version":2,"entity_path":"users/u"}')
    assert (decoded.entity_type, decoded.entity_name) == ("users", "u")


@pytest.mark.parametrize(
    ("path", "entity"),
    [
        ("clients/c", ("clients", "c")),
        ("users/u/clients/c", ("users", "u/clients/c")),
        ("users/<default>/clients/<default>", ("users", "<default>/clients/<default>")),
    ],
)
def test_a_quota_notification_names_its_entity(path: str, entity: tuple[str, str]) -> None:
    # Written when client quotas change (Kafka's `clients/<c>`, `users/<u>/clients/<c>`).
    data = json.dumps({"version": 2, "entity_path": path}).encode()
    decoded = zk_data.ConfigChangeNotification.decode(data)
    assert (decoded.entity_type, decoded.entity_name) == entity


def test_quota_entities_are_read_at_every_level(zk: SimZk, session: int) -> None:
    zk.run(session, set_entity_config(USERS, "u", {"producer_byte_rate": "1"}, -1))
    zk.run(session, set_entity_config(USERS, "v/clients/c", {"consumer_byte_rate": "2"}, -1))
    zk.run(session, set_entity_config(CLIENTS, "<default>", {"request_percentage": "3"}, -1))
    assert zk.run(session, read_quota_entities()) == {
        ("users", "u"): {"producer_byte_rate": "1"},
        ("users", "v"): {},  # made empty on the way to its client-id
        ("users", "v/clients/c"): {"consumer_byte_rate": "2"},
        ("clients", "<default>"): {"request_percentage": "3"},
    }


def test_entity_names_are_sanitized_as_kafka_does() -> None:
    assert sanitize_entity_name("CN=a/b,O=c*") == "CN%3Da%2Fb%2CO%3Dc%2A"
    assert desanitize_entity_name(sanitize_entity_name("CN=a/b,O=c*")) == "CN=a/b,O=c*"
    assert sanitize_entity_name("<default>") == "<default>"
