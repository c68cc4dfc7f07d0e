"""Offline partitions, trio shell (Kafka's ReplicaManager.LogDirFailureHandler, KIP-112): when a
log or log dir fails, carry out what broker/core/log_dir_failure.py decides (stop fetching its
partitions, wake what waits on them), then tell the controller: the broker's registration
lists its offline partitions and a log dir event notification makes the controller read it
(controller/zk_brokers.py has the scripts)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
import trio

from broker.core.log_dir_failure import take_offline
from controller.zk_brokers import publish_log_dir_failure, set_offline_partitions
from controller.zk_types import ZkError
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from controller.zk_client import ZkClient

__all__ = ["LogDirFailureHandler"]

_RETRY_BACKOFF_S = (0.1, 5.0)
ZK_WRITE_TIMEOUT_S = 10.0


class LogDirFailureHandler:
    def __init__(self, ctx: BrokerContext, zk: ZkClient) -> None:
        self._ctx = ctx
        self._zk = zk
        self._changed = trio.Event()
        self._log = structlog.get_logger("highwater.log_dir_failure")

    def notify(self) -> None:
        """The replica manager's hook: partitions went offline (called in the trio thread)."""
        self._changed.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        ctx = self._ctx
        ctx.replica_manager.on_offline = self.notify
        task_status.started()
        while True:
            offline = take_offline(ctx.replica_manager)
            if offline is not None:
                ctx.apply(offline.actions)
                await self._tell_controller(offline.registered)
            await self._changed.wait()
            self._changed = trio.Event()

    async def _tell_controller(self, offline: list[TopicPartition]) -> None:
        """Rewrite the registration, then publish the event; retried until both are done (a
        registration that has gone is rewritten with them when the broker re-registers;
        partitions going offline meanwhile are told in the next round)."""
        ctx = self._ctx
        backoff_s = _RETRY_BACKOFF_S[0]
        while True:
            try:
                with trio.fail_after(ZK_WRITE_TIMEOUT_S):
                    await self._zk.run(
                        set_offline_partitions(ctx.broker_id, offline, self._zk.session_id)
                    )
                    path = await self._zk.run(publish_log_dir_failure(ctx.broker_id))
            except (ZkError, trio.TooSlowError) as exc:
                self._log.warning("log dir failure notification failed", error=repr(exc))
                await trio.sleep(backoff_s)
                backoff_s = min(backoff_s * 2, _RETRY_BACKOFF_S[1])
                continue
            self._log.warning(
                "controller told of offline partitions",
                path=path,
                partitions=[f"{t}-{p}" for t, p in offline],
            )
            return
