"""The leader's ISR upkeep, trio shell: runs the writes `broker.core.isr.IsrCore` decides and
its two periodic tasks (Kafka's isr-expiration and isr-change-propagation)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
import trio

from broker.core.isr import IsrWrite
from controller.zk_isr import publish_isr_changes, write_isr
from controller.zk_types import ZkError

if TYPE_CHECKING:
    from broker.context import BrokerContext
    from controller.zk_client import ZkClient

__all__ = ["IsrManager"]

ZK_WRITE_TIMEOUT_S = 10.0


class IsrManager:
    def __init__(self, ctx: BrokerContext, zk: ZkClient) -> None:
        self._ctx = ctx
        self._zk = zk
        self._nursery: trio.Nursery | None = None
        self._log = structlog.get_logger("highwater.isr")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._expire_loop)
            nursery.start_soon(self._propagate_loop)
            task_status.started()

    def start_write(self, write: IsrWrite) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(self._write, write)

    async def _write(self, write: IsrWrite) -> None:
        ctx = self._ctx
        partitions = ctx.replica_manager.partitions
        if not ctx.state.isr.still_wanted(write, partitions.get(write.tp)):
            return  # superseded by a LeaderAndIsr before the write started
        version: int | None = None
        try:
            with trio.fail_after(ZK_WRITE_TIMEOUT_S):
                version = await self._zk.run(
                    write_isr(write.tp, write.znode, write.expected_version)
                )
        except (ZkError, trio.TooSlowError) as exc:
            self._log.warning(
                "isr write failed", topic=write.tp[0], partition=write.tp[1], error=repr(exc)
            )
        if ctx.state.isr.written(write, partitions.get(write.tp), version, ctx.now_ms()):
            ctx.purgatory.notify(write.tp)

    async def _expire_loop(self) -> None:
        ctx = self._ctx
        interval_s = ctx.config.replica_lag_time_max_ms / 2 / 1000
        while True:
            await trio.sleep(interval_s)
            partitions = list(ctx.replica_manager.partitions.values())
            ctx.write_isr(ctx.state.isr.shrink(partitions, ctx.now_ms()))

    async def _propagate_loop(self) -> None:
        ctx = self._ctx
        while True:
            await trio.sleep(ctx.config.isr_change_propagation_interval_ms / 1000)
            now_ms = ctx.now_ms()
            changed = ctx.state.isr.to_propagate(now_ms)
            if changed is None:
                continue
            try:
                with trio.fail_after(ZK_WRITE_TIMEOUT_S):
                    path = await self._zk.run(publish_isr_changes(changed))
            except (ZkError, trio.TooSlowError) as exc:
                ctx.state.isr.propagated(changed, False, now_ms)  # try again next round
                self._log.warning("isr change propagation failed", error=repr(exc))
                continue
            ctx.state.isr.propagated(changed, True, now_ms)
            self._log.info("isr changes propagated", path=path, partitions=len(changed))
