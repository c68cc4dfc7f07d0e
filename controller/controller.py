"""The controller's trio shell: the election loop, then one term's event loop.

Election and every ZooKeeper read and write are scripts (`zk_controller_election`,
`leading`), run here with `ZkClient.run`; decisions are `controller.core.handle`. While
leading, ZooKeeper watch events, leader imbalance ticks and requests from brokers and operators
share one inbox, so they are handled one at a time (Kafka's ControllerEventManager).
docs/architecture.md ("The controller") describes the behaviour.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import TypeVar

import structlog
import trio

from client.security import ClientSecurity
from controller import zk_data
from controller.channel import ControllerChannel
from controller.core import (
    AlterReassignmentsReply,
    ControlledShutdownReply,
    ControlledShutdownRequested,
    ControllerContext,
    ElectLeadersReply,
    ElectLeadersRequested,
    LeaderImbalanceCheck,
    Reassignment,
    ReassignmentsRequested,
    handle,
)
from controller.core.term_recovery import RETRY_BACKOFF_MS, Reload, Resign, TermRecovery
from controller.inbox import Asked, Closed, ImbalanceTick, Inbox, RequestEvent
from controller.leading import ControllerStats, LeadingController, Reply
from controller.settings import DEFAULT_SETTINGS, ControllerSettings
from controller.zk_client import ZkClient
from controller.zk_controller_election import (
    delete_own_controller_znode,
    read_controller_epoch,
    read_controller_id,
    try_elect,
)
from controller.zk_load import ResignNeeded
from controller.zk_script import ZkScript
from controller.zk_types import (
    SessionEvent,
    SessionState,
    WatchEvent,
    ZkError,
    ZkEvent,
)
from controller.zk_writes import ControllerMovedError, ReloadNeeded
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from protocol.topic_partition import TopicPartition

__all__ = ["Controller", "ControllerMovedError", "run_controller"]

_T = TypeVar("_T")
_WAIT_LOG_INTERVAL_S = 10.0

ShutdownAnswer = tuple[ErrorCode, list[TopicPartition]]
ElectionResults = dict[TopicPartition, ErrorCode]
ReassignmentTargets = dict[TopicPartition, tuple[int, ...] | None]


def _now_ms() -> int:
    """The core's clock: monotonic (timers, should it get any; see controller.core.handle)."""
    return time.monotonic_ns() // 1_000_000


def _wall_ms() -> int:
    """For the /controller znode's timestamp, which Kafka's tools read as a date."""
    return time.time_ns() // 1_000_000


