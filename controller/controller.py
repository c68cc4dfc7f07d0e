"""The controller shell: ZooKeeper election (seed 002), then an event loop around state.handle.

Election: one multi-op creates the ephemeral /controller and sets /controller_epoch to epoch+1
at the zkVersion just read. NodeExists or BadVersion means someone else won: read the winner,
watch /controller, and try again when it goes away. A lost session means resigning.

While controller: load brokers, topics (with their unclean.leader.election.enable overrides),
assignments and partition states, watch /brokers/ids, /brokers/topics (and each topic's znode,
for added partitions), /admin/delete_topics, /isr_change_notification (and /controller), turn
each change into an event for the pure core, and execute the effects in order. ISR change
notifications are deleted once handled (Kafka's IsrChangeNotificationHandler). Partition
reassignments (AlterPartitionReassignments, through the inbox) are kept in
/admin/reassign_partitions, read back at every load, so a new controller resumes them.
ControlledShutdown requests from brokers enter the same loop through an inbox, so they are
serialised with the ZooKeeper events and always see the state the other events left; so do
ElectLeaders requests from operators and, with auto.leader.rebalance.enable, a leader imbalance
check every leader.imbalance.check.interval.seconds (a tick into the same inbox). Every
ZooKeeper write is a transaction that starts with a check of /controller_epoch's zkVersion, so a
controller that has been replaced cannot write anything; such a failed check means resigning.
Any other failed write (a CAS lost against a partition state, a vanished node) means re-loading
everything from ZooKeeper. Requests to brokers go through the channel (one ordered queue per
broker).
"""

from __future__ import annotations

import contextlib
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import structlog
import trio

from controller import zk_data, zk_topics
from controller.channel import ControllerChannel
from controller.state import (
    PREFERRED_REPLICA_IMBALANCE,
    UNCLEAN_LEADER_ELECTION,
    AlterReassignmentsReply,
    BrokersChanged,
    ControlledShutdownReply,
    ControlledShutdownRequested,
    ControllerContext,
    ControllerEvent,
    CreatePartitionStates,
    DeleteTopicZnodes,
    Effect,
    Elected,
    ElectLeadersReply,
    ElectLeadersRequested,
    IsrChanged,
    LeaderImbalanceCheck,
    LiveBroker,
    LogEvent,
    PartitionState,
    Reassignment,
    ReassignmentsRequested,
    Resigned,
    SendLeaderAndIsr,
    SendStopReplica,
    SendUpdateMetadata,
    TopicDeletionRequested,
    TopicsChanged,
    WritePartitionStates,
    WriteReassignmentPlan,
    WriteTopicAssignment,
    handle,
)
from controller.zk_brokers import get_live_brokers
from controller.zk_client import (
    BadVersionError,
    CheckOp,
    CreateOp,
    DeleteOp,
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    SessionState,
    SetOp,
    TransactionOp,
    WatchEvent,
    WatchKind,
    ZkClient,
    ZkError,
    ZkEvent,
)
from controller.zk_isr import (
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    decode_isr_change_notification,
)
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from protocol.topic_partition import TopicPartition

__all__ = ["Controller", "ControllerMovedError", "run_controller"]

_PERSISTENT_PATHS = (
    zk_data.BROKER_IDS_PATH,
    zk_data.TOPICS_PATH,
    zk_data.CONFIG_TOPICS_PATH,
    zk_data.DELETE_TOPICS_PATH,
    ISR_CHANGE_NOTIFICATION_PATH,
)
_MAX_OPS_PER_TRANSACTION = 200
_MAX_ISR_NOTIFICATIONS_PER_ROUND = 1_000
_UNCLEAN_CONFIG = "unclean.leader.election.enable"
_RETRY_BACKOFF_MS = (100, 5_000)
_WAIT_LOG_INTERVAL_S = 10.0


class ControllerMovedError(Exception):
    """Our controller epoch is no longer current: another broker is controller."""


def _now_ms() -> int:
    return int(time.time() * 1000)


ShutdownAnswer = tuple[ErrorCode, list[TopicPartition]]


@dataclass(frozen=True, slots=True)
class _ShutdownRequest:
    """A ControlledShutdown waiting for the controller loop; answered on `reply`."""

    broker_id: int
    broker_epoch: int
    reply: trio.MemorySendChannel[ShutdownAnswer]
    deadline: float  # trio time after which the asker has given up


ElectionResults = dict[TopicPartition, ErrorCode]


@dataclass(frozen=True, slots=True)
class _ElectRequest:
    """An ElectLeaders waiting for the controller loop; answered on `reply`."""

    election_type: ElectionType
    partitions: tuple[TopicPartition, ...] | None  # None: every partition
    reply: trio.MemorySendChannel[ElectionResults]
    deadline: float


ReassignmentTargets = dict[TopicPartition, tuple[int, ...] | None]


