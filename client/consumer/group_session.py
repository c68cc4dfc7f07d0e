"""What a consumer in a group does beyond fetching (Kafka's AsyncKafkaConsumer with the KIP-848
protocol): its membership and heartbeat task (membership.py, group.py), the reconciliation
poll() runs (revoke: stop, commit, listener; assign: listener, then committed offsets), the
lost partitions of a fenced member, auto-commit, commits and committed offsets, leaving.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import Any

import trio

from client.clock import now_ms
from client.consumer.commits import (
    ADMIN_MEMBER,
    OffsetAndMetadata,
    Offsets,
    commit_offsets,
    fetch_committed,
    to_offsets,
)
from client.consumer.coordinator import Coordinator
from client.consumer.group import GroupMember, RebalanceListener
from client.consumer.membership import Membership, MemberState, Outcome, Reconciliation
from client.consumer.partition_state import PartitionState, clear_buffer, set_position
from client.errors import (
    ClientClosedError,
    CommitFailedError,
    HighwaterClientError,
    error_for_code,
)
from client.log import client_logger
from client.metadata import ClusterMetadata
from protocol.topic_partition import TopicPartition

__all__ = ["CommitCallback", "GroupSession"]

States = dict[TopicPartition, PartitionState]
CommitCallback = Callable[[Mapping[TopicPartition, OffsetAndMetadata], Exception | None], None]


class GroupSession:
    def __init__(
        self,
        metadata: ClusterMetadata,
        states: Callable[[], States],
        wakeup: Callable[[], None],
        *,
        group_id: str,
        instance_id: str | None,
        enable_auto_commit: bool,
        auto_commit_interval_ms: int,
        max_poll_interval_ms: int,
        server_assignor: str | None,
        request_timeout_ms: int,
        retry_backoff_ms: int,
        retry_backoff_max_ms: int,
        default_api_timeout_ms: int,
        default_reset: int | None,
    ) -> None:
        self.metadata = metadata
        self.group_id = group_id
        self.instance_id = instance_id
        self.enable_auto_commit = enable_auto_commit
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self.default_reset = default_reset
        self._states = states
        self._wakeup = wakeup
        self.coordinator = Coordinator(
            metadata,
            group_id,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms,
        )
        self.membership = Membership(
            group_id,
            instance_id=instance_id,
            client_id=metadata.client_id,
            rebalance_timeout_ms=max_poll_interval_ms,
            server_assignor=server_assignor,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms,
        )
        self.member = GroupMember(
            self.membership,
            self.coordinator,
            max_poll_interval_ms=max_poll_interval_ms,
            on_change=self._on_change,
        )
        self.listener: RebalanceListener | None = None
        self._nursery: trio.Nursery | None = None
        self._committed: dict[TopicPartition, int] = {}  # what we last committed
        self._next_auto_commit_ms = 0.0  # set by start() (no clock outside trio)
        self._auto_commit_running = False
        self._leaving = False  # unsubscribe()'s commit, listener and leave are under way
        self._left = trio.Event()  # set when that is done
        self._resubscribe: tuple[tuple[str, ...] | None, str | None] | None = None
        self._log = client_logger("consumer", group=group_id)

    # ----- lifecycle and subscription ------------------------------------------------------------

    def start(self, nursery: trio.Nursery) -> None:
        """Start the heartbeat task in the consumer's background nursery."""
        self._nursery = nursery
        self._next_auto_commit_ms = now_ms() + self.auto_commit_interval_ms
        nursery.start_soon(self.member.run)

    @property
    def subscribed(self) -> bool:
        m = self.membership
        return m.topics is not None or m.regex is not None or self._resubscribe is not None

    def subscribe(
        self, topics: Iterable[str] | None, regex: str | None, listener: RebalanceListener | None
    ) -> None:
        self.listener = listener
        wanted = (None if topics is None else tuple(topics), regex)
        if self._leaving:
            self._resubscribe = wanted  # joins once unsubscribe()'s leave is done
            return
        self.membership.subscribe(wanted[0], wanted[1], now_ms())
        self.member.wake()

    def unsubscribe(self) -> None:
        """Drop the partitions now; in the background: commit them (auto-commit), the revoke
        listener, then leave (Kafka's unsubscribe(), without blocking)."""
        self._resubscribe = None
        m = self.membership
        if self._leaving or not (m.in_group or m.partitions_lost):
            m.unsubscribe(now_ms())
            self._states().clear()
            return
        lost = m.partitions_lost
        offsets = self._consumed() if self._auto_commit_allowed() else {}
        owned = frozenset(self._states())
        self._states().clear()
        if self._nursery is None:
            m.unsubscribe(now_ms())
            return
        self._leaving = True
        self._left = trio.Event()
        self._nursery.start_soon(self._leave_in_background, offsets, owned, lost)

    async def _leave_in_background(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], owned: frozenset[Any], lost: bool
    ) -> None:
        try:
            await self._commit_quietly(offsets, "unsubscribe")
            await self._notify("on_partitions_lost" if lost else "on_partitions_revoked", owned)
        finally:
            self._leaving = False
            self._left.set()
            self.membership.unsubscribe(now_ms())
            self.member.wake()
            if self._resubscribe is not None:
                topics, regex = self._resubscribe
                self._resubscribe = None
                self.membership.subscribe(topics, regex, now_ms())

    async def close(self, *, commit: bool) -> None:
        """Commit (auto-commit, unless `commit` is False), the revoke (or lost) listener, then
        leave and wait for the coordinator's answer. The caller bounds the time."""
        m = self.membership
        states = self._states()
        if m.in_group and not self._leaving:
            if commit and self._auto_commit_allowed():
                await self._commit_quietly(self._consumed(), "close")
            owned = frozenset(states)
            states.clear()
            await self._notify("on_partitions_revoked", owned)
        elif m.partitions_lost:
            owned = frozenset(states)
            states.clear()
            await self._notify("on_partitions_lost", owned)
        states.clear()
        self._resubscribe = None
        if self._leaving:
            await self._left.wait()
        m.unsubscribe(now_ms())
        self.member.wake()
        while m.state is MemberState.LEAVING:
            await self.member.wait_answered()

    async def aclose(self) -> None:
        await self.coordinator.aclose()

    # ----- inside poll() -------------------------------------------------------------------------

    def raise_if_fatal(self) -> None:
        fatal = self.membership.fatal_error
        if fatal is not None:
            raise error_for_code(fatal[0], f"consumer group {self.group_id!r}", fatal[1])

    async def poll_work(self) -> None:
        """Lost partitions, then a pending reconciliation, then auto-commit. A listener's
        exception is raised once the reconciliation is complete (as Kafka's poll)."""
        self.member.polled()
        self.raise_if_fatal()
        if self._leaving:
            return
        m = self.membership
        error: BaseException | None = None
        if m.partitions_lost:
            lost = frozenset(self._states())
            self._drop(lost)
            error = await self._notify("on_partitions_lost", lost)
            m.lost_handled(now_ms())
            self.member.wake()
        change = m.reconciliation()
        if change is not None:
            error = await self._reconcile(change) or error
        self._maybe_auto_commit()
        if error is not None:
            raise error

    async def _reconcile(self, change: Reconciliation) -> BaseException | None:
        states = self._states()
        error = None
        if change.revoke:
            if self._auto_commit_allowed():
                await self._commit_quietly(self._consumed(change.revoke), "revocation")
            error = await self._notify("on_partitions_revoked", change.revoke)
            self._drop(change.revoke)
        for tp in change.assign:
            if tp not in states:
                states[tp] = PartitionState(reset=self.default_reset, awaits_committed=True)
        self.metadata.set_topics({tp.topic for tp in states})
        if change.assign:
            error = await self._notify("on_partitions_assigned", change.assign) or error
        self.membership.reconciled(frozenset(states), now_ms())
        self._on_change(Outcome())  # a partition back in a newer target is fetched again
        self.member.wake()
        return error

    async def init_positions(self, timeout_ms: float) -> None:
        """Positions of new partitions from the group's committed offsets (OffsetFetch); the
        rest go to auto_offset_reset. A coordinator that does not answer in time is asked
        again at the next poll."""
        states = self._states()
        waiting = [tp for tp, s in states.items() if s.awaits_committed and s.fetchable]
        if not waiting or timeout_ms <= 0:
            return
        try:
            found = await fetch_committed(self.coordinator, waiting, timeout_ms)
        except HighwaterClientError as exc:
            if exc.retriable:
                return
            raise
        for tp in waiting:
            state = states.get(tp)
            if state is None or not state.awaits_committed:
                continue  # revoked or sought meanwhile
            committed = found.get(tp)
            if committed is None:
                state.awaits_committed = False  # auto_offset_reset places it
            else:
                set_position(state, committed.offset, committed.leader_epoch)
                self._committed[tp] = committed.offset

    def _drop(self, partitions: Iterable[TopicPartition]) -> None:
        states = self._states()
        for tp in partitions:
            states.pop(tp, None)
            self._committed.pop(tp, None)

    def _on_change(self, outcome: Outcome) -> None:
        """After each heartbeat: stop fetching what is being revoked or lost (and resume what
        a newer target gives back); wake poll() when it has work."""
        stop = self.membership.stop_fetching()
        for tp, state in self._states().items():
            fetchable = tp not in stop
            if state.fetchable and not fetchable:
                clear_buffer(state)  # back to the position: the rest is fetched again
                if state.position is not None:
                    state.next_fetch_offset = state.position
                    state.fetched_epoch = state.position_epoch
            state.fetchable = fetchable
        if outcome.wake_poll or outcome.stop_fetching:
            self._wakeup()

    async def _notify(self, method: str, partitions: frozenset[Any]) -> BaseException | None:
        """Await the listener's `method`; its exception is logged and returned."""
        listener = self.listener
        if listener is None or not partitions:
            return None
        callback = getattr(listener, method, None)
        if callback is None and method == "on_partitions_lost":
            callback = getattr(listener, "on_partitions_revoked", None)
        if callback is None:
            return None
        try:
            await callback(set(partitions))
        except Exception as exc:
            self._log.warning("rebalance listener failed", callback=method, error=repr(exc))
            return exc
        return None

    # ----- commits -------------------------------------------------------------------------------

    def member_identity(self) -> tuple[str, int]:
        """(member id, epoch) for a commit: the member's own while it is in the group. A
        member fenced, or gone for missing max.poll.interval.ms, cannot commit until it has
        rejoined: as an outsider its commit would pass whenever the group is empty, moving
        offsets its successor may already have passed (Kafka's CommitFailedException)."""
        m = self.membership
        if m.state in (MemberState.FENCED, MemberState.STALE):
            raise CommitFailedError(
                f"this member is no longer in group {self.group_id!r} ({m.state.value}); "
                "it commits again once it has rejoined"
            )
        if m.member_id and m.state in (
            MemberState.STABLE,
            MemberState.RECONCILING,
            MemberState.JOINING,
            MemberState.LEAVING,
        ):
            return m.member_id, m.member_epoch
        return ADMIN_MEMBER

    def _auto_commit_allowed(self) -> bool:
        return self.enable_auto_commit and self.membership.state in (
            MemberState.STABLE,
            MemberState.RECONCILING,
        )

    def _consumed(
        self, partitions: Iterable[TopicPartition] | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata]:
        """The positions of the records poll() returned: what auto-commit commits."""
        states = self._states()
        tps = states if partitions is None else [tp for tp in partitions if tp in states]
        out = {}
        for tp in tps:
            state = states[tp]
            if state.position is not None and not state.awaits_committed:
                out[tp] = OffsetAndMetadata(state.position, None, state.position_epoch)
        return out

    def _maybe_auto_commit(self) -> None:
        now = now_ms()
        if not self.enable_auto_commit or self._nursery is None or now < self._next_auto_commit_ms:
            return
        self._next_auto_commit_ms = now + self.auto_commit_interval_ms
        if self._auto_commit_running or not self._auto_commit_allowed():
            return
        offsets = {
            tp: o for tp, o in self._consumed().items() if self._committed.get(tp) != o.offset
        }
        if offsets:
            self._auto_commit_running = True
            self._nursery.start_soon(self._auto_commit, offsets)

    async def _auto_commit(self, offsets: dict[TopicPartition, OffsetAndMetadata]) -> None:
        try:
            await self._commit_quietly(offsets, "auto-commit")
        finally:
            self._auto_commit_running = False

    async def _commit_quietly(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], why: str
    ) -> None:
        if not offsets:
            return
        try:
            await self.commit(offsets, self.default_api_timeout_ms)
        except HighwaterClientError as exc:
            self._log.warning("offset commit failed", during=why, error=str(exc))

    async def commit(
        self,
        offsets: Offsets | None,
        timeout_ms: float,
    ) -> None:
        committing = self._consumed() if offsets is None else to_offsets(offsets)
        if not committing:
            return
        await commit_offsets(
            self.coordinator,
            committing,
            self.member_identity,
            timeout_ms,
            instance_id=self.instance_id,
        )
        for tp, committed in committing.items():
            self._committed[tp] = committed.offset

    def commit_async(
        self,
        offsets: Offsets | None,
        callback: CommitCallback | None,
    ) -> None:
        if self._nursery is None:
            raise ClientClosedError("commit_async needs the consumer started (`async with`)")
        committing = self._consumed() if offsets is None else to_offsets(offsets)
        self._nursery.start_soon(self._commit_then_call, committing, callback)

    async def _commit_then_call(
        self, offsets: dict[TopicPartition, OffsetAndMetadata], callback: CommitCallback | None
    ) -> None:
        error: Exception | None = None
        try:
            await self.commit(offsets, self.default_api_timeout_ms)
        except HighwaterClientError as exc:
            error = exc
            if callback is None:
                self._log.warning("asynchronous offset commit failed", error=str(exc))
        if callback is not None:
            callback(offsets, error)

    async def committed(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: float
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        return await fetch_committed(
            self.coordinator, [TopicPartition(t, p) for t, p in partitions], timeout_ms
        )
