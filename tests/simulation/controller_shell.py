"""The controller: `controller.state.handle` driven by the simulated ZooKeeper.

A synchronous twin of controller/controller.py and controller/channel.py. Any broker may win
the election (create `/controller`, bump `/controller_epoch`); the winner loads everything
from ZooKeeper (an `Elected` event), then turns watches into `BrokersChanged` and `IsrChanged`
events, read from ZooKeeper when processed, as the real shell does. Effects run in order:
ZooKeeper writes are guarded by the controller epoch's version (failure: resign) and are
compare-and-set (failure: drop the rest and reload everything); requests go to one FIFO
channel per live broker that retries until answered.
"""

from __future__ import annotations

import dataclasses
from collections import deque
from typing import TYPE_CHECKING

from controller.state import (
    BrokersChanged,
    ControllerContext,
    ControllerEvent,
    CreatePartitionStates,
    Effect,
    Elected,
    IsrChanged,
    LiveBroker,
    LogEvent,
    PartitionState,
    Resigned,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    WritePartitionStates,
    handle,
)
from protocol.messages.leader_and_isr import LeaderAndIsrRequest
from protocol.messages.stop_replica import StopReplicaRequest
from protocol.messages.update_metadata import UpdateMetadataRequest
from tests.simulation.world import World
from tests.simulation.zk import TopicPartition, WriteOutcome

if TYPE_CHECKING:
    from tests.simulation.broker import SimBroker

__all__ = ["SimController", "campaign", "install_watches"]

ControllerRequest = LeaderAndIsrRequest | UpdateMetadataRequest | StopReplicaRequest


def install_watches(world: World) -> None:
    """The controller's and the candidates' ZooKeeper watches."""

    def controller_deleted() -> None:
        for broker in world.brokers.values():
            if broker.alive and broker.session_id is not None:
                campaign(world, broker)

    def enqueue(kind: str) -> None:
        for broker in world.brokers.values():
            if broker.alive and broker.controller is not None and broker.controller.active:
                broker.controller.enqueue(kind)

    world.zk.watches.controller_deleted.append(controller_deleted)
    world.zk.watches.brokers_changed.append(lambda: enqueue("brokers"))
    world.zk.watches.isr_notification.append(lambda: enqueue("isr"))


def campaign(world: World, broker: SimBroker) -> None:
    """Try to become controller soon, if no one is."""

    def attempt() -> None:
        if broker.session_id is None or broker.controller is not None:
            return
        won = world.zk.elect_controller(broker.broker_id, broker.session_id)
        if won is not None:
            SimController(world, broker, *won)

    if world.zk.controller is None:
        broker.after(world.draw(world.config.controller_event_delay_ms), "campaign", attempt)


def live_brokers(world: World) -> dict[int, LiveBroker]:
    return {
        b: LiveBroker(b, "127.0.0.1", 9090 + b, None, r.epoch, r.incarnation)
        for b, r in sorted(world.zk.brokers.items())
    }


def partition_state(world: World, tp: TopicPartition) -> PartitionState | None:
    found = world.zk.states.get(tp)
    if found is None:
        return None
    znode, version = found
    return PartitionState(
        znode.leader,
        znode.leader_epoch,
        znode.isr,
        znode.controller_epoch,
        version,
        modified_zxid=world.zk.state_mzxids[tp],
    )