@dataclass(frozen=True, slots=True)
class _ReassignRequest:
    """An AlterPartitionReassignments waiting for the controller loop; answered on `reply`."""

    targets: ReassignmentTargets
    reply: trio.MemorySendChannel[ElectionResults]
    deadline: float
    throttle_bytes_per_sec: int = -1


@dataclass(frozen=True, slots=True)
class _ImbalanceTick:
    """Time for a leader imbalance check."""


_Request = _ShutdownRequest | _ElectRequest | _ReassignRequest
_InboxItem = ZkEvent | _ShutdownRequest | _ElectRequest | _ReassignRequest | _ImbalanceTick


class Controller:
    """A controller candidate for one broker. `controller_id`/`controller_epoch` show the
    controller this broker last saw (-1 when unknown); `is_active` whether it is us.
    `unclean_leader_elections` counts unclean elections (Kafka's UncleanLeaderElections);
    `preferred_replica_imbalance_count` is the last leader imbalance check's figure (-1: none
    yet)."""

    def __init__(
        self,
        zk: ZkClient,
        broker_id: int,
        *,
        request_timeout_ms: int = 30_000,
        unclean_leader_election_enable: bool = False,
        auto_leader_rebalance_enable: bool = False,
        leader_imbalance_per_broker_percentage: int = 10,
        leader_imbalance_check_interval_seconds: int = 300,
    ):
        self.zk = zk
        self.auto_leader_rebalance_enable = auto_leader_rebalance_enable
        self.leader_imbalance_per_broker_percentage = leader_imbalance_per_broker_percentage
        self.leader_imbalance_check_interval_seconds = leader_imbalance_check_interval_seconds
        self.preferred_replica_imbalance_count = -1
        self.broker_id = broker_id
        self.request_timeout_ms = request_timeout_ms
        self.controller_id = -1
        self.controller_epoch = -1
        self.unclean_leader_elections = 0
        self.context = ControllerContext(
            broker_id, unclean_leader_election_enable=unclean_leader_election_enable
        )
        self._inbox: trio.MemorySendChannel[_InboxItem] | None = None  # set while leading
        self._log = structlog.get_logger(__name__).bind(broker_id=broker_id)

    @property
    def is_active(self) -> bool:
        return self.context.active

    async def controlled_shutdown(self, broker_id: int, broker_epoch: int) -> ShutdownAnswer:
        """Move `broker_id`'s leaderships away (Kafka's doControlledShutdown): the error code
        and the partitions it still leads. Runs in the controller loop, between ZooKeeper
        events; waits at most `request_timeout_ms` (then REQUEST_TIMED_OUT)."""
        inbox = self._inbox
        if inbox is None or not self.is_active:
            return ErrorCode.NOT_CONTROLLER, []
        timeout_s = self.request_timeout_ms / 1000
        reply, answer = trio.open_memory_channel[ShutdownAnswer](1)
        request = _ShutdownRequest(broker_id, broker_epoch, reply, trio.current_time() + timeout_s)
        with answer:
            try:
                inbox.send_nowait(request)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return ErrorCode.NOT_CONTROLLER, []  # resigning right now
            with trio.move_on_after(timeout_s):
                try:
                    return await answer.receive()
                except trio.EndOfChannel:
                    return ErrorCode.NOT_CONTROLLER, []
        return ErrorCode.REQUEST_TIMED_OUT, []

    async def elect_leaders(
        self,
        election_type: ElectionType,
        partitions: Iterable[TopicPartition] | None,
        timeout_ms: int,
    ) -> ElectionResults:
        """Preferred or unclean elections (Kafka's ElectLeaders), run in the controller loop:
        each partition's outcome. Waits at most min(timeout_ms, request_timeout_ms); what is
        not answered by then is REQUEST_TIMED_OUT (None: no partition could be named)."""
        wanted = None if partitions is None else tuple(sorted(set(partitions)))
        inbox = self._inbox
        if inbox is None or not self.is_active:
            return dict.fromkeys(wanted or (), ErrorCode.NOT_CONTROLLER)
        timeout_s = max(0, min(timeout_ms, self.request_timeout_ms)) / 1000
        reply, answer = trio.open_memory_channel[ElectionResults](1)
        request = _ElectRequest(election_type, wanted, reply, trio.current_time() + timeout_s)
        with answer:
            try:
                inbox.send_nowait(request)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return dict.fromkeys(wanted or (), ErrorCode.NOT_CONTROLLER)
            with trio.move_on_after(timeout_s):
                try:
                    return await answer.receive()
                except trio.EndOfChannel:
                    return dict.fromkeys(wanted or (), ErrorCode.NOT_CONTROLLER)
        return dict.fromkeys(wanted or (), ErrorCode.REQUEST_TIMED_OUT)

    async def alter_reassignments(
        self, targets: ReassignmentTargets, timeout_ms: int, throttle_bytes_per_sec: int = -1
    ) -> ElectionResults:
        """Start, replace or (target None) cancel partition reassignments, run in the
        controller loop: each partition's outcome (the reassignment itself goes on in the
        background). Waits at most min(timeout_ms, request_timeout_ms). The throttle (-1:
        none) applies to the partitions started or restarted by this request."""
        inbox = self._inbox
        if inbox is None or not self.is_active:
            return dict.fromkeys(targets, ErrorCode.NOT_CONTROLLER)
        timeout_s = max(0, min(timeout_ms, self.request_timeout_ms)) / 1000
        reply, answer = trio.open_memory_channel[ElectionResults](1)
        deadline = trio.current_time() + timeout_s
        request = _ReassignRequest(dict(targets), reply, deadline, throttle_bytes_per_sec)
        with answer:
            try:
                inbox.send_nowait(request)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                return dict.fromkeys(targets, ErrorCode.NOT_CONTROLLER)
            with trio.move_on_after(timeout_s):
                try:
                    return await answer.receive()
                except trio.EndOfChannel:
                    return dict.fromkeys(targets, ErrorCode.NOT_CONTROLLER)
        return dict.fromkeys(targets, ErrorCode.REQUEST_TIMED_OUT)

    def list_reassignments(self) -> dict[TopicPartition, Reassignment] | None:
        """The reassignments in progress (None: not the active controller)."""
        if not self.is_active:
            return None
        return dict(self.context.reassignments)

    async def run(
        self, *, task_status: trio.TaskStatus[Controller] = trio.TASK_STATUS_IGNORED
    ) -> None:
        events = self.zk.subscribe()
        backoff_ms = _RETRY_BACKOFF_MS[0]
        with events:
            task_status.started(self)
            while not self.zk.closed:
                try:
                    await self._wait_connected(events)
                    won = await self._elect()
                    if won is None:
                        await self._follow(events)
                    else:
                        await self._lead(events, *won)
                except trio.EndOfChannel:
                    return  # the ZkClient was closed
                except (ZkError, zk_data.ZkDataError) as exc:
                    self._log.warning("controller election round failed", error=repr(exc))
                    await trio.sleep(backoff_ms / 1000)
                    backoff_ms = min(2 * backoff_ms, _RETRY_BACKOFF_MS[1])
                else:
                    backoff_ms = _RETRY_BACKOFF_MS[0]

    # --- election -----------------------------------------------------------------------

    async def _wait_connected(self, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        while not self.zk.connected:
            with trio.move_on_after(_WAIT_LOG_INTERVAL_S) as waiting:
                while not self.zk.connected:
                    event = await events.receive()
                    if isinstance(event, SessionEvent) and event.state is SessionState.CONNECTED:
                        break
            if waiting.cancelled_caught:
                self._log.info("controller candidate waiting for ZooKeeper")

    async def _elect(self) -> tuple[int, int] | None:
        """Try once. Returns (controller epoch, its zkVersion) if we won, None if not."""
        for path in _PERSISTENT_PATHS:
            await _ensure_path(self.zk, path)
        current, version = await self._read_controller_epoch()
        new_epoch = current + 1
        ops: list[TransactionOp] = [
            CreateOp(
                zk_data.CONTROLLER_PATH,
                zk_data.ControllerZnode(self.broker_id, _now_ms()).encode(),
                ephemeral=True,
            ),
            SetOp(
                zk_data.CONTROLLER_EPOCH_PATH,
                zk_data.encode_controller_epoch(new_epoch),
                version=version,
            ),
        ]
        try:
            results = await self.zk.transaction(ops)
        except (NodeExistsError, BadVersionError):
            # Maybe our own earlier attempt succeeded (a retry after a lost reply).
            if await self._read_controller_id() == self.broker_id:
                epoch, zk_version = await self._read_controller_epoch()
                if epoch == new_epoch:
                    return epoch, zk_version
                # Our /controller outlived our epoch (another controller bumped it): move it.
                await self._delete_own_controller_znode()
            return None
        stat = results[1]
        assert not isinstance(stat, str) and stat is not None
        return new_epoch, stat.version

    async def _read_controller_epoch(self) -> tuple[int, int]:
        found = await self.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
        if found is None:
            try:
                await self.zk.create(
                    zk_data.CONTROLLER_EPOCH_PATH,
                    zk_data.encode_controller_epoch(zk_data.INITIAL_CONTROLLER_EPOCH),
                )
                return zk_data.INITIAL_CONTROLLER_EPOCH, 0
            except NodeExistsError:
                found = await self.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
                if found is None:
                    raise
        data, stat = found
        return zk_data.decode_controller_epoch(data), stat.version

    async def _delete_own_controller_znode(self) -> None:
        """Kafka's triggerControllerMove: free /controller if this session holds it."""
        stat = await self.zk.exists(zk_data.CONTROLLER_PATH)
        if stat is not None and stat.ephemeral_owner == self.zk.session_id:
            with contextlib.suppress(NoNodeError, BadVersionError):
                await self.zk.delete(zk_data.CONTROLLER_PATH, version=stat.version)

    async def _read_controller_id(self, *, watch: bool = False) -> int:
        found = await self.zk.get(zk_data.CONTROLLER_PATH, watch=watch)
        if found is None:
            return -1
        return zk_data.ControllerZnode.decode(found[0]).broker_id

    async def _follow(self, events: trio.MemoryReceiveChannel[ZkEvent]) -> None:
        """Someone else is controller: watch /controller; return when it should be re-tried."""
        controller_id = await self._read_controller_id(watch=True)
        if controller_id < 0:
            self.controller_id = -1
            return
        # Publish both together, so observers never see a new id with an old epoch.
        self.controller_epoch, _ = await self._read_controller_epoch()
        self.controller_id = controller_id
        async for event in events:
            if isinstance(event, WatchEvent) and event.path == zk_data.CONTROLLER_PATH:
                return
            if isinstance(event, SessionEvent) and event.state is SessionState.CONNECTED:
                return  # watches were dropped while disconnected: read and re-arm

    # --- leading ------------------------------------------------------------------------

    async def _lead(
        self, events: trio.MemoryReceiveChannel[ZkEvent], epoch: int, epoch_zk_version: int
    ) -> None:
        self.controller_id, self.controller_epoch = self.broker_id, epoch
        self._log.info("controller elected", controller_epoch=epoch)
        inbox_send, inbox = trio.open_memory_channel[_InboxItem](math.inf)
        self._inbox = inbox_send
        pending: list[_Request] = []  # taken from the inbox, not answered yet
        try:
            async with trio.open_nursery() as nursery:
                channel = ControllerChannel(
                    nursery,
                    controller_id=self.broker_id,
                    request_timeout_ms=self.request_timeout_ms,
                )
                nursery.start_soon(_forward, events, inbox_send)
                if self.auto_leader_rebalance_enable:
                    interval_s = max(1, self.leader_imbalance_check_interval_seconds)
                    nursery.start_soon(_tick_imbalance_checks, inbox_send, interval_s)
                try:
                    await self._lead_loop(inbox, pending, channel, epoch, epoch_zk_version)
                finally:
                    channel.close()
                    nursery.cancel_scope.cancel()
        finally:
            self._inbox = None
            inbox_send.close()
            _refuse_requests(inbox, pending)
            self.context, _ = handle(self.context, Resigned(), _now_ms())
            self.controller_id = -1
            self._log.info("controller resigned", controller_epoch=epoch)

    async def _lead_loop(
        self,
        inbox: trio.MemoryReceiveChannel[_InboxItem],
        pending: list[_Request],
        channel: ControllerChannel,
        epoch: int,
        epoch_zk_version: int,
    ) -> None:
        reload_pending = True
        delay_ms = 0  # before the next re-load, growing while re-loads keep failing
        backoff_ms = _RETRY_BACKOFF_MS[0]
        while True:
            try:
                if reload_pending:
                    await self._back_off(inbox, pending, delay_ms)
                    await self._apply(await self._load(epoch, epoch_zk_version), channel)
                    reload_pending = False
                    await self._process_isr_changes(channel)  # those published meanwhile
                elif pending:  # new, or retried after a re-load
                    await self._serve(pending[0], channel)
                    pending.pop(0)
                else:  # idle until ZooKeeper or a broker tells us something
                    item = await inbox.receive()
                    if isinstance(item, _ShutdownRequest | _ElectRequest | _ReassignRequest):
                        pending.append(item)
                    elif isinstance(item, _ImbalanceTick):
                        percentage = self.leader_imbalance_per_broker_percentage
                        await self._apply(LeaderImbalanceCheck(percentage), channel)
                    elif _is_isr_change(item):
                        await self._process_isr_changes(channel)
                    else:
                        event = await self._translate(item)
                        if event is not None:
                            await self._apply(event, channel)
                backoff_ms = _RETRY_BACKOFF_MS[0]
            except trio.EndOfChannel:
                return  # the ZkClient was closed
            except ControllerMovedError:
                self._log.warning("controller moved: another broker has a newer epoch")
                await self._delete_own_controller_znode()
                return
            except _Resign:
                return
            except (_Reload, ZkError, zk_data.ZkDataError) as exc:
                # Re-read everything; back off so a persistent failure cannot spin.
                if not isinstance(exc, _Reload):
                    self._log.warning("controller ZooKeeper operation failed", error=repr(exc))
                reload_pending = True
                delay_ms = backoff_ms
                backoff_ms = min(2 * backoff_ms, _RETRY_BACKOFF_MS[1])

    async def _back_off(
        self,
        inbox: trio.MemoryReceiveChannel[_InboxItem],
        pending: list[_Request],
        delay_ms: int,
    ) -> None:
        """Wait `delay_ms` before a re-load, still listening: a lost session resigns at once,
        requests are kept; other ZooKeeper events are dropped (the re-load reads everything)."""
        with trio.move_on_after(delay_ms / 1000):
            while delay_ms > 0:
                item = await inbox.receive()
                if isinstance(item, _ShutdownRequest | _ElectRequest | _ReassignRequest):
                    pending.append(item)
                elif isinstance(item, SessionEvent) and (
                    item.state is SessionState.LOST or item.new_session
                ):
                    raise _Resign

    async def _translate(self, zk_event: ZkEvent) -> ControllerEvent | None:
        """A ZooKeeper notification -> the event for the core (re-reading and re-arming)."""
        if isinstance(zk_event, SessionEvent):
            if zk_event.state is SessionState.LOST or zk_event.new_session:
                raise _Resign
            if zk_event.state is SessionState.CONNECTED:
                raise _Reload  # kazoo dropped our watches while suspended
            return None
        if zk_event.kind is WatchKind.RESET:
            return None
        if zk_event.path == zk_data.CONTROLLER_PATH:
            if await self._read_controller_id(watch=True) != self.broker_id:
                raise _Resign
            return None
        if zk_event.path == zk_data.BROKER_IDS_PATH:
            return BrokersChanged(await self._read_brokers())
        if zk_event.path == zk_data.TOPICS_PATH or _is_topic_path(zk_event.path):
            # A new or deleted topic, or (Kafka's PartitionModificationsHandler) partitions
            # added to one: re-read every assignment, re-arming each topic's data watch.
            topics = await zk_topics.list_topics(self.zk, watch=True)
            assignments = await zk_topics.get_assignments(self.zk, topics, watch=True)
            return TopicsChanged(assignments, await self._read_unclean_overrides(assignments))
        if zk_event.path == zk_data.DELETE_TOPICS_PATH:
            marked = await zk_topics.topics_marked_for_deletion(self.zk, watch=True)
            return TopicDeletionRequested(frozenset(marked))
        return None

    async def _load(self, epoch: int, epoch_zk_version: int) -> Elected:
        if await self._read_controller_id(watch=True) != self.broker_id:
            raise _Resign
        brokers = await self._read_brokers()
        topics = await zk_topics.list_topics(self.zk, watch=True)
        assignments = await zk_topics.get_assignments(self.zk, topics, watch=True)
        overrides = await self._read_unclean_overrides(assignments)
        states = await self._read_partition_states(
            TopicPartition(t, p) for t, partitions in assignments.items() for p in partitions
        )
        marked = await zk_topics.topics_marked_for_deletion(self.zk, watch=True)
        plan = await self._read_reassignment_plan()
        return Elected(
            epoch,
            epoch_zk_version,
            brokers,
            assignments,
            states,
            frozenset(marked),
            unclean_overrides=overrides,
            reassignment_targets=plan.targets,
            reassignment_originals=plan.originals,
            reassignment_throttles=plan.throttles,
        )

    async def _read_reassignment_plan(self) -> zk_data.ReassignmentPlan:
        """/admin/reassign_partitions (empty if missing; a malformed plan is logged and
        ignored, never a re-load loop)."""
        found = await self.zk.get(zk_data.REASSIGN_PARTITIONS_PATH)
        if found is None:
            return zk_data.ReassignmentPlan({})
        try:
            return zk_data.ReassignmentPlan.decode(found[0])
        except zk_data.ZkDataError as exc:
            self._log.warning("reassignment plan unreadable; ignored", error=str(exc))
            return zk_data.ReassignmentPlan({})

    async def _read_partition_states(
        self, partitions: Iterable[TopicPartition]
    ) -> dict[TopicPartition, PartitionState]:
        """The state znodes that exist, each with its version as the partition epoch and its
        mzxid (to tell which broker processes started after it was written)."""
        states: dict[TopicPartition, PartitionState] = {}
        for topic, partition in sorted(partitions):
            found = await self.zk.get(zk_data.partition_state_path(topic, partition))
            if found is None:
                continue
            data, stat = found
            znode = zk_data.PartitionStateZnode.decode(data)
            states[TopicPartition(topic, partition)] = PartitionState(
                znode.leader,
                znode.leader_epoch,
                znode.isr,
                znode.controller_epoch,
                stat.version,
                modified_zxid=stat.mzxid,
            )
        return states

    async def _read_unclean_overrides(self, topics: Iterable[str]) -> dict[str, bool]:
        """Topics whose /config/topics/<t> sets unclean.leader.election.enable. A malformed
        config is logged and ignored (the broker default applies), never a re-load loop."""
        overrides: dict[str, bool] = {}
        for topic in sorted(topics):
            try:
                config = await zk_topics.get_topic_config(self.zk, topic)
            except zk_data.ZkDataError as exc:
                self._log.warning("topic config unreadable", topic=topic, error=str(exc))
                continue
            value = config.get(_UNCLEAN_CONFIG)
            if value is None:
                continue
            if value.strip().lower() in ("true", "false"):
                overrides[topic] = value.strip().lower() == "true"
            else:
                self._log.warning("bad topic config ignored", topic=topic, key=_UNCLEAN_CONFIG)
        return overrides

    # --- ISR change notifications -------------------------------------------------------

    async def _process_isr_changes(self, channel: ControllerChannel) -> None:
        """Read the notifications (re-arming the watch), re-read the partitions they name,
        let the core take the new states, then delete the notifications handled."""
        while True:
            children = await self._isr_change_children()
            batch = children[:_MAX_ISR_NOTIFICATIONS_PER_ROUND]
            if not batch:
                return
            partitions: set[TopicPartition] = set()
            handled: list[str] = []
            for child in batch:
                path = f"{ISR_CHANGE_NOTIFICATION_PATH}/{child}"
                found = await self.zk.get(path)
                if found is None:
                    continue
                handled.append(path)
                try:
                    partitions.update(decode_isr_change_notification(found[0]))
                except zk_data.ZkDataError as exc:
                    self._log.warning(
                        "malformed ISR change notification", path=path, error=str(exc)
                    )
            known = partitions & self.context.partition_states.keys()
            states = await self._read_partition_states(known)
            await self._apply(IsrChanged(states), channel)
            await self._guarded([DeleteOp(path) for path in handled], self.context)
            if len(children) <= len(batch):
                return

    async def _isr_change_children(self) -> list[str]:
        try:
            children = await self.zk.get_children(ISR_CHANGE_NOTIFICATION_PATH, watch=True)
        except NoNodeError:
            await _ensure_path(self.zk, ISR_CHANGE_NOTIFICATION_PATH)
            children = await self.zk.get_children(ISR_CHANGE_NOTIFICATION_PATH, watch=True)
        return [c for c in children if c.startswith(ISR_CHANGE_PREFIX)]

    # --- requests from brokers and operators --------------------------------------------

    async def _serve(self, request: _Request, channel: ControllerChannel) -> None:
        if isinstance(request, _ShutdownRequest):
            await self._controlled_shutdown(request, channel)
        elif isinstance(request, _ReassignRequest):
            await self._alter_reassignments(request, channel)
        else:
            await self._elect_leaders(request, channel)

    async def _alter_reassignments(
        self, request: _ReassignRequest, channel: ControllerChannel
    ) -> None:
        if trio.current_time() >= request.deadline:
            _answer_elect(request, {})  # nobody is waiting any more
            return
        event = ReassignmentsRequested(request.targets, request.throttle_bytes_per_sec)
        effects = await self._apply(event, channel)
        for effect in effects:
            if isinstance(effect, AlterReassignmentsReply):
                _answer_elect(request, dict(effect.results))

    async def _elect_leaders(self, request: _ElectRequest, channel: ControllerChannel) -> None:
        if trio.current_time() >= request.deadline:
            _answer_elect(request, {})  # nobody is waiting any more
            return
        event = ElectLeadersRequested(request.election_type, request.partitions)
        effects = await self._apply(event, channel)
        for effect in effects:
            if isinstance(effect, ElectLeadersReply):
                counts: dict[str, int] = {}
                for code in effect.results.values():
                    counts[code.name] = counts.get(code.name, 0) + 1
                self._log.info(
                    "leader election answered",
                    election_type=request.election_type.name,
                    results=counts,
                )
                _answer_elect(request, dict(effect.results))

    # --- controlled shutdown ------------------------------------------------------------

    async def _controlled_shutdown(
        self, request: _ShutdownRequest, channel: ControllerChannel
    ) -> None:
        if trio.current_time() >= request.deadline:
            _answer(request, ErrorCode.REQUEST_TIMED_OUT, ())  # nobody is waiting any more
            return
        event = ControlledShutdownRequested(request.broker_id, request.broker_epoch)
        effects = await self._apply(event, channel)
        for effect in effects:
            if isinstance(effect, ControlledShutdownReply):
                self._log.info(
                    "controlled shutdown answered",
                    shutting_down_broker_id=effect.broker_id,
                    error_code=effect.error_code.name,
                    remaining_partitions=len(effect.remaining_partitions),
                )
                _answer(request, effect.error_code, effect.remaining_partitions)

    async def _read_brokers(self) -> dict[int, LiveBroker]:
        registered = await get_live_brokers(self.zk, watch=True)
        return {
            broker_id: LiveBroker(
                broker_id,
                found.registration.host,
                found.registration.port,
                found.registration.rack,
                found.broker_epoch,
                found.incarnation,
            )
            for broker_id, found in registered.items()
        }

    async def _apply(self, event: ControllerEvent, channel: ControllerChannel) -> list[Effect]:
        context, effects = handle(self.context, event, _now_ms())
        channel.update_brokers(context.live_brokers)
        for effect in effects:
            await self._execute(effect, context, channel)
        self.context = context
        return effects

    async def _execute(
        self, effect: Effect, context: ControllerContext, channel: ControllerChannel
    ) -> None:
        if isinstance(effect, SendLeaderAndIsr | SendStopReplica):
            channel.send(effect.broker_id, effect.request)
        elif isinstance(effect, SendUpdateMetadata):
            for broker_id in effect.broker_ids:
                channel.send(broker_id, effect.request)
        elif isinstance(effect, LogEvent):
            fields = dict(effect.fields)
            if effect.event == UNCLEAN_LEADER_ELECTION:
                self.unclean_leader_elections += 1  # its ZooKeeper write came first and held
                fields["unclean_leader_elections"] = self.unclean_leader_elections
            if effect.event == PREFERRED_REPLICA_IMBALANCE:
                self.preferred_replica_imbalance_count = fields["preferred_replica_imbalance_count"]
            if effect.level == "warning":
                self._log.warning(effect.event, **fields)
            else:
                self._log.info(effect.event, **fields)
        elif isinstance(
            effect, ControlledShutdownReply | ElectLeadersReply | AlterReassignmentsReply
        ):
            pass  # the caller of _apply answers the request
        elif isinstance(effect, CreatePartitionStates):
            await self._create_partition_states(effect, context)
        elif isinstance(effect, WritePartitionStates):
            ops = [
                SetOp(zk_data.partition_state_path(t, p), znode.encode(), version=expected)
                for (t, p), (znode, expected) in sorted(effect.updates.items())
            ]
            await self._guarded(ops, context)
        elif isinstance(effect, WriteTopicAssignment):
            await self._write_topic_assignment(effect, context)
        elif isinstance(effect, WriteReassignmentPlan):
            await self._write_reassignment_plan(effect, context)
        else:
            await self._delete_topic_znodes(effect, context)

    async def _write_topic_assignment(
        self, effect: WriteTopicAssignment, context: ControllerContext
    ) -> None:
        """CAS on the topic znode: written only if it still holds what the core expected
        (otherwise someone changed it meanwhile: re-load)."""
        path = zk_data.topic_path(effect.topic)
        found = await self.zk.get(path)
        if found is None or dict(zk_data.TopicAssignment.decode(found[0]).partitions) != dict(
            effect.expected
        ):
            self._log.warning("topic assignment changed meanwhile; reloading", topic=effect.topic)
            raise _Reload
        data = zk_data.TopicAssignment(dict(effect.assignment)).encode()
        await self._guarded([SetOp(path, data, version=found[1].version)], context)

    async def _write_reassignment_plan(
        self, effect: WriteReassignmentPlan, context: ControllerContext
    ) -> None:
        path = zk_data.REASSIGN_PARTITIONS_PATH
        exists = await self.zk.exists(path) is not None
        if not effect.reassignments:
            if exists:
                await self._guarded([DeleteOp(path)], context)
            return
        plan = zk_data.ReassignmentPlan(
            {tp: r.target for tp, r in effect.reassignments.items()},
            {tp: r.original for tp, r in effect.reassignments.items()},
            {tp: r.throttle_bytes_per_sec for tp, r in effect.reassignments.items()},
        ).encode()
        op: TransactionOp = SetOp(path, plan) if exists else CreateOp(path, plan)
        await self._guarded([op], context)

    async def _create_partition_states(
        self, effect: CreatePartitionStates, context: ControllerContext
    ) -> None:
        # Parents first, unguarded (empty nodes, harmless); the state nodes themselves are
        # created under the controller epoch guard.
        for topic in sorted({t for t, _ in effect.states}):
            await _ensure_path(self.zk, zk_data.partitions_path(topic), makepath=False)
        for topic, partition in sorted(effect.states):
            await _ensure_path(self.zk, zk_data.partition_path(topic, partition), makepath=False)
        ops = [
            CreateOp(zk_data.partition_state_path(t, p), znode.encode())
            for (t, p), znode in sorted(effect.states.items())
        ]
        await self._guarded(ops, context)

    async def _delete_topic_znodes(
        self, effect: DeleteTopicZnodes, context: ControllerContext
    ) -> None:
        topic = effect.topic
        paths = await _subtree_bottom_up(self.zk, zk_data.topic_path(topic))
        for path in (zk_data.topic_config_path(topic), zk_data.delete_topic_path(topic)):
            if await self.zk.exists(path) is not None:
                paths.append(path)
        await self._guarded([DeleteOp(path) for path in paths], context)

    async def _guarded(self, ops: Sequence[TransactionOp], context: ControllerContext) -> None:
        """Write `ops` in transactions that each first check /controller_epoch's zkVersion."""
        guard = CheckOp(zk_data.CONTROLLER_EPOCH_PATH, context.epoch_zk_version)
        for start in range(0, len(ops), _MAX_OPS_PER_TRANSACTION):
            chunk = ops[start : start + _MAX_OPS_PER_TRANSACTION]
            try:
                await self.zk.transaction([guard, *chunk])
            except (BadVersionError, NoNodeError, NodeExistsError) as exc:
                if exc.op_index == 0:
                    raise ControllerMovedError(str(exc)) from exc
                self._log.warning("controller write lost a race; reloading", error=repr(exc))
                raise _Reload from exc


class _Resign(Exception):
    pass


class _Reload(Exception):
    pass


async def _forward(
    events: trio.MemoryReceiveChannel[ZkEvent], inbox: trio.MemorySendChannel[_InboxItem]
) -> None:
    """ZooKeeper events into the leading loop's inbox (where ControlledShutdowns also go)."""
    async for event in events:
        inbox.send_nowait(event)
    inbox.close()  # the ZkClient was closed: the loop sees EndOfChannel


async def _tick_imbalance_checks(
    inbox: trio.MemorySendChannel[_InboxItem], interval_s: float
) -> None:
    """A leader imbalance check every `interval_s` while leading (Kafka's
    AutoPreferredReplicaLeaderElection, scheduled at leader.imbalance.check.interval)."""
    while True:
        await trio.sleep(interval_s)
        try:
            inbox.send_nowait(_ImbalanceTick())
        except (trio.ClosedResourceError, trio.BrokenResourceError):
            return


def _is_topic_path(path: str | None) -> bool:
    """/brokers/topics/<t> itself (its data is the assignment)."""
    prefix = zk_data.TOPICS_PATH + "/"
    return path is not None and path.startswith(prefix) and "/" not in path[len(prefix) :]


def _is_isr_change(event: ZkEvent) -> bool:
    return isinstance(event, WatchEvent) and event.path == ISR_CHANGE_NOTIFICATION_PATH


def _answer(
    request: _ShutdownRequest, error_code: ErrorCode, remaining: Iterable[TopicPartition]
) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        request.reply.send_nowait((error_code, list(remaining)))
    request.reply.close()


def _answer_elect(request: _ElectRequest | _ReassignRequest, results: ElectionResults) -> None:
    with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError):
        request.reply.send_nowait(results)
    request.reply.close()


