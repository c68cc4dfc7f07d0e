"""ACL changes reach every broker within seconds (Kafka's AclAuthorizer with its
ZkNodeChangeNotificationListener on `/kafka-acl-changes` and `/kafka-acl-extended-changes`).

A trio task watches both notification znodes and, on any change (and after every
reconnection, when watches were dropped), reads every ACL again into `BrokerContext.acls`:
ACLs are few, and a full read cannot miss a change. A failed read keeps the ACLs in force
and is retried with backoff. Notifications older than 15 minutes are purged.
"""

from __future__ import annotations

import math

import structlog
import trio

from broker.context import BrokerContext, wall_clock_ms
from controller.zk_acls import (
    ACL_CHANGES_PATHS,
    purge_expired_acl_changes,
    read_all_acls,
    watch_acl_changes,
)
from controller.zk_client import ZkClient
from controller.zk_types import SessionEvent, SessionState, WatchEvent, ZkError, ZkEvent

__all__ = ["AclChangeListener"]

_BACKOFF_S = (0.5, 10.0)


class AclChangeListener:
    def __init__(self, ctx: BrokerContext, zk: ZkClient) -> None:
        self._ctx = ctx
        self._zk = zk
        self._log = structlog.get_logger("highwater.acl_changes")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read every ACL (retrying until it works: requests must not be judged without
        them), report started, then follow the notifications."""
        events = self._zk.subscribe()
        with events:
            backoff_s = _BACKOFF_S[0]
            while not await self._reload():
                await trio.sleep(backoff_s)
                backoff_s = min(2 * backoff_s, _BACKOFF_S[1])
            task_status.started()
            await self._follow(events)

    async def _follow(self, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        retry_at = math.inf
        backoff_s = _BACKOFF_S[0]
        while True:
            with trio.move_on_at(retry_at):
                try:
                    event = await events.receive()
                except trio.EndOfChannel:
                    return
                match event:
                    case WatchEvent(path=path) if path in ACL_CHANGES_PATHS:
                        pass
                    case SessionEvent(state=SessionState.CONNECTED):
                        pass
                    case _:
                        continue
            if await self._reload():
                retry_at, backoff_s = math.inf, _BACKOFF_S[0]
            else:
                retry_at = trio.current_time() + backoff_s
                backoff_s = min(2 * backoff_s, _BACKOFF_S[1])

    async def _reload(self) -> bool:
        try:
            children = await self._zk.run(watch_acl_changes())  # watch first: no change lost
            acls, malformed = await self._zk.run(read_all_acls())
            purged = await self._zk.run(purge_expired_acl_changes(children, wall_clock_ms()))
        except ZkError as exc:
            self._log.warning("ACLs not read; will retry", error=repr(exc))
            return False
        for path in malformed:
            self._log.warning("malformed ACL znode ignored", path=path)
        if acls != self._ctx.acls:
            self._ctx.acls = acls
            self._log.info("ACLs loaded", patterns=len(acls.by_pattern))
        if purged:
            self._log.info("expired ACL change notifications purged", count=purged)
        return True
