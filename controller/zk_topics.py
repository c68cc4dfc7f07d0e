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
from controller.zk_client import BadVersionError, NodeExistsError, NoNodeError, ZkClient

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


async def create_topic(
    zk: ZkClient,
    name: str,
    assignment: Mapping[int, tuple[int, ...]],
    config: Mapping[str, str],
) -> None:
    """Write /config/topics/<name> then /brokers/topics/<name> (Kafka's order: the config is
    in place when the controller sees the topic). Raises TopicExistsError."""
    if not assignment:
        raise ValueError("a topic needs at least one partition")
    if await zk.exists(zk_data.topic_path(name)) is not None:
        raise TopicExistsError(f"topic {name!r} already exists")
    if await zk.exists(zk_data.delete_topic_path(name)) is not None:
        raise TopicExistsError(f"topic {name!r} is marked for deletion")
    config_data = zk_data.TopicConfigZnode(dict(config)).encode()
    try:
        await zk.create(zk_data.topic_config_path(name), config_data, makepath=True)
    except NodeExistsError:
        await zk.set(zk_data.topic_config_path(name), config_data)
    data = zk_data.TopicAssignment(dict(assignment)).encode()
    try:
        await zk.create(zk_data.topic_path(name), data, makepath=True)
    except NodeExistsError as exc:
        raise TopicExistsError(f"topic {name!r} already exists") from exc


async def get_assignment(zk: ZkClient, name: str) -> tuple[dict[int, tuple[int, ...]], int]:
    """The topic's assignment and its znode version (for add_partitions). Raises
    UnknownTopicError."""
    found = await zk.get(zk_data.topic_path(name))
    if found is None:
        raise UnknownTopicError(f"topic {name!r} does not exist")
    return dict(zk_data.TopicAssignment.decode(found[0]).partitions), found[1].version


async def add_partitions(
    zk: ZkClient,
    name: str,
    assignment: Mapping[int, tuple[int, ...]],
    version: int,
) -> None:
    """Write the topic's whole new assignment (old partitions unchanged, new ones added) if
    its znode is still at `version`; the controller's watch on it creates the new partitions.
    Raises AssignmentChangedError or UnknownTopicError."""
    if await zk.exists(zk_data.delete_topic_path(name)) is not None:
        raise UnknownTopicError(f"topic {name!r} is marked for deletion")
    data = zk_data.TopicAssignment(dict(assignment)).encode()
    try:
        await zk.set(zk_data.topic_path(name), data, version=version)
    except BadVersionError as exc:
        raise AssignmentChangedError(f"topic {name!r} changed meanwhile") from exc
    except NoNodeError as exc:
        raise UnknownTopicError(f"topic {name!r} does not exist") from exc


async def mark_topic_for_deletion(zk: ZkClient, name: str) -> None:
    """Ask the controller to delete `name` (idempotent). Raises UnknownTopicError."""
    if await zk.exists(zk_data.topic_path(name)) is None:
        raise UnknownTopicError(f"topic {name!r} does not exist")
    with contextlib.suppress(NodeExistsError):
        await zk.create(zk_data.delete_topic_path(name), makepath=True)


async def list_topics(zk: ZkClient, *, watch: bool = False) -> list[str]:
    """Topic names, sorted."""
    return await _children(zk, zk_data.TOPICS_PATH, watch=watch)


async def topics_marked_for_deletion(zk: ZkClient, *, watch: bool = False) -> list[str]:
    return await _children(zk, zk_data.DELETE_TOPICS_PATH, watch=watch)


async def get_assignments(
    zk: ZkClient, topics: list[str], *, watch: bool = False
) -> dict[str, dict[int, tuple[int, ...]]]:
    """topic -> partition -> replicas; topics that vanished meanwhile are left out. `watch`:
    also watch each topic's znode (partitions added)."""
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for topic in topics:
        found = await zk.get(zk_data.topic_path(topic), watch=watch)
        if found is not None:
            out[topic] = dict(zk_data.TopicAssignment.decode(found[0]).partitions)
    return out


async def get_topic_config(zk: ZkClient, name: str) -> dict[str, str]:
    found = await zk.get(zk_data.topic_config_path(name))
    if found is None:
        return {}
    return dict(zk_data.TopicConfigZnode.decode(found[0]).config)


async def get_or_create_cluster_id(zk: ZkClient) -> str:
    """The cluster id; the first broker to ask creates it (Kafka: a urlsafe base64 UUID)."""
    found = await zk.get(zk_data.CLUSTER_ID_PATH)
    if found is None:
        fresh = base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()
        try:
            await zk.create(
                zk_data.CLUSTER_ID_PATH, zk_data.ClusterIdZnode(fresh).encode(), makepath=True
            )
            return fresh
        except NodeExistsError:
            found = await zk.get(zk_data.CLUSTER_ID_PATH)
            if found is None:
                raise
    return zk_data.ClusterIdZnode.decode(found[0]).cluster_id


async def _children(zk: ZkClient, path: str, *, watch: bool) -> list[str]:
    try:
        return await zk.get_children(path, watch=watch)
    except NoNodeError:
        if watch:
            await zk.exists(path, watch=True)
        return []
