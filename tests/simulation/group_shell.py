"""The group coordinator's shell in the simulator, around the same core as
broker/group_coordinator.py: loads an offsets partition (a little after becoming its leader),
forgets it when leadership moves, writes each decision as the real one does (the same
broker.core.group.runtime: append with acks=all, replay, answer once committed), and runs the
timers."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

from broker.core.actions import Actions
from broker.core.group.coordinator import Decision, GroupCoordinatorCore, GroupSettings
from broker.core.group.runtime import DelayedLoad, start_write
from broker.core.group.writes import Load, follow_leadership, replay_batches
from broker.core.partition import Partition
from protocol.records import read_header
from protocol.topic_partition import OFFSETS_TOPIC, TopicPartition
from tests.simulation.world import Ack

if TYPE_CHECKING:
    from tests.simulation.broker import SimBroker

__all__ = ["SimGroupCoordinator"]

R = TypeVar("R")
_LOAD_READ_BYTES = 1 << 20


class SimGroupCoordinator:
    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        config = broker.world.config
        settings = GroupSettings(
            num_partitions=config.offsets_partitions,
            session_timeout_ms=config.group_session_timeout_ms,
            heartbeat_interval_ms=config.group_heartbeat_interval_ms,
            offsets_retention_ms=1 << 40,
        )
        names = iter(range(1, 1 << 30))
        prefix = f"b{broker.broker_id}.{broker.incarnation}"
        self.core = GroupCoordinatorCore(settings, lambda: f"{prefix}-m{next(names)}")
        broker.every(config.group_timer_interval_ms, "group timers", self._timers)

    def topics(self) -> dict[str, int]:
        assert self.broker.state is not None
        return {t: len(ps) for t, ps in self.broker.state.metadata.topics.items()}

    def sync(self) -> None:
        """As GroupCoordinator.sync_partitions: follow the offsets partitions it leads."""
        assert self.broker.state is not None
        world = self.broker.world
        leadership = follow_leadership(self.core, self.broker.state)
        self.broker.apply(leadership.actions)
        for load in leadership.loads:
            delay_ms = world.draw(world.config.group_load_ms)
            name = f"loads offsets-{load.partition}"
            self.broker.after(delay_ms, name, lambda load=load: self._load(load))

    def _load(self, load: Load) -> None:
        p = load.partition
        if not self.core.is_current_load(p, load.load_id):
            return  # superseded meanwhile: as GroupCoordinator._load
        partition = self.broker.partitions.get(TopicPartition(OFFSETS_TOPIC, p))
        if partition is None:  # gone meanwhile: as GroupCoordinator._load
            self.core.load_failed(p, load.load_id)
            return
        log = partition.log
        offset, end = log.log_start_offset, log.log_end_offset
        while offset < end:
            next_offset, _, malformed = replay_batches(
                self.core, log.read(offset, _LOAD_READ_BYTES).read()
            )
            assert malformed == 0, f"malformed coordinator records in offsets-{p}"
            if next_offset < 0:
                break
            offset = next_offset
        self._finish_load(load, partition, end)

    def _finish_load(self, load: Load, partition: Partition, end: int) -> None:
        """As GroupCoordinator._load: serve once the HW covers what was loaded (DelayedLoad,
        parked with no deadline)."""
        assert self.broker.state is not None
        p, epoch = load.partition, load.leader_epoch
        delayed = DelayedLoad(self.core, p, load.load_id, partition, end)

        def loaded(done: bool) -> None:
            if done:
                world = self.broker.world
                world.trace(f"b{self.broker.broker_id} coordinates offsets-{p} (epoch {epoch})")

        state = self.broker.state
        self.broker.purgatory.complete(delayed, state, None, self.broker.apply, loaded)

    def write(
        self,
        decision: Decision[R],
        respond: Callable[[R], None],
        on_committed: Callable[[Ack], None] | None = None,
    ) -> None:
        """As GroupCoordinator.write (broker.core.group.runtime): append, replay, answer once
        committed (or fail). The commit is told to the invariants as a produce's ack is (and
        to `on_committed`)."""
        broker = self.broker
        assert broker.state is not None
        timeout_ms = broker.world.config.produce_timeout_ms
        write = start_write(self.core, broker.state, decision, broker.wall_ms, timeout_ms)
        produce = write.produce
        appended_ms = broker.now_ms
        next_offset = -1 if produce is None else produce.append.waiting.get(write.tp, -1)

        def apply(actions: Actions) -> None:
            broker.apply(actions)
            if produce is None or not produce.acked:
                return
            partition = broker.partitions[write.tp]
            ack = Ack(
                write.tp,
                write.base_offset,
                next_offset,
                read_header(write.batches).crc,
                tuple(v or b"" for _, v in decision.records),
                broker.broker_id,
                partition.leader_epoch,
                partition.isr,
                appended_ms,
                broker.now_ms,
                tuple(k for k, _ in decision.records),
            )
            for hook in broker.world.on_ack:
                hook(ack)
            if on_committed is not None:
                on_committed(ack)

        broker.purgatory.complete(write, broker.state, write.timeout_ms, apply, respond)

    def _timers(self) -> None:
        for decision in self.core.expire(self.broker.now_ms, wall_ms=self.broker.wall_ms):
            self.write(decision, lambda _: None)
