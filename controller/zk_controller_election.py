"""The controller election in ZooKeeper, as scripts (Kafka's
KafkaZkClient.registerControllerAndIncrementControllerEpoch).

One multi-op creates the ephemeral `/controller` and sets `/controller_epoch` to epoch + 1 at
the version just read: NodeExists or BadVersion means someone else won.
"""

from __future__ import annotations

import contextlib

from controller import zk_data
from controller.zk_isr import ISR_CHANGE_NOTIFICATION_PATH
from controller.zk_script import ZkScript, create, delete, ensure_path, exists, get_data, multi
from controller.zk_types import (
    BadVersionError,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    SetOp,
    TransactionOp,
)

__all__ = [
    "PERSISTENT_PATHS",
    "controller_registration",
    "delete_own_controller_znode",
    "read_controller_epoch",
    "read_controller_id",
    "read_elected_controller",
    "try_elect",
]

# The nodes a controller watches; created up front so every watch has a node to sit on.
PERSISTENT_PATHS = (
    zk_data.BROKER_IDS_PATH,
    zk_data.TOPICS_PATH,
    zk_data.CONFIG_TOPICS_PATH,
    zk_data.CONFIG_CHANGES_PATH,
    zk_data.DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
)


def try_elect(
    broker_id: int, session_id: int | None, wall_ms: int
) -> ZkScript[tuple[int, int] | None]:
    """Try once: (controller epoch, its zkVersion) if we won, None if someone else holds it.
    `wall_ms` is the znode's timestamp (the wall clock)."""
    for path in PERSISTENT_PATHS:
        yield from ensure_path(path)
    current, version = yield from read_controller_epoch()
    new_epoch = current + 1
    ops: list[TransactionOp] = [
        CreateOp(
            zk_data.CONTROLLER_PATH,
            zk_data.ControllerZnode(broker_id, wall_ms).encode(),
            ephemeral=True,
        ),
        SetOp(zk_data.CONTROLLER_EPOCH_PATH, zk_data.encode_controller_epoch(new_epoch), version),
    ]
    try:
        results = yield from multi(ops)
    except (NodeExistsError, BadVersionError):
        # Maybe our own earlier attempt succeeded (a retry after a lost reply).
        if (yield from read_controller_id()) == broker_id:
            epoch, zk_version = yield from read_controller_epoch()
            if epoch == new_epoch:
                return epoch, zk_version
            # Our /controller outlived our epoch (another controller bumped it): move it.
            yield from delete_own_controller_znode(session_id)
        return None
    stat = results[1]
    assert not isinstance(stat, str) and stat is not None
    return new_epoch, stat.version


def read_controller_epoch() -> ZkScript[tuple[int, int]]:
    """(controller epoch, the znode's version); created at the initial epoch if missing."""
    found = yield from get_data(zk_data.CONTROLLER_EPOCH_PATH)
    if found is None:
        try:
            initial = zk_data.encode_controller_epoch(zk_data.INITIAL_CONTROLLER_EPOCH)
            yield from create(zk_data.CONTROLLER_EPOCH_PATH, initial)
            return zk_data.INITIAL_CONTROLLER_EPOCH, 0
        except NodeExistsError:
            found = yield from get_data(zk_data.CONTROLLER_EPOCH_PATH)
            if found is None:
                raise
    data, stat = found
    return zk_data.decode_controller_epoch(data), stat.version


def read_controller_id(*, watch: bool = False) -> ZkScript[int]:
    """The controller's broker id, -1 if none (with `watch`, its next change is watched)."""
    found = yield from get_data(zk_data.CONTROLLER_PATH, watch=watch)
    if found is None:
        return -1
    return zk_data.ControllerZnode.decode(found[0]).broker_id


def read_elected_controller() -> ZkScript[tuple[int, int]]:
    """(controller broker id, controller epoch) as ZooKeeper has them, read only: -1 for an
    id or epoch not there (a broker checking a controller request creates nothing)."""
    controller_id = yield from read_controller_id()
    found = yield from get_data(zk_data.CONTROLLER_EPOCH_PATH)
    return controller_id, -1 if found is None else zk_data.decode_controller_epoch(found[0])


def controller_registration() -> ZkScript[tuple[int, zk_data.BrokerRegistration | None] | None]:
    """The controller's broker id and `/brokers/ids/<id>` registration (where to reach it):
    None while no controller is elected; (id, None) when its registration is gone (both are
    ephemeral nodes of one session, so the controller is going too)."""
    controller_id = yield from read_controller_id()
    if controller_id < 0:
        return None
    found = yield from get_data(zk_data.broker_path(controller_id))
    return controller_id, None if found is None else zk_data.BrokerRegistration.decode(found[0])


def delete_own_controller_znode(session_id: int | None) -> ZkScript[None]:
    """Kafka's triggerControllerMove: free /controller if this session holds it."""
    stat = yield from exists(zk_data.CONTROLLER_PATH)
    if stat is not None and stat.ephemeral_owner == session_id:
        with contextlib.suppress(NoNodeError, BadVersionError):
            yield from delete(zk_data.CONTROLLER_PATH, stat.version)