def _refuse_requests(inbox: trio.MemoryReceiveChannel[_InboxItem], pending: list[_Request]) -> None:
    """No longer controller: whoever still waits hears NOT_CONTROLLER (and asks again)."""
    while True:
        try:
            item = inbox.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            break
        if isinstance(item, _ShutdownRequest | _ElectRequest | _ReassignRequest):
            pending.append(item)
    inbox.close()
    for request in pending:
        if isinstance(request, _ShutdownRequest):
            _answer(request, ErrorCode.NOT_CONTROLLER, ())
        elif isinstance(request, _ReassignRequest):
            _answer_elect(request, dict.fromkeys(request.targets, ErrorCode.NOT_CONTROLLER))
        else:
            _answer_elect(
                request, dict.fromkeys(request.partitions or (), ErrorCode.NOT_CONTROLLER)
            )
    pending.clear()


async def _ensure_path(zk: ZkClient, path: str, *, makepath: bool = True) -> None:
    if await zk.exists(path) is None:
        with contextlib.suppress(NodeExistsError):
            await zk.create(path, makepath=makepath)


async def _subtree_bottom_up(zk: ZkClient, root: str) -> list[str]:
    """`root` and all its descendants, children before parents; [] if `root` is missing."""
    if await zk.exists(root) is None:
        return []
    out: list[str] = []

    async def visit(path: str) -> None:
        try:
            children = await zk.get_children(path)
        except NoNodeError:
            return
        for child in children:
            await visit(f"{path}/{child}")
        out.append(path)

    await visit(root)
    return out


async def run_controller(
    zk: ZkClient,
    broker_id: int,
    *,
    request_timeout_ms: int = 30_000,
    unclean_leader_election_enable: bool = False,
    auto_leader_rebalance_enable: bool = False,
    leader_imbalance_per_broker_percentage: int = 10,
    leader_imbalance_check_interval_seconds: int = 300,
    task_status: trio.TaskStatus[Controller] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run this broker's controller candidate until cancelled. `await nursery.start(...)`
    returns the Controller object (for controller_id / controller_epoch / is_active)."""
    controller = Controller(
        zk,
        broker_id,
        request_timeout_ms=request_timeout_ms,
        unclean_leader_election_enable=unclean_leader_election_enable,
        auto_leader_rebalance_enable=auto_leader_rebalance_enable,
        leader_imbalance_per_broker_percentage=leader_imbalance_per_broker_percentage,
        leader_imbalance_check_interval_seconds=leader_imbalance_check_interval_seconds,
    )
    await controller.run(task_status=task_status)
