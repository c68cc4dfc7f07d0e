"""The group coordinator, trio shell around `core.group.coordinator.GroupCoordinatorCore`:
loads a `__consumer_offsets` partition when this broker becomes its leader (replaying its
records) and forgets it when leadership moves; appends each decision's records through the
produce path (acks=all) and replays them, answering once they are committed; runs the
session, revocation and retention timers; creates `__consumer_offsets` on first use."""

from __future__ import annotations

import math
import random
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Final, TypeVar

import structlog
import trio

from broker.core.group.coordinator import (
    OFFSETS_TOPIC,
    Decision,
    GroupCoordinatorCore,
    GroupSettings,
)
from broker.core.group.runtime import DelayedLoad, start_write
from broker.core.group.writes import Load, follow_leadership, replay_batches
from controller.assignment import assign_replicas
from controller.zk_client import ZkError
from controller.zk_topics import TopicExistsError, create_topic
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.context import BrokerContext

__all__ = ["GroupCoordinator"]

R = TypeVar("R")
_LOAD_READ_BYTES: Final = 1 << 20
_TIMER_MAX_S: Final = 1.0


class GroupCoordinator:
    active = True  # broker.services.Groups (NoGroups, the stand-in until this one, is not)

    def __init__(self, ctx: BrokerContext) -> None:
        config = ctx.config
        self._ctx = ctx
        self.settings = GroupSettings(
            num_partitions=config.offsets_topic_num_partitions,
            session_timeout_ms=config.group_consumer_session_timeout_ms,
            heartbeat_interval_ms=config.group_consumer_heartbeat_interval_ms,
            max_group_size=config.group_consumer_max_size,
            offset_metadata_max_bytes=config.offset_metadata_max_bytes,
            offsets_retention_ms=config.offsets_retention_minutes * 60_000,
        )
        self.core = GroupCoordinatorCore(self.settings, lambda: str(uuid.uuid4()))
        # (group, member) -> the assignment a classic member (JoinGroup/SyncGroup, a Kafka
        # client) was last given, for its Heartbeat's REBALANCE_IN_PROGRESS
        # (broker.core.group.classic); lost with the coordinator, which only makes it rejoin.
        self.classic_synced: dict[tuple[str, str], frozenset[TopicPartition]] = {}
        self._nursery: trio.Nursery | None = None
        self._timers_changed = trio.Event()
        self._creating = False
        self._next_wait_log = 0.0
        self._log = structlog.get_logger("highwater.group_coordinator")

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._timers)
            task_status.started()
            self.sync_partitions()

    def topics(self) -> Mapping[str, int]:
        """topic -> partition count, from this broker's metadata."""
        return {topic: len(parts) for topic, parts in self._ctx.state.metadata.topics.items()}

    # -- which partitions this broker coordinates -----------------------------------------------

    def sync_partitions(self) -> None:
        """Load the offsets partitions this broker now leads, forget the ones it no longer
        does (call after every LeaderAndIsr, StopReplica and UpdateMetadata)."""
        if self._nursery is None:
            return
        leadership = follow_leadership(self.core, self._ctx.state)
        self._ctx.apply(leadership.actions)
        for load in leadership.loads:
            self._nursery.start_soon(self._load, load)

    async def _load(self, load: Load) -> None:
        p, load_id = load.partition, load.load_id
        tp = TopicPartition(OFFSETS_TOPIC, p)
        partition = self._ctx.replica_manager.partitions.get(tp)
        if partition is None:  # gone meanwhile (its log went offline)
            self.core.load_failed(p, load_id)
            return
        log = partition.log
        offset, end = log.log_start_offset, log.log_end_offset
        records = malformed = 0
        started = trio.current_time()
        try:
            while offset < end:
                if not self.core.is_current_load(p, load_id):
                    return  # leadership moved on meanwhile, or the partition count changed
                data = log.read(offset, _LOAD_READ_BYTES, min_one_batch=True).read()
                next_offset, replayed, bad = replay_batches(self.core, data)
                if next_offset < 0:
                    break
                offset, records, malformed = next_offset, records + replayed, malformed + bad
                await trio.lowlevel.checkpoint()
        except Exception as exc:  # the log went away or is unreadable: not coordinating it
            self._log.warning("loading failed", partition=p, error=repr(exc))
            self.core.load_failed(p, load_id)
            return
        # Served once the HW covers what was loaded (DelayedLoad says why); no deadline: a
        # superseding load wakes it, and so does shutting down.
        ctx = self._ctx
        delayed = DelayedLoad(self.core, p, load_id, partition, end)
        if not await ctx.purgatory.complete(
            delayed, ctx.state, ctx.now_ms, math.inf, "load", ctx.apply
        ):
            return
        self._timers_changed.set()
        self._log.info(
            "coordinating",
            partition=p,
            leader_epoch=load.leader_epoch,
            records=records,
            malformed_records=malformed,
            load_ms=round((trio.current_time() - started) * 1000),
        )

    # -- writing decisions -----------------------------------------------------------------------

    async def write(self, decision: Decision[R]) -> R:
        """Append the decision's records (acks=all), replay them, and answer once they are
        committed; the decision's failure answer if that does not happen
        (broker.core.group.runtime)."""
        ctx = self._ctx
        timeout_ms = ctx.config.offsets_commit_timeout_ms
        write = start_write(self.core, ctx.state, decision, ctx.wall_ms(), timeout_ms)
        if write.produce is not None:  # appended and replayed: the timers may have changed
            self._timers_changed.set()
        deadline = trio.current_time() + timeout_ms / 1000
        return await ctx.purgatory.complete(
            write, ctx.state, ctx.now_ms, deadline, "topic", ctx.apply
        )

    # -- timers --------------------------------------------------------------------------------

    async def _timers(self) -> None:
        """Session and revocation timeouts and offsets retention (Kafka's timers)."""
        assert self._nursery is not None
        check_interval_ms = self._ctx.config.offsets_retention_check_interval_ms
        next_offsets_check_ms = self._ctx.now_ms() + check_interval_ms
        while True:
            now_ms = self._ctx.now_ms()
            offsets = now_ms >= next_offsets_check_ms
            if offsets:
                next_offsets_check_ms = now_ms + check_interval_ms
            wall_ms = self._ctx.wall_ms()
            for decision in self.core.expire(now_ms, wall_ms=wall_ms, offsets=offsets):
                self._nursery.start_soon(self._expire, decision)
            due = self.core.next_deadline_ms()
            wait_s = _TIMER_MAX_S if due is None else max(0.0, (due - now_ms) / 1000)
            self._timers_changed = trio.Event()
            with trio.move_on_after(min(wait_s, _TIMER_MAX_S)):
                await self._timers_changed.wait()

    async def _expire(self, decision: Decision[None]) -> None:
        await self.write(decision)

    # -- the offsets topic -----------------------------------------------------------------------

    async def ensure_offsets_topic(self) -> None:
        """Create `__consumer_offsets` if this broker's metadata does not have it (Kafka's
        first FindCoordinator does this); the answer comes later through the metadata."""
        ctx = self._ctx
        if OFFSETS_TOPIC in ctx.state.metadata.topics or self._creating or ctx.zk.absent:
            return
        live = ctx.state.metadata.live_broker_ids()
        config = ctx.config
        replication_factor = config.offsets_topic_replication_factor
        if len(live) < replication_factor:  # as Kafka: wait for enough brokers, not fewer copies
            now = trio.current_time()
            if now >= self._next_wait_log:
                self._next_wait_log = now + 30
                self._log.warning(
                    "waiting for brokers to create the offsets topic",
                    live_brokers=len(live),
                    offsets_topic_replication_factor=replication_factor,
                )
            return
        assignment = assign_replicas(
            live,
            config.offsets_topic_num_partitions,
            replication_factor,
            start_index=random.randrange(len(live)),
            shift=random.randrange(len(live)),
        )
        topic_config = {
            "cleanup.policy": "compact",
            "segment.bytes": str(config.offsets_topic_segment_bytes),
        }
        self._creating = True
        try:
            await ctx.zk.run(create_topic(OFFSETS_TOPIC, assignment, topic_config))
            self._log.info(
                "created the offsets topic",
                partitions=len(assignment),
                replication_factor=replication_factor,
            )
        except TopicExistsError:
            pass
        except ZkError as exc:
            self._log.warning("could not create the offsets topic", error=str(exc))
        finally:
            self._creating = False
