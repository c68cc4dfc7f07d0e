"""Topic ids (KIP-516) in ZooKeeper: the topic znode's version 3 shape, ids written at
creation and kept by later rewrites, and the controller's backfill of znodes without one
(run against the simulator's in-memory ZooKeeper, with the scripts the kazoo client runs)."""

from __future__ import annotations

import json

import pytest

from controller import zk_data
from controller.core.topic_ids import missing_topic_ids
from controller.zk_controller_election import try_elect
from controller.zk_load import load
from controller.zk_script import create
from controller.zk_topics import add_partitions, create_topic, get_assignment
from protocol.topic_id import parse_topic_id
from tests.simulation.zk import SimZk

OLD_SHAPE = b'{"version":1,"partitions":{"0":[1,2]}}'  # a topic znode from before topic ids


@pytest.fixture
def zk() -> SimZk:
    return SimZk()


@pytest.fixture
def session(zk: SimZk) -> int:
    return zk.open_session(1)


def topic_znode(zk: SimZk, topic: str) -> dict[str, object]:
    data = zk.data(zk_data.topic_path(topic))
    assert data is not None
    loaded: dict[str, object] = json.loads(data)
    return loaded


def test_missing_ids_are_drawn_only_for_topics_without_one() -> None:
    drawn = iter(["id-b", "id-c"])
    assert missing_topic_ids({"c": None, "a": "kept", "b": None}, lambda: next(drawn)) == {
        "b": "id-b",
        "c": "id-c",
    }
    assert missing_topic_ids({"a": "kept"}, lambda: pytest.fail("drew an id")) == {}


def test_the_znode_is_kafkas_version_3_with_an_id_and_version_1_without() -> None:
    with_id = zk_data.TopicAssignment({0: (1, 2)}, "AAAAAAAAAAAAAAAAAAAAAQ")
    assert json.loads(with_id.encode()) == {
        "version": 3,
        "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ",
        "partitions": {"0": [1, 2]},
    }
    assert zk_data.TopicAssignment.decode(with_id.encode()) == with_id
    assert zk_data.TopicAssignment.decode(OLD_SHAPE) == zk_data.TopicAssignment({0: (1, 2)})
    with pytest.raises(zk_data.ZkDataError, match="topic_id"):
        zk_data.TopicAssignment.decode(b'{"version":3,"topic_id":"x","partitions":{}}')


def test_a_created_topic_has_an_id_that_adding_partitions_keeps(zk: SimZk, session: int) -> None:
    zk.run(session, create_topic("t", {0: (1,)}, {}))
    topic_id = topic_znode(zk, "t")["topic_id"]
    assert isinstance(topic_id, str)
    parse_topic_id(topic_id)
    existing, version = zk.run(session, get_assignment("t"))
    zk.run(session, add_partitions("t", {**existing, 1: (1,)}, version))
    after = topic_znode(zk, "t")
    assert after["topic_id"] == topic_id and after["partitions"] == {"0": [1], "1": [1]}


def test_the_elected_controller_backfills_ids_and_keeps_existing_ones(
    zk: SimZk, session: int
) -> None:
    zk.run(session, create_topic("new", {0: (1,)}, {}))
    kept = topic_znode(zk, "new")["topic_id"]
    zk.run(session, create(zk_data.topic_path("old"), OLD_SHAPE, makepath=True))
    won = zk.run(session, try_elect(1, session, wall_ms=0))
    assert won is not None
    elected = zk.run(session, load(1, *won))
    old = topic_znode(zk, "old")
    assert old["version"] == 3 and old["partitions"] == {"0": [1, 2]}
    assert elected.topic_ids == {"new": kept, "old": old["topic_id"]}
    assert elected.assignments == {"new": {0: (1,)}, "old": {0: (1, 2)}}
    again = zk.run(session, load(1, *won))  # a re-load does not draw new ids
    assert again.topic_ids == elected.topic_ids
