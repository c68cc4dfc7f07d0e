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
from dataclasses import dataclass

from controller import zk_data
from controller.zk_script import ZkScript, children_or_empty, create, get_data
from controller.zk_types import NodeExistsError

__all__ = ["RegisteredBroker", "live_brokers", "try_register"]


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
