"""Topic znodes: creation and deletion requests (any broker), reads (the controller), cluster id.

Creating a topic is writing its config and assignment; the controller notices the new child of
/brokers/topics and does the rest. Deleting is a request node under /admin/delete_topics that
the controller acts on.
"""

from __future__ import annotations

import base64
import contextlib
import uuid
from collections.abc import Mapping

from controller import zk_data
from controller.zk_script import (
    ZkScript,
    children_or_empty,
    create,
    exists,
    get_data,
    set_data,
)
from controller.zk_types import BadVersionError, NodeExistsError, NoNodeError
from protocol.topic_id import new_topic_id

__all__ = [
    "AssignmentChangedError",
    "TopicExistsError",
    "UnknownTopicError",
    "add_partitions",
    "create_topic",
    "get_assignment",
    "get_assignments",
    "get_or_create_cluster_id",
    "get_topic_config",
    "get_topic_znodes",
    "list_topics",
    "mark_topic_for_deletion",
    "topics_marked_for_deletion",
]


class TopicExistsError(Exception):
    """The topic exists already (or is still being deleted)."""


class UnknownTopicError(Exception):
    pass


class AssignmentChangedError(Exception):
    """The topic's assignment changed since it was read (someone else added partitions)."""


def create_topic(
    name: str,
    assignment: Mapping[int, tuple[int, ...]],
    config: Mapping[str, str],
) -> ZkScript[None]:
    """Write /config/topics/<name> then /brokers/topics/<name> (Kafka's order: the config is
    in place when the controller sees the topic), with a new topic id (KIP-516). Raises
    TopicExistsError."""
    if not assignment:
        raise ValueError("a topic needs at least one partition")
    if (yield from exists(zk_data.topic_path(name))) is not None:
        raise TopicExistsError(f"topic {name!r} already exists")
    if (yield from exists(zk_data.delete_topic_path(name))) is not None:
        raise TopicExistsError(f"topic {name!r} is marked for deletion")
    config_data = zk_data.TopicConfigZnode(dict(config)).encode()
    try:
        yield from create(zk_data.topic_config_path(name), config_data, makepath=True)
    except NodeExistsError:
        yield from set_data(zk_data.topic_config_path(name), config_data)
    data = zk_data.TopicAssignment(dict(assignment), new_topic_id()).encode()
    try:
        yield from create(zk_data.topic_path(name), data, makepath=True)
    except NodeExistsError as exc:
        raise TopicExistsError(f"topic {name!r} already exists") from exc


def get_assignment(name: str) -> ZkScript[tuple[dict[int, tuple[int, ...]], int]]:
    """The topic's assignment and its znode version (for add_partitions). Raises
    UnknownTopicError."""
    found = yield from get_data(zk_data.topic_path(name))
    if found is None:
        raise UnknownTopicError(f"topic {name!r} does not exist")
    return dict(zk_data.TopicAssignment.decode(found[0]).partitions), found[1].version


def _topic_id(name: str) -> ZkScript[str | None]:
    found = yield from get_data(zk_data.topic_path(name))
    return None if found is None else zk_data.TopicAssignment.decode(found[0]).topic_id


def add_partitions(
    name: str,
    assignment: Mapping[int, tuple[int, ...]],
    version: int,
) -> ZkScript[None]:
    """Write the topic's whole new assignment (old partitions unchanged, new ones added) if
    its znode is still at `version`; the controller's watch on it creates the new partitions.
    Raises AssignmentChangedError or UnknownTopicError."""
    if (yield from exists(zk_data.delete_topic_path(name))) is not None:
        raise UnknownTopicError(f"topic {name!r} is marked for deletion")
    # The id is kept (read again: the write below fails if the znode changed since `version`).
    topic_id = yield from _topic_id(name)
    data = zk_data.TopicAssignment(dict(assignment), topic_id).encode()
    try:
        yield from set_data(zk_data.topic_path(name), data, version)
    except BadVersionError as exc:
        raise AssignmentChangedError(f"topic {name!r} changed meanwhile") from exc
    except NoNodeError as exc:
        raise UnknownTopicError(f"topic {name!r} does not exist") from exc


def mark_topic_for_deletion(name: str) -> ZkScript[None]:
    """Ask the controller to delete `name` (idempotent). Raises UnknownTopicError."""
    if (yield from exists(zk_data.topic_path(name))) is None:
        raise UnknownTopicError(f"topic {name!r} does not exist")
    with contextlib.suppress(NodeExistsError):
        yield from create(zk_data.delete_topic_path(name), makepath=True)


def list_topics(*, watch: bool = False) -> ZkScript[list[str]]:
    """Topic names, sorted."""
    return (yield from children_or_empty(zk_data.TOPICS_PATH, watch=watch))


def topics_marked_for_deletion(*, watch: bool = False) -> ZkScript[list[str]]:
    return (yield from children_or_empty(zk_data.DELETE_TOPICS_PATH, watch=watch))


def get_assignments(
    topics: list[str], *, watch: bool = False
) -> ZkScript[dict[str, dict[int, tuple[int, ...]]]]:
    """topic -> partition -> replicas; topics that vanished meanwhile are left out. `watch`:
    also watch each topic's znode (partitions added)."""
    znodes = yield from get_topic_znodes(topics, watch=watch)
    return {topic: dict(znode.partitions) for topic, (znode, _) in znodes.items()}


def get_topic_znodes(
    topics: list[str], *, watch: bool = False
) -> ZkScript[dict[str, tuple[zk_data.TopicAssignment, int]]]:
    """topic -> (its znode, the znode's version); topics that vanished meanwhile are left
    out. `watch`: also watch each topic's znode (partitions added)."""
    out: dict[str, tuple[zk_data.TopicAssignment, int]] = {}
    for topic in topics:
        found = yield from get_data(zk_data.topic_path(topic), watch=watch)
        if found is not None:
            out[topic] = (zk_data.TopicAssignment.decode(found[0]), found[1].version)
    return out


def get_topic_config(name: str) -> ZkScript[dict[str, str]]:
    found = yield from get_data(zk_data.topic_config_path(name))
    if found is None:
        return {}
    return dict(zk_data.TopicConfigZnode.decode(found[0]).config)


def get_or_create_cluster_id() -> ZkScript[str]:
    """The cluster id; the first broker to ask creates it (Kafka: a urlsafe base64 UUID)."""
    found = yield from get_data(zk_data.CLUSTER_ID_PATH)
    if found is None:
        fresh = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        try:
            yield from create(
                zk_data.CLUSTER_ID_PATH, zk_data.ClusterIdZnode(fresh).encode(), makepath=True
            )
            return fresh
        except NodeExistsError:
            found = yield from get_data(zk_data.CLUSTER_ID_PATH)
            if found is None:
                raise
    return zk_data.ClusterIdZnode.decode(found[0]).cluster_id
