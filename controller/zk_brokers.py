"""Broker registration in ZooKeeper: the ephemeral `/brokers/ids/<id>` znode.

The broker epoch is the registration znode's czxid: a broker that restarts (or whose session
expired) gets a larger one, which is how the controller tells a bounced broker from one that
never left. The incarnation is the czxid of the first registration of the broker process:
re-registrations after a session expiry write it into the znode, so the controller can tell
a process that only lost its session (same incarnation, its log intact) from one that
restarted (a new incarnation; it may have lost unflushed data).
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass

from controller import zk_data
from controller.zk_script import (
    ZkScript,
    children_or_empty,
    create,
    ensure_path,
    get_data,
    set_data,
)
from controller.zk_types import BadVersionError, NodeExistsError, NoNodeError
from protocol.topic_partition import TopicPartition

__all__ = [
    "RegisteredBroker",
    "live_brokers",
    "publish_log_dir_failure",
    "set_offline_partitions",
    "try_register",
]


@dataclass(frozen=True, slots=True)
class RegisteredBroker:
    """A live registration as the controller reads it."""

    registration: zk_data.BrokerRegistration
    broker_epoch: int  # this znode's czxid
    incarnation: int  # the czxid of the broker process's first registration


def try_register(
    broker_id: int,
    registration: zk_data.BrokerRegistration,
    session_id: int | None,
) -> ZkScript[int | None]:
    """Create `/brokers/ids/<id>`: its czxid (the broker epoch) if the node is ours (also when
    it was our own earlier, retried create), None while another session holds it."""
    path = zk_data.broker_path(broker_id)
    with contextlib.suppress(NodeExistsError):
        yield from create(path, registration.encode(), ephemeral=True, makepath=True)
    found = yield from get_data(path)
    if found is not None and found[1].ephemeral_owner == session_id:
        return found[1].czxid
    return None


def set_offline_partitions(
    broker_id: int, offline: Iterable[TopicPartition], session_id: int | None
) -> ZkScript[bool]:
    """Rewrite our own `/brokers/ids/<id>` with these offline partitions (its czxid, the
    broker epoch, stays); False if the node is gone or another session's (the broker's
    re-registration then writes them)."""
    path = zk_data.broker_path(broker_id)
    found = yield from get_data(path)
    if found is None or found[1].ephemeral_owner != session_id:
        return False
    current = zk_data.BrokerRegistration.decode(found[0])
    rewritten = dataclasses.replace(current, offline_partitions=tuple(sorted(set(offline))))
    try:
        yield from set_data(path, rewritten.encode(), found[1].version)
    except (BadVersionError, NoNodeError):
        return False
    return True


def publish_log_dir_failure(broker_id: int) -> ZkScript[str]:
    """Kafka's log dir failure notification: a sequential
    `/log_dir_event_notification/log_dir_event_<n>` the controller watches. Returns its path."""
    yield from ensure_path(zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH, makepath=False)
    path = f"{zk_data.LOG_DIR_EVENT_NOTIFICATION_PATH}/{zk_data.LOG_DIR_EVENT_PREFIX}"
    return (yield from create(path, zk_data.encode_log_dir_event(broker_id), sequence=True))


def live_brokers(*, watch: bool = False) -> ZkScript[dict[int, RegisteredBroker]]:
    """Every registered broker by id, with its broker epoch and incarnation."""
    children = yield from children_or_empty(zk_data.BROKER_IDS_PATH, watch=watch)
    brokers: dict[int, RegisteredBroker] = {}
    for child in children:
        if not child.isdigit():
            continue
        found = yield from get_data(zk_data.broker_path(int(child)))
        if found is None:  # went away between the listing and the read
            continue
        data, stat = found
        registration = zk_data.BrokerRegistration.decode(data)
        brokers[int(child)] = RegisteredBroker(
            registration, stat.czxid, registration.incarnation_of(stat.czxid)
        )
    return brokers