class Controller:
    """A controller candidate for one broker. `controller_id`/`controller_epoch` show the
    controller this broker last saw (-1 when unknown); `is_active` whether it is us."""

    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        settings: ControllerSettings = DEFAULT_SETTINGS,
        *,
        security: ClientSecurity | None = None,
        listener_name: str | None = None,
    ):
        self.zk = zk
        # How to reach brokers: the listener named (control.plane.listener.name; None: the
        # inter-broker one each registered as its host and port), with this security.
        self.security = security
        self.listener_name = listener_name
        self.broker_id = broker_id
        self.settings = settings
        self.controller_id = -1
        self.controller_epoch = -1
        self.stats = ControllerStats()
        self._idle = ControllerContext(
            broker_id, unclean_leader_election_enable=settings.unclean_leader_election_enable
        )
        self._term: LeadingController | None = None
        self._inbox: Inbox | None = None  # set while leading
        self._log = structlog.get_logger(__name__).bind(broker_id=broker_id)

    @property
    def context(self) -> ControllerContext:
        return self._term.context if self._term is not None else self._idle

    @property
    def is_active(self) -> bool:
        return self.context.active

    @property
    def unclean_leader_elections(self) -> int:
        return self.stats.unclean_leader_elections

    @property
    def preferred_replica_imbalance_count(self) -> int:
        return self.stats.preferred_replica_imbalance_count

    # --- requests from handlers ---------------------------------------------------------

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> ShutdownAnswer:
        """Move `broker_id`'s leaderships away (Kafka's doControlledShutdown): the error code
        and the partitions it still leads. Waits at most `request_timeout_ms`."""
        reply = await self._ask(
            ControlledShutdownRequested(broker_id, broker_epoch), self.settings.request_timeout_ms
        )
        if isinstance(reply, ControlledShutdownReply):
            return reply.error_code, list(reply.remaining_partitions)
        return ErrorCode.REQUEST_TIMED_OUT, []

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Iterable[TopicPartition] | None,
        timeout_ms: int,
    ) -> ElectionResults:
        """Preferred or unclean elections (Kafka's ElectLeaders): each partition's outcome.
        What is not answered within min(timeout_ms, request_timeout_ms) is
        REQUEST_TIMED_OUT (None: every partition)."""
        wanted = None if partitions is None else tuple(sorted(set(partitions)))
        reply = await self._ask(ElectLeadersRequested(election_type, wanted), timeout_ms)
        if isinstance(reply, ElectLeadersReply):
            return dict(reply.results)
        return dict.fromkeys(wanted or (), ErrorCode.REQUEST_TIMED_OUT)

    async def alter_reassignments(
        self, targets: ReassignmentTargets, timeout_ms: int, throttle_bytes_per_sec: int = -1
    ) -> ElectionResults:
        """Start, replace or (target None) cancel partition reassignments: each partition's
        outcome (the reassignment itself goes on in the background). The throttle (-1: none)
        applies to the partitions started or restarted by this request."""
        event = ReassignmentsRequested(dict(targets), throttle_bytes_per_sec)
        reply = await self._ask(event, timeout_ms)
        if isinstance(reply, AlterReassignmentsReply):
            return dict(reply.results)
        return dict.fromkeys(targets, ErrorCode.REQUEST_TIMED_OUT)

    def list_reassignments(self) -> dict[TopicPartition, Reassignment] | None:
        """The reassignments in progress (None: not the active controller)."""
        return dict(self.context.reassignments) if self.is_active else None

    async def _ask(self, event: RequestEvent, timeout_ms: int) -> Reply | None:
        timeout_s = max(0, min(timeout_ms, self.settings.request_timeout_ms)) / 1000
        inbox = self._inbox
        if inbox is None or not self.is_active:
            return self._refuse(event)
        reply = await inbox.ask(event, timeout_s)
        return self._refuse(event) if isinstance(reply, Closed) else reply

    def _refuse(self, event: RequestEvent) -> Reply | None:
        """The core's answer when we are not the controller: NOT_CONTROLLER."""
        _, effects = handle(self._idle, event, _now_ms())
        return effects[-1] if effects else None  # type: ignore[return-value]

    # --- the election loop --------------------------------------------------------------

    async def run(
        self, *, task_status: trio.TaskStatus[Controller] = trio.TASK_STATUS_IGNORED
    ) -> None:
        events = self.zk.subscribe()
        backoff_ms = RETRY_BACKOFF_MS[0]
        with events:
            task_status.started(self)
            while not self.zk.closed:
                try:
                    await self._wait_connected(events)
                    won = await self.zk.run(
                        try_elect(self.broker_id, self.zk.session_id, _wall_ms())
                    )
                    if won is None:
                        await self._follow(events)
                    else:
                        await self._lead(events, *won)
                except trio.EndOfChannel:
                    return  # the ZkClient was closed
                except (ZkError, zk_data.ZkDataError) as exc:
                    self._log.warning("controller election round failed", error=repr(exc))
                    await trio.sleep(backoff_ms / 1000)
                    backoff_ms = min(2 * backoff_ms, RETRY_BACKOFF_MS[1])
                else:
                    backoff_ms = RETRY_BACKOFF_MS[0]

    async def _wait_connected(self, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        while not self.zk.connected:
            with trio.move_on_after(_WAIT_LOG_INTERVAL_S) as waiting:
                while not self.zk.connected:
                    event = await events.receive()
                    if isinstance(event, SessionEvent) and event.state is SessionState.CONNECTED:
                        break
            if waiting.cancelled_caught:
                self._log.info("controller candidate waiting for ZooKeeper")

    async def _follow(self, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        """Someone else is controller: watch /controller; return when it should be re-tried."""
        controller_id = await self.zk.run(read_controller_id(watch=True))
        if controller_id < 0:
            self.controller_id = -1
            return
        # Publish both together, so observers never see a new id with an old epoch.
        self.controller_epoch, _ = await self.zk.run(read_controller_epoch())
        self.controller_id = controller_id
        async for event in events:
            if isinstance(event, WatchEvent) and event.path == zk_data.CONTROLLER_PATH:
                return
            if isinstance(event, SessionEvent) and event.state is SessionState.CONNECTED:
                return  # watches were dropped while disconnected: read and re-arm

    # --- one term -------------------------------------------------------------------------

    async def _lead(
        self, events: trio.MemoryReceiveChannel[ZkEvent], epoch: int, epoch_zk_version: int
    ) -> None:
        self.controller_id, self.controller_epoch = self.broker_id, epoch
        self._log.info("controller elected", controller_epoch=epoch)
        term = LeadingController(self.broker_id, epoch, epoch_zk_version, self._idle)
        term.stats = self.stats
        inbox = Inbox()
        self._term, self._inbox = term, inbox
        try:
            async with trio.open_nursery() as nursery:
                channel = ControllerChannel(
                    nursery,
                    controller_id=self.broker_id,
                    request_timeout_ms=self.settings.request_timeout_ms,
                    security=self.security,
                    listener_name=self.listener_name,
                )
                nursery.start_soon(_forward, events, inbox)
                if self.settings.auto_leader_rebalance_enable:
                    interval_s = max(1, self.settings.leader_imbalance_check_interval_seconds)
                    nursery.start_soon(_tick_imbalance_checks, inbox, interval_s)
                try:
                    await self._lead_loop(term, inbox, channel)
                finally:
                    channel.close()
                    nursery.cancel_scope.cancel()
        finally:
            self._inbox = None
            inbox.close(self._refuse)
            term.resign(_now_ms())
            self._term = None
            self.controller_id = -1
            self._log.info("controller resigned", controller_epoch=epoch)

    async def _lead_loop(
        self, term: LeadingController, inbox: Inbox, channel: ControllerChannel
    ) -> None:
        reload_pending = True
        delay_ms = 0  # before the next re-load, growing while re-loads keep failing
        recovery = TermRecovery()
        while True:
            try:
                if reload_pending:
                    await self._back_off(inbox, delay_ms)
                    await self._run(term, channel, lambda: term.load(_now_ms()))
                    reload_pending = False
                elif inbox.pending:  # new, or retried after a re-load
                    await self._serve(term, channel, inbox.pending[0])
                    inbox.pending.popleft()
                else:  # idle until ZooKeeper or a broker tells us something
                    await self._handle(term, channel, inbox)
                recovery.succeeded()
            except trio.EndOfChannel:
                return  # the ZkClient was closed
            except Exception as exc:
                match recovery.failed(exc):
                    case None:
                        raise
                    case Resign(reason, delete_own_znode):
                        if delete_own_znode:
                            self._log.warning(reason)
                            await self.zk.run(delete_own_controller_znode(self.zk.session_id))
                        return
                    case Reload() as reload:
                        if reload.unexpected:
                            self._log.warning(
                                "controller ZooKeeper operation failed", error=repr(exc)
                            )
                        reload_pending = True
                        delay_ms = reload.delay_ms

    async def _handle(
        self, term: LeadingController, channel: ControllerChannel, inbox: Inbox
    ) -> None:
        item = await inbox.receive()
        match item:
            case Asked():
                inbox.pending.append(item)
            case ImbalanceTick():
                percentage = self.settings.leader_imbalance_per_broker_percentage
                await self._run(
                    term, channel, lambda: term.apply(LeaderImbalanceCheck(percentage), _now_ms())
                )
            case SessionEvent(state=state, new_session=new_session):
                if state is SessionState.LOST or new_session:
                    raise ResignNeeded
                if state is SessionState.CONNECTED:
                    raise ReloadNeeded  # kazoo dropped our watches while suspended
            case WatchEvent():
                await self._run(term, channel, lambda: term.on_watch(item, _now_ms()))

    async def _serve(
        self, term: LeadingController, channel: ControllerChannel, asked: Asked
    ) -> None:
        if trio.current_time() >= asked.deadline:
            asked.answer(None)  # nobody is waiting any more
            return
        reply = await self._run(term, channel, lambda: term.serve(asked.event, _now_ms()))
        if reply is not None:
            self._log.info("controller request answered", **_summary(reply))
        asked.answer(reply)

    async def _run(
        self, term: LeadingController, channel: ControllerChannel, step: Callable[[], ZkScript[_T]]
    ) -> _T:
        """Run one step; then hand its broker requests to the channel (also after a lost
        race: those decided before it still go out, as Kafka's would). A step that elected
        leaders is timed (the leader election time metric)."""
        elections = term.stats.leader_elections
        started = time.perf_counter()
        try:
            return await self.zk.run(step())
        except (ControllerMovedError, ResignNeeded):
            term.outbox.clear()
            raise
        finally:
            if term.stats.leader_elections != elections:
                term.stats.leader_election_time.observe(time.perf_counter() - started)
            channel.update_brokers(term.live_brokers)
            for broker_id, request in term.take_outbox():
                channel.send(broker_id, request)

    async def _back_off(self, inbox: Inbox, delay_ms: int) -> None:
        """Wait `delay_ms` before a re-load, still listening: a lost session resigns at once,
        requests are kept; other ZooKeeper events are dropped (the re-load reads everything)."""
        with trio.move_on_after(delay_ms / 1000):
            while delay_ms > 0:
                item = await inbox.receive()
                if isinstance(item, Asked):
                    inbox.pending.append(item)
                elif isinstance(item, SessionEvent) and (
                    item.state is SessionState.LOST or item.new_session
                ):
                    raise ResignNeeded


def _summary(reply: Reply) -> dict[str, object]:
    if isinstance(reply, ControlledShutdownReply):
        return {
            "request": "controlled shutdown",
            "shutting_down_broker_id": reply.broker_id,
            "error_code": reply.error_code.name,
            "remaining_partitions": len(reply.remaining_partitions),
        }
    counts: dict[str, int] = {}
    for code in reply.results.values():
        counts[code.name] = counts.get(code.name, 0) + 1
    kind = "leader election" if isinstance(reply, ElectLeadersReply) else "reassignment"
    return {"request": kind, "results": counts}


async def _forward(events: trio.MemoryReceiveChannel[ZkEvent], inbox: Inbox) -> None:
    """ZooKeeper events into the term's inbox (where requests also go)."""
    async for event in events:
        inbox.put(event)
    inbox.end()  # the ZkClient was closed: the loop sees EndOfChannel


async def _tick_imbalance_checks(inbox: Inbox, interval_s: float) -> None:
    """A leader imbalance check every `interval_s` while leading (Kafka's
    AutoPreferredReplicaLeaderElection, scheduled at leader.imbalance.check.interval)."""
    while True:
        await trio.sleep(interval_s)
        if not inbox.put(ImbalanceTick()):
            return


async def run_controller(
    zk: ZkClient,
    broker_id: int,
    settings: ControllerSettings = DEFAULT_SETTINGS,
    *,
    security: ClientSecurity | None = None,
    listener_name: str | None = None,
    task_status: trio.TaskStatus[Controller] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run this broker's controller candidate until cancelled. `await nursery.start(...)`
    returns the Controller object (for controller_id / controller_epoch / is_active)."""
    controller = Controller(zk, broker_id, settings, security=security, listener_name=listener_name)
    await controller.run(task_status=task_status)