class SimController:
    def __init__(self, world: World, broker: SimBroker, epoch: int, epoch_zk_version: int):
        self.world = world
        self.broker = broker
        self.broker_id = broker.broker_id
        self.epoch = epoch
        self.epoch_zk_version = epoch_zk_version
        self.session_id = broker.session_id or -1
        self.context = ControllerContext(
            self.broker_id,
            unclean_leader_election_enable=world.config.unclean_leader_election_enable,
        )
        self.active = True
        self._pending: list[str] = []
        self._busy = False
        self._channels: dict[int, ChannelSender] = {}
        broker.controller = self
        world.controller_count += 1
        world.trace(f"b{self.broker_id} is controller, controller epoch {epoch}")
        self.enqueue("load")

    # -- the event queue -------------------------------------------------------------------

    def enqueue(self, kind: str) -> None:
        if kind not in self._pending:
            self._pending.append(kind)
        self._schedule()

    def _schedule(self) -> None:
        if self._busy or not self._pending or not self.active:
            return
        self._busy = True
        config = self.world.config
        delay_ms = self.world.draw(config.controller_event_delay_ms)
        if self.world.rng.random() < config.controller_slow_probability:
            delay_ms = self.world.draw(config.controller_slow_delay_ms)
        self.broker.after(delay_ms, f"controller handles {self._pending[0]}", self._process_next)

    def _process_next(self) -> None:
        self._busy = False
        if not self.active or not self._pending:
            return
        if self.world.controller_paused:
            self._busy = True
            self.broker.after(10, "controller paused", self._process_next)
            return
        event = self._read(self._pending.pop(0))
        if event is not None:
            self._apply(event)
        self._schedule()

    def _read(self, kind: str) -> ControllerEvent | None:
        """Turn a watch into an event by reading ZooKeeper now (controller._translate)."""
        zk = self.world.zk
        if kind == "load":
            if zk.controller != (self.broker_id, self.session_id):
                self.resign("/controller is not ours")
                return None
            states = {}
            for tp in sorted((t, p) for t, parts in zk.assignments.items() for p in parts):
                state = partition_state(self.world, tp)
                if state is not None:
                    states[tp] = state
            return Elected(
                self.epoch, self.epoch_zk_version, live_brokers(self.world), zk.assignments, states
            )
        if kind == "brokers":
            return BrokersChanged(live_brokers(self.world))
        changed = {}
        for tp in zk.take_isr_notifications():
            state = partition_state(self.world, tp)
            if state is not None:
                changed[tp] = state
        return IsrChanged(changed) if changed else None

    def _apply(self, event: ControllerEvent) -> None:
        context, effects = handle(self.context, event, self.world.now_ms)
        self._update_channels(context)
        for effect in effects:
            outcome = self._execute(effect, context)
            if outcome is WriteOutcome.CONTROLLER_MOVED:
                self.resign("controller moved")
                self.world.zk.delete_controller(self.session_id)
                return
            if outcome is WriteOutcome.CONFLICT:
                self.world.trace(f"controller b{self.broker_id}: write lost a race; reloading")
                self._pending.insert(0, "load")
                return
        self.context = context

    def _execute(self, effect: Effect, context: ControllerContext) -> WriteOutcome:
        zk = self.world.zk
        writer = f"controller b{self.broker_id}"
        if isinstance(effect, CreatePartitionStates):
            return zk.create_states(self.session_id, self.epoch_zk_version, effect.states, writer)
        if isinstance(effect, WritePartitionStates):
            return zk.write_states(self.session_id, self.epoch_zk_version, effect.updates, writer)
        if isinstance(effect, SendLeaderAndIsr | SendStopReplica):
            self._send(effect.broker_id, effect.request)
        elif isinstance(effect, SendUpdateMetadata):
            for broker_id in effect.broker_ids:
                self._send(broker_id, effect.request)
        elif isinstance(effect, LogEvent):
            fields = " ".join(f"{k}={v}" for k, v in effect.fields.items())
            self.world.trace(f"controller b{self.broker_id}: {effect.event} {fields}")
        else:
            self.world.trace(f"controller b{self.broker_id}: unexpected effect {effect!r}")
        return WriteOutcome.OK

    # -- leaving ---------------------------------------------------------------------------

    def resign(self, why: str) -> None:
        if not self.active:
            return
        self.world.trace(f"controller b{self.broker_id} resigns: {why}")
        self.die()

    def die(self) -> None:
        self.active = False
        self.context, _ = handle(self.context, Resigned(), self.world.now_ms)
        for channel in self._channels.values():
            channel.stopped = True
        self._channels = {}
        if self.broker.controller is self:
            self.broker.controller = None

    # -- the channel -----------------------------------------------------------------------

    def _update_channels(self, context: ControllerContext) -> None:
        for broker_id in list(self._channels):
            if context.live_brokers.get(broker_id) != self._channels[broker_id].broker:
                self._channels.pop(broker_id).stopped = True
        for broker_id, broker in context.live_brokers.items():
            if broker_id not in self._channels:
                self._channels[broker_id] = ChannelSender(self, broker)

    def _send(self, broker_id: int, request: ControllerRequest) -> None:
        channel = self._channels.get(broker_id)
        if channel is not None:
            channel.send(request)


class ChannelSender:
    """controller/channel.py's per-broker sender: in order, one at a time, retried."""

    def __init__(self, controller: SimController, broker: LiveBroker) -> None:
        self.controller = controller
        self.broker = broker
        self.stopped = False
        self._queue: deque[ControllerRequest] = deque()
        self._in_flight = False
        self._backoff_ms = controller.world.config.controller_channel_backoff_ms[0]

    def send(self, request: ControllerRequest) -> None:
        self._queue.append(dataclasses.replace(request, broker_epoch=self.broker.epoch))
        self._pump()

    def _pump(self) -> None:
        if self.stopped or self._in_flight or not self._queue:
            return
        self._in_flight = True
        world = self.controller.world
        request = self._queue[0]
        world.net.request(
            self.controller.broker_id,
            self.broker.broker_id,
            request,
            timeout_ms=world.config.request_timeout_ms,
            on_response=self._answered,
            on_timeout=self._failed,
            label=f"{type(request).__name__} b{self.controller.broker_id}"
            f"->b{self.broker.broker_id}",
        )

    def _answered(self, response: object) -> None:
        del response  # errors are only logged by the real channel
        self._in_flight = False
        if self.stopped:
            return
        self._queue.popleft()
        self._backoff_ms = self.controller.world.config.controller_channel_backoff_ms[0]
        self._pump()

    def _failed(self) -> None:
        self._in_flight = False
        if self.stopped:
            return
        high = self.controller.world.config.controller_channel_backoff_ms[1]
        delay_ms, self._backoff_ms = self._backoff_ms, min(self._backoff_ms * 2, high)
        self.controller.broker.after(delay_ms, "channel retry", self._pump)
