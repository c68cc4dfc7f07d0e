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
import time
from collections.abc import Callable
from dataclasses import dataclass

import structlog
import trio

from controller import zk_data
from controller.zk_client import (
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    SessionState,
    ZkClient,
    ZkError,
)

__all__ = [
    "BrokerIdInUseError",
    "RegisteredBroker",
    "get_live_brokers",
    "maintain_registration",
    "register_broker",
]

_POLL_S = 0.1
_RETRY_BACKOFF_MS = (100, 2_000)


class BrokerIdInUseError(Exception):
    """Another live session holds `/brokers/ids/<id>`."""


@dataclass(frozen=True, slots=True)
class RegisteredBroker:
    """A live registration as the controller reads it."""

    registration: zk_data.BrokerRegistration
    broker_epoch: int  # this znode's czxid
    incarnation: int  # the czxid of the broker process's first registration


async def register_broker(
    zk: ZkClient,
    broker_id: int,
    host: str,
    port: int,
    rack: str | None = None,
    *,
    incarnation: int | None = None,
    wait_ms: int | None = None,
) -> int:
    """Create the registration and return the broker epoch (the znode's czxid).

    `incarnation`: None for a process's first registration; when re-registering after a
    session expiry, the broker epoch the first registration returned.

    A node left by a previous session of this broker id (crash, expired session) disappears
    when that session expires, so wait for it, up to `wait_ms` (default: twice our session
    timeout, covering a predecessor with the same timeout), then raise BrokerIdInUseError.
    A node owned by our own session is simply ours (a retried create).
    """
    path = zk_data.broker_path(broker_id)
    timestamp_ms = int(time.time() * 1000)
    data = zk_data.BrokerRegistration(host, port, rack, timestamp_ms, incarnation).encode()
    wait_s = (2 * zk.session_timeout_ms if wait_ms is None else wait_ms) / 1000
    deadline = trio.current_time() + wait_s
    while True:
        with contextlib.suppress(NodeExistsError):
            await zk.create(path, data, ephemeral=True, makepath=True)
        found = await zk.get(path)
        if found is not None:
            _, stat = found
            if stat.ephemeral_owner == zk.session_id:
                return stat.czxid
            if trio.current_time() >= deadline:
                raise BrokerIdInUseError(
                    f"broker id {broker_id} is registered by another live session "
                    f"(owner 0x{stat.ephemeral_owner:x})"
                )
            await trio.sleep(_POLL_S)  # polling a ZK node, bounded by the deadline


async def maintain_registration(
    zk: ZkClient,
    broker_id: int,
    host: str,
    port: int,
    rack: str | None = None,
    *,
    on_registered: Callable[[int], None] | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Register, report the broker epoch through `task_status`, then re-register whenever
    kazoo opens a new session (the old one expired and took the ephemeral node with it).
    `on_registered(broker_epoch)` is called after every registration, the first included, so
    the broker always knows its current epoch (requests carry the newest). Call it once per
    broker process: its first registration's epoch is the process's incarnation, which every
    re-registration writes, so the controller knows this process did not restart. Runs until
    cancelled."""
    log = structlog.get_logger(__name__).bind(broker_id=broker_id)
    events = zk.subscribe()
    with events:
        epoch = await register_broker(zk, broker_id, host, port, rack)
        incarnation = epoch
        log.info("broker registered", broker_epoch=epoch)
        if on_registered is not None:
            on_registered(epoch)
        task_status.started(epoch)
        async for event in events:
            if not (isinstance(event, SessionEvent) and event.state is SessionState.CONNECTED):
                continue
            if not event.new_session:
                continue
            backoff_ms = _RETRY_BACKOFF_MS[0]
            while True:
                try:
                    epoch = await register_broker(
                        zk, broker_id, host, port, rack, incarnation=incarnation
                    )
                except (ZkError, BrokerIdInUseError) as exc:
                    log.warning("broker re-registration failed", error=str(exc))
                    await trio.sleep(backoff_ms / 1000)
                    backoff_ms = min(backoff_ms * 2, _RETRY_BACKOFF_MS[1])
                    continue
                log.info("broker re-registered", broker_epoch=epoch, incarnation=incarnation)
                if on_registered is not None:
                    on_registered(epoch)
                break


async def get_live_brokers(zk: ZkClient, *, watch: bool = False) -> dict[int, RegisteredBroker]:
    """Every registered broker by id, with its broker epoch and incarnation."""
    try:
        children = await zk.get_children(zk_data.BROKER_IDS_PATH, watch=watch)
    except NoNodeError:  # no broker ever registered; a watch was set on the node's creation
        children = []
        if watch:
            await zk.exists(zk_data.BROKER_IDS_PATH, watch=True)
    brokers: dict[int, RegisteredBroker] = {}
    for child in children:
        if not child.isdigit():
            continue
        found = await zk.get(zk_data.broker_path(int(child)))
        if found is None:  # went away between the listing and the read
            continue
        data, stat = found
        registration = zk_data.BrokerRegistration.decode(data)
        brokers[int(child)] = RegisteredBroker(
            registration, stat.czxid, registration.incarnation_of(stat.czxid)
        )
    return brokers
