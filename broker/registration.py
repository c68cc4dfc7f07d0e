"""The broker's registration in ZooKeeper, trio shell: register (waiting for a predecessor's
node to expire), then re-register after every session expiry (controller/zk_brokers.py has
the znode and its scripts)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

import structlog
import trio

from controller import zk_data
from controller.zk_brokers import try_register
from controller.zk_client import ZkClient
from controller.zk_types import SessionEvent, SessionState, ZkError
from protocol.messages.update_metadata import ListenerEndpoint
from protocol.topic_partition import TopicPartition

__all__ = ["BrokerIdInUseError", "maintain_registration", "register_broker"]

_POLL_S = 0.1
_RETRY_BACKOFF_MS = (100, 2_000)


class BrokerIdInUseError(Exception):
    """Another live session holds `/brokers/ids/<id>`."""


async def register_broker(
    zk: ZkClient,
    broker_id: int,
    host: str,
    port: int,
    rack: str | None = None,
    *,
    incarnation: int | None = None,
    wait_ms: int | None = None,
    endpoints: tuple[ListenerEndpoint, ...] = (),
    offline_partitions: Iterable[TopicPartition] = (),
) -> int:
    """Create the registration and return the broker epoch (the znode's czxid).

    `incarnation`: None for a process's first registration; when re-registering after a
    session expiry, the broker epoch the first registration returned.

    A node left by a previous session of this broker id (crash, expired session) disappears
    when that session expires, so wait for it, up to `wait_ms` (default: twice our session
    timeout, covering a predecessor with the same timeout), then raise BrokerIdInUseError.
    """
    timestamp_ms = int(time.time() * 1000)
    registration = zk_data.BrokerRegistration(
        host,
        port,
        rack,
        timestamp_ms,
        incarnation,
        endpoints=endpoints,
        offline_partitions=tuple(sorted(offline_partitions)),
    )
    wait_s = (2 * zk.session_timeout_ms if wait_ms is None else wait_ms) / 1000
    deadline = trio.current_time() + wait_s
    while True:
        epoch = await zk.run(try_register(broker_id, registration, zk.session_id))
        if epoch is not None:
            return epoch
        if trio.current_time() >= deadline:
            raise BrokerIdInUseError(f"broker id {broker_id} is registered by another live session")
        await trio.sleep(_POLL_S)  # polling a ZK node, bounded by the deadline


async def maintain_registration(
    zk: ZkClient,
    broker_id: int,
    host: str,
    port: int,
    rack: str | None = None,
    *,
    endpoints: tuple[ListenerEndpoint, ...] = (),
    on_registered: Callable[[int], None] | None = None,
    offline_partitions: Callable[[], Iterable[TopicPartition]] = tuple,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Register, report the broker epoch through `task_status`, then re-register whenever
    kazoo opens a new session (the old one expired and took the ephemeral node with it).
    `on_registered(broker_epoch)` is called after every registration, the first included, so
    the broker always knows its current epoch (requests carry the newest). Call it once per
    broker process: its first registration's epoch is the process's incarnation, which every
    re-registration writes, so the controller knows this process did not restart. Each
    registration lists `offline_partitions()` (KIP-112). Runs until cancelled."""
    log = structlog.get_logger(__name__).bind(broker_id=broker_id)
    events = zk.subscribe()
    with events:
        epoch = await register_broker(
            zk,
            broker_id,
            host,
            port,
            rack,
            endpoints=endpoints,
            offline_partitions=offline_partitions(),
        )
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
                        zk,
                        broker_id,
                        host,
                        port,
                        rack,
                        incarnation=incarnation,
                        endpoints=endpoints,
                        offline_partitions=offline_partitions(),
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
