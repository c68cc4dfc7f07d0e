"""The leader's ISR upkeep (Kafka's isr-expiration and isr-change-propagation tasks).

Partition decides (who lags, who may join); this shell writes the decision to the partition
state znode by compare-and-set, applies the result, and publishes gathered changes to the
controller through `/isr_change_notification`, damped as seed 000 §1.2.1 describes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import structlog
import trio

from broker.partition import Partition
from broker.replication import should_propagate_isr_changes
from controller.zk_client import ZkError
from controller.zk_data import PartitionStateZnode
from controller.zk_isr import publish_isr_changes, write_isr
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.context import BrokerContext

__all__ = ["IsrManager"]

ZK_WRITE_TIMEOUT_S = 10.0


class IsrManager:
    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._nursery: trio.Nursery | None = None
        self._changed: set[TopicPartition] = set()
        self._last_change_ms = 0
        self._last_propagation_ms = ctx.now_ms()
        self._log = structlog.get_logger("highwater.isr")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._expire_loop)
            nursery.start_soon(self._propagate_loop)
            task_status.started()

    # -- proposals -------------------------------------------------------------------------

    def maybe_expand(self, partition: Partition) -> None:
        """Called after a follower's fetch: let caught-up followers back into the ISR."""
        new_isr = partition.isr_to_expand()
        if new_isr is not None:
            self._propose(partition, new_isr)

    def maybe_shrink_all(self) -> None:
        now_ms = self._ctx.now_ms()
        lag_ms = self._ctx.config.replica_lag_time_max_ms
        for partition in list(self._ctx.replica_manager.partitions.values()):
            new_isr = partition.isr_to_shrink(now_ms, lag_ms)
            if new_isr is not None:
                self._propose(partition, new_isr)

    def _propose(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        if self._nursery is None or self._ctx.zk is None:
            return
        partition.begin_isr_update(new_isr)
        # The proposal's epochs are taken now: a LeaderAndIsr may change the partition before
        # the write task runs, and the write must be the one that was decided.
        znode = PartitionStateZnode(
            partition.broker_id, partition.leader_epoch, new_isr, partition.controller_epoch
        )
        self._nursery.start_soon(self._write, partition, znode, partition.partition_epoch)

    async def _write(
        self, partition: Partition, znode: PartitionStateZnode, expected_version: int
    ) -> None:
        assert self._ctx.zk is not None
        tp = TopicPartition(partition.topic, partition.index)
        new_isr, epoch = znode.isr, znode.leader_epoch
        if partition.pending_isr != new_isr or partition.leader_epoch != epoch:
            return  # superseded by a LeaderAndIsr before the write started
        version: int | None = None
        try:
            with trio.fail_after(ZK_WRITE_TIMEOUT_S):
                version = await write_isr(self._ctx.zk, tp, znode, expected_version)
        except (ZkError, trio.TooSlowError) as exc:
            self._log.warning("isr write failed", topic=tp[0], partition=tp[1], error=repr(exc))
        moved = partition.complete_isr_update(new_isr, epoch, version)
        if version is not None and partition.isr == new_isr:
            self._changed.add(tp)
            self._last_change_ms = self._ctx.now_ms()
        if moved:
            self._ctx.purgatory.notify(tp)

    # -- periodic tasks --------------------------------------------------------------------

    async def _expire_loop(self) -> None:
        interval_s = self._ctx.config.replica_lag_time_max_ms / 2 / 1000
        while True:
            await trio.sleep(interval_s)
            self.maybe_shrink_all()

    async def _propagate_loop(self) -> None:
        config = self._ctx.config
        while True:
            await trio.sleep(config.isr_change_propagation_interval_ms / 1000)
            now_ms = self._ctx.now_ms()
            if not should_propagate_isr_changes(
                bool(self._changed),
                self._last_change_ms,
                self._last_propagation_ms,
                now_ms,
                config.isr_change_propagation_blackout_ms,
                config.isr_change_propagation_max_delay_ms,
            ):
                continue
            changed, self._changed = self._changed, set()
            try:
                assert self._ctx.zk is not None
                with trio.fail_after(ZK_WRITE_TIMEOUT_S):
                    path = await publish_isr_changes(self._ctx.zk, changed)
            except (ZkError, trio.TooSlowError, AssertionError) as exc:
                self._changed |= changed  # try again next round
                self._log.warning("isr change propagation failed", error=repr(exc))
                continue
            self._last_propagation_ms = now_ms
            self._log.info("isr changes propagated", path=path, partitions=len(changed))
