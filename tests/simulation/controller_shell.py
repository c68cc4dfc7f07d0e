"""The controller in the simulation: the same election script and `LeadingController` steps
as controller/controller.py, run against the simulated ZooKeeper one event at a time.

Events queue up (a term's load, watch events, requests from brokers and operators) and run
after a drawn delay, sometimes a long one (a slow controller). A failed step re-loads (after a
back-off) or resigns as controller/core/term_recovery.py says, as in the trio shell; broker
requests go out through a per-broker channel that keeps them in order and retries until
answered, as controller/channel.py does.
"""

from __future__ import annotations

import contextlib
import functools
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from controller.core import ControllerContext, ControllerEvent, handle
from controller.core.term_recovery import Reload, Resign, TermRecovery
from controller.leading import LeadingController, Reply
from controller.zk_controller_election import (
    delete_own_controller_znode,
    read_controller_id,
    try_elect,
)
from controller.zk_types import WatchEvent, ZkError
from tests.simulation.channel import SimChannel
from tests.simulation.world import World

if TYPE_CHECKING:
    from tests.simulation.broker import SimBroker

__all__ = ["ControllerAsk", "SimController", "campaign"]


@dataclass(frozen=True, slots=True)
class ControllerAsk:
    """A request to the controller (ControlledShutdown, ElectLeaders, reassignments) as the
    core event it becomes; answered with the core's reply effect."""

    event: ControllerEvent


_Item = str | WatchEvent | tuple[ControllerEvent, Callable[[Reply | None], None]]


def campaign(world: World, broker: SimBroker) -> None:
    """Try to become controller soon; a loser watches /controller (the trio shell's
    `_follow`), so its deletion brings it back here."""

    def attempt() -> None:
        session = broker.session_id
        if session is None or broker.controller is not None:
            return
        try:
            won = world.zk.run(session, try_elect(broker.broker_id, session, world.now_ms))
            if won is None:
                world.zk.run(session, read_controller_id(watch=True))
        except ZkError:
            return
        if won is not None:
            SimController(world, broker, *won)

    broker.after(world.draw(world.config.controller_event_delay_ms), "campaign", attempt)


class SimController:
    def __init__(self, world: World, broker: SimBroker, epoch: int, epoch_zk_version: int):
        self.world = world
        self.broker = broker
        self.broker_id = broker.broker_id
        self.session_id = broker.session_id
        idle = ControllerContext(
            self.broker_id,
            unclean_leader_election_enable=world.config.unclean_leader_election_enable,
        )
        self.term = LeadingController(self.broker_id, epoch, epoch_zk_version, idle)
        self.active = True
        self._queue: deque[_Item] = deque()
        self._busy = False
        self._channels: dict[int, SimChannel] = {}
        self._recovery = TermRecovery()
        self._reload_at_ms = 0  # no event before (a failed step's re-load backs off)
        broker.controller = self
        world.controller_count += 1
        world.trace(f"b{self.broker_id} is controller, controller epoch {epoch}")
        self.enqueue("load")

    @property
    def context(self) -> ControllerContext:
        return self.term.context

    @staticmethod
    def refuse(broker_id: int, event: ControllerEvent) -> Reply | None:
        """The core's answer when this broker is not the controller (NOT_CONTROLLER)."""
        _, effects = handle(ControllerContext(broker_id), event, 0)
        return effects[-1] if effects else None  # type: ignore[return-value]

    # -- the event queue -------------------------------------------------------------------

    def enqueue(self, item: _Item, *, first: bool = False) -> None:
        if item == "load" and "load" in self._queue:
            return
        if first:
            self._queue.appendleft(item)
        else:
            self._queue.append(item)
        self._schedule()

    def ask(self, event: ControllerEvent, reply: Callable[[Reply | None], None]) -> None:
        self.enqueue((event, reply))

    def _schedule(self) -> None:
        if self._busy or not self._queue or not self.active:
            return
        self._busy = True
        config = self.world.config
        delay_ms = self.world.draw(config.controller_event_delay_ms)
        if self.world.rng.random() < config.controller_slow_probability:
            delay_ms = self.world.draw(config.controller_slow_delay_ms)
        delay_ms = max(delay_ms, self._reload_at_ms - self.world.now_ms)  # a re-load backs off
        self.broker.after(delay_ms, "controller handles an event", self._process_next)

    def _process_next(self) -> None:
        self._busy = False
        if not self.active or not self._queue:
            return
        if self.world.controller_paused:
            self._busy = True
            self.broker.after(10, "controller paused", self._process_next)
            return
        item = self._queue.popleft()
        now_ms = self.world.now_ms
        zk, session, term = self.world.zk, self.session_id, self.term
        answered: Callable[[], None] | None = None
        try:
            if item == "load":
                zk.run(session, term.load(now_ms))
            elif isinstance(item, WatchEvent):
                zk.run(session, term.on_watch(item, now_ms))
            elif isinstance(item, tuple):
                event, reply = item
                answer = zk.run(session, term.serve(event, now_ms))
                for hook in self.world.on_reply:
                    hook(event, answer, term.context)
                answered = functools.partial(reply, answer)
            self._recovery.succeeded()
        except Exception as exc:
            match self._recovery.failed(exc):
                case None:
                    raise
                case Resign() as resign:
                    self.resign(resign.reason)
                    if resign.delete_own_znode:
                        with contextlib.suppress(ZkError):
                            zk.run(session, delete_own_controller_znode(session))
                case Reload() as reload:
                    self.world.trace(f"controller b{self.broker_id}: {exc!r}; reloading")
                    if isinstance(item, tuple):
                        self.enqueue(item, first=True)  # served again after the re-load
                    self.enqueue("load", first=True)
                    self._reload_at_ms = now_ms + reload.delay_ms
        self._flush()  # the requests go out before the asker hears back, as in controller.py
        if answered is not None:
            answered()
        self._schedule()

    def _flush(self) -> None:
        """Hand the step's broker requests to the channels (controller.py's `_run`)."""
        outbox = self.term.take_outbox()
        if not self.active:
            return
        live = self.term.live_brokers
        for broker_id in list(self._channels):
            if live.get(broker_id) != self._channels[broker_id].broker:
                self._channels.pop(broker_id).stopped = True
        for broker_id, broker in live.items():
            if broker_id not in self._channels:
                self._channels[broker_id] = SimChannel(
                    self.world, self.broker, self.broker_id, broker
                )
        for broker_id, request in outbox:
            channel = self._channels.get(broker_id)
            if channel is not None:
                channel.send(request)

    # -- leaving ---------------------------------------------------------------------------

    def resign(self, why: str) -> None:
        if self.active:
            self.world.trace(f"controller b{self.broker_id} resigns: {why}")
            self.die()

    def die(self) -> None:
        self.active = False
        self.term.resign(self.world.now_ms)
        for channel in self._channels.values():
            channel.stopped = True
        self._channels = {}
        for item in self._queue:
            if isinstance(item, tuple):
                event, reply = item
                reply(self.refuse(self.broker_id, event))
        self._queue.clear()
        if self.broker.controller is self:
            self.broker.controller = None
