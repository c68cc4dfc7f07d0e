"""The async consumer (Kafka's KafkaConsumer): assign or subscribe, seek, and poll records in
offset order; with a group_id, a member of a consumer group (KIP-848: the coordinator assigns
the partitions; group_session.py). The fetch path is fetcher.py, positions (resets, KIP-320
validation) are positions.py. Not safe for concurrent use by several tasks (as Kafka's).
"""

from __future__ import annotations

import contextlib
import functools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType

import trio

from client.consumer.commits import OffsetAndMetadata, Offsets
from client.consumer.config import CONSUMER_DEFAULTS as _D
from client.consumer.config import ConsumerConfig
from client.consumer.fetcher import Fetcher, FetchSettings
from client.consumer.group import RebalanceListener
from client.consumer.group_session import CommitCallback, GroupSession
from client.consumer.partition_state import (
    ConsumerRecord,
    PartitionState,
    clear_buffer,
    set_position,
)
from client.consumer.positions import RESETS, Positions
from client.errors import ClientClosedError, HighwaterClientError, HighwaterTimeoutError
from client.lifecycle import close_then_exit, open_background
from client.metadata import ClusterMetadata, list_offsets
from client.security import ClientSecurity
from protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from protocol.topic_partition import TopicPartition

__all__ = ["Consumer", "GroupMetadata"]

# How long close() waits, with an exception on its way, to leave the group.
_LEAVE_ON_ERROR_TIMEOUT_S = 5.0
_CHECKPOINT_INTERVAL_S = 0.02


@dataclass(frozen=True, slots=True)
class GroupMetadata:
    """The consumer's place in its group (Kafka's ConsumerGroupMetadata)."""

    group_id: str
    member_id: str  # "" until the coordinator names it
    member_epoch: int
    instance_id: str | None
    state: str  # unsubscribed, joining, stable, reconciling, fenced, leaving, stale, fatal


class Consumer:
    """`async with Consumer(bootstrap) as c: c.assign([("t", 0)]); await c.poll(1000)`."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = _D.client_id,
        security: ClientSecurity | Mapping[str, str] | None = None,
        auto_offset_reset: str = _D.auto_offset_reset,
        fetch_min_bytes: int = _D.fetch_min_bytes,
        fetch_max_wait_ms: int = _D.fetch_max_wait_ms,
        fetch_max_bytes: int = _D.fetch_max_bytes,
        max_partition_fetch_bytes: int = _D.max_partition_fetch_bytes,
        max_poll_records: int = _D.max_poll_records,
        request_timeout_ms: int = _D.request_timeout_ms,
        retry_backoff_ms: int = _D.retry_backoff_ms,
        retry_backoff_max_ms: int = _D.retry_backoff_max_ms,
        default_api_timeout_ms: int = _D.default_api_timeout_ms,
        metadata_max_age_ms: int = _D.metadata_max_age_ms,
        group_id: str | None = None,
        group_instance_id: str | None = None,
        enable_auto_commit: bool = _D.enable_auto_commit,
        auto_commit_interval_ms: int = _D.auto_commit_interval_ms,
        max_poll_interval_ms: int = _D.max_poll_interval_ms,
        group_remote_assignor: str | None = None,
    ) -> None:
        """The keyword arguments are Kafka's consumer settings (client/settings.py, listed in
        docs/client-settings.md); `self.config` holds them, checked (ValueError)."""
        self.config = ConsumerConfig(
            client_id=client_id,
            auto_offset_reset=auto_offset_reset,
            fetch_min_bytes=fetch_min_bytes,
            fetch_max_wait_ms=fetch_max_wait_ms,
            fetch_max_bytes=fetch_max_bytes,
            max_partition_fetch_bytes=max_partition_fetch_bytes,
            max_poll_records=max_poll_records,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=retry_backoff_max_ms,
            default_api_timeout_ms=default_api_timeout_ms,
            metadata_max_age_ms=metadata_max_age_ms,
            group_id=group_id,
            group_instance_id=group_instance_id,
            enable_auto_commit=enable_auto_commit,
            auto_commit_interval_ms=auto_commit_interval_ms,
            max_poll_interval_ms=max_poll_interval_ms,
            group_remote_assignor=group_remote_assignor,
        )
        self.auto_offset_reset = auto_offset_reset
        self.max_poll_records = max_poll_records
        self.auto_commit_interval_ms = auto_commit_interval_ms
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self.metadata = ClusterMetadata(
            bootstrap,
            client_id=client_id,
            security=security,
            request_timeout_ms=request_timeout_ms,
            retry_backoff_ms=retry_backoff_ms,
            metadata_max_age_ms=metadata_max_age_ms,
        )
        self._fetcher = Fetcher(
            self.metadata,
            FetchSettings(
                fetch_min_bytes=fetch_min_bytes,
                fetch_max_wait_ms=fetch_max_wait_ms,
                fetch_max_bytes=fetch_max_bytes,
                max_partition_fetch_bytes=max_partition_fetch_bytes,
                request_timeout_ms=request_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                retry_backoff_max_ms=max(retry_backoff_ms, retry_backoff_max_ms),
                default_reset=RESETS[auto_offset_reset],
            ),
        )
        self._positions = Positions(self._fetcher)
        self._states: dict[TopicPartition, PartitionState] = {}
        self._subscription: set[str] | None = None
        self._closed = False
        self._group: GroupSession | None = None
        if group_id is not None:
            self._group = GroupSession(
                self.metadata,
                lambda: self._states,
                self._wakeup,
                group_id=group_id,
                instance_id=group_instance_id,
                enable_auto_commit=enable_auto_commit,
                auto_commit_interval_ms=auto_commit_interval_ms,
                max_poll_interval_ms=max_poll_interval_ms,
                server_assignor=group_remote_assignor,
                request_timeout_ms=request_timeout_ms,
                retry_backoff_ms=retry_backoff_ms,
                retry_backoff_max_ms=retry_backoff_max_ms,
                default_api_timeout_ms=default_api_timeout_ms,
                default_reset=RESETS[auto_offset_reset],
            )
        self._exit_stack: contextlib.AsyncExitStack | None = None
        self._background_scope = trio.CancelScope()
        self._fetch_scope: trio.CancelScope | None = None  # poll's wait, for _wakeup
        self._next_checkpoint = 0.0  # poll's next schedule point (trio time)

    # ----- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> Consumer:
        if self._exit_stack is not None:
            raise RuntimeError("a Consumer can be entered once")
        self._exit_stack = await open_background(self._run_background)
        return self

    async def _run_background(self, task_status: trio.TaskStatus[None]) -> None:
        """The group's heartbeat and commit tasks, under a cancel scope of their own: closing
        cancels them, never the body of the caller's `async with`."""
        with self._background_scope:
            async with trio.open_nursery() as nursery:
                if self._group is not None:
                    self._group.start(nursery)
                task_status.started()
                await trio.sleep_forever()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> bool | None:
        close = functools.partial(self.aclose, commit=exc is None)
        if self._exit_stack is None:
            await close()
            return None
        return await close_then_exit(self._exit_stack, close, exc_type, exc, tb)

    async def aclose(self, timeout_ms: float = 30_000, *, commit: bool = True) -> None:
        """Close: a group member commits (auto-commit; not when `commit` is False), calls the
        revoke listener and leaves the group, within timeout_ms; then connections close."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._group is not None and self._exit_stack is not None:
                if commit:
                    with trio.move_on_after(timeout_ms / 1000):
                        await self._group.close(commit=True)
                else:
                    # An error (or a cancellation) is on its way out: still leave the group,
                    # briefly, so the partitions move now rather than after the session timeout.
                    with (
                        trio.CancelScope(shield=True),
                        trio.move_on_after(min(timeout_ms / 1000, _LEAVE_ON_ERROR_TIMEOUT_S)),
                    ):
                        await self._group.close(commit=False)
        finally:
            self._background_scope.cancel()
            if self._group is not None:
                await self._group.aclose()
            await self.metadata.aclose()

    # ----- assignment and positions ----------------------------------------------------------

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Consume exactly these partitions (replacing any assignment or subscription).
        Positions of partitions already assigned are kept; new ones start at auto_offset_reset.
        With a group_id, commit() and committed() still work (as a commit from outside the
        group, which the coordinator accepts only while the group has no members)."""
        if self._group is not None and self._group.subscribed:
            raise HighwaterClientError(
                f"assign() while subscribed to group {self._group.group_id!r}: unsubscribe() first"
            )
        self._subscription = None
        wanted = [TopicPartition(t, p) for t, p in partitions]
        self._set_assignment(wanted)
        self.metadata.set_topics({tp.topic for tp in wanted})

    def subscribe(
        self,
        topics: Iterable[str] | re.Pattern[str],
        *,
        listener: RebalanceListener | None = None,
    ) -> None:
        """Consume these topics (or those whose name matches a compiled pattern).

        With a group_id: join the group; its coordinator assigns this member a share of the
        partitions (KIP-848) and may move them; `listener` is told of each change inside
        poll(). A pattern is the coordinator's to resolve. Without a group_id: every partition
        of the topics (no pattern), picked up again on each metadata refresh."""
        if isinstance(topics, str):
            raise TypeError("subscribe() takes a list of topics or a compiled re.Pattern")
        if self._group is not None:
            if isinstance(topics, re.Pattern):
                self._group.subscribe(None, topics.pattern, listener)
            else:
                self._group.subscribe(sorted(set(topics)), None, listener)
            self._subscription = None
            return
        if isinstance(topics, re.Pattern) or listener is not None:
            raise HighwaterClientError(
                "a pattern subscription or a rebalance listener needs a group_id"
            )
        self._subscription = set(topics)
        self.metadata.set_topics(self._subscription)
        self._sync_subscription()

    def unsubscribe(self) -> None:
        """Stop consuming. A group member drops its partitions at once and, in the background,
        commits them (auto-commit), calls the revoke listener and leaves the group."""
        self._subscription = None
        if self._group is not None:
            self._group.unsubscribe()
        self._states.clear()

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def subscription(self) -> set[str]:
        if self._group is not None:
            return set(self._group.membership.topics or ())
        return set(self._subscription or ())

    def group_metadata(self) -> GroupMetadata | None:
        """The group member's id, epoch and state (None without a group_id)."""
        if self._group is None:
            return None
        m = self._group.membership
        return GroupMetadata(m.group_id, m.member_id, m.member_epoch, m.instance_id, m.state.value)

    def seek(self, partition: tuple[str, int], offset: int) -> None:
        """The next poll returns `partition` from `offset` (out of range: auto_offset_reset)."""
        if offset < 0:
            raise ValueError("offset must be >= 0")
        set_position(self._state(partition), offset)

    def seek_to_beginning(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Lazily (at the next poll/position) move to the log start offset."""
        self._request_reset(partitions, EARLIEST_TIMESTAMP)

    def seek_to_end(self, partitions: Iterable[tuple[str, int]] | None = None) -> None:
        """Lazily move to the end: the high watermark, what a consumer can read up to."""
        self._request_reset(partitions, LATEST_TIMESTAMP)

    def seek_to_timestamp(
        self, timestamp_ms: int, partitions: Iterable[tuple[str, int]] | None = None
    ) -> None:
        """Lazily move to the first offset whose timestamp >= timestamp_ms (none: the end)."""
        if timestamp_ms < 0:
            raise ValueError("timestamp_ms must be >= 0")
        self._request_reset(partitions, timestamp_ms)

    async def position(self, partition: tuple[str, int]) -> int:
        """The offset of the next record poll returns for `partition` (resolving a reset)."""
        state = self._state(partition)
        if state.position is None and state.awaits_committed and self._group is not None:
            await self._group.init_positions(self.default_api_timeout_ms)
        if state.position is None:
            await self._positions.resolve_resets(
                self._states, self.default_api_timeout_ms, quiet=False
            )
        if state.position is None:
            raise HighwaterTimeoutError(
                f"no position for {partition[0]}-{partition[1]} yet: its committed offset did "
                "not arrive in time"
            )
        return state.position

    def highwater(self, partition: tuple[str, int]) -> int | None:
        """The partition's high watermark as of the last fetch (None before one)."""
        hw = self._state(partition).high_watermark
        return None if hw < 0 else hw

    def lag(self) -> dict[TopicPartition, int]:
        """Records behind, per assigned partition: HW (as of the last fetch) - position.
        Partitions not fetched yet, or with a reset pending, are left out."""
        return {
            tp: max(0, state.high_watermark - state.position)
            for tp, state in self._states.items()
            if state.high_watermark >= 0 and state.position is not None
        }

    def metrics(self) -> dict[str, float]:
        """Kafka's consumer metrics by name: records-consumed-total/-rate,
        bytes-consumed-rate, fetch-latency-avg/-max (ms), records-lag-max and
        records-lag:<topic>-<partition> (HW - position) (client/client_metrics.py)."""
        return self._fetcher.metrics.snapshot(self.lag())

    async def end_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        """The high watermark (ListOffsets latest) of each partition."""
        return await self._offsets(partitions, LATEST_TIMESTAMP, timeout_ms)

    async def beginning_offsets(
        self, partitions: Iterable[tuple[str, int]], timeout_ms: float | None = None
    ) -> dict[TopicPartition, int]:
        return await self._offsets(partitions, EARLIEST_TIMESTAMP, timeout_ms)

    async def offsets_for_times(
        self, timestamps: dict[tuple[str, int], int], timeout_ms: float | None = None
    ) -> dict[TopicPartition, tuple[int, int] | None]:
        """(offset, timestamp) of the first record at or after each timestamp (None: none)."""
        found = await list_offsets(
            self.metadata,
            {(t, p): ts for (t, p), ts in timestamps.items()},
            timeout_ms=self.default_api_timeout_ms if timeout_ms is None else timeout_ms,
        )
        return {
            TopicPartition(*tp): (value if value[0] >= 0 else None) for tp, value in found.items()
        }

    async def partitions_for(self, topic: str) -> tuple[int, ...]:
        return await self.metadata.wait_for_topic(topic, self.default_api_timeout_ms)

    async def _offsets(
        self, partitions: Iterable[tuple[str, int]], timestamp: int, timeout_ms: float | None
    ) -> dict[TopicPartition, int]:
        found = await list_offsets(
            self.metadata,
            {(t, p): timestamp for t, p in partitions},
            timeout_ms=self.default_api_timeout_ms if timeout_ms is None else timeout_ms,
        )
        return {TopicPartition(*tp): offset for tp, (offset, _) in found.items()}

    def _state(self, partition: tuple[str, int]) -> PartitionState:
        state = self._states.get(TopicPartition(*partition))
        if state is None:
            raise HighwaterClientError(f"{partition[0]}-{partition[1]} is not assigned")
        return state

    def _request_reset(self, partitions: Iterable[tuple[str, int]] | None, reset: int) -> None:
        targets = list(self._states) if partitions is None else list(partitions)
        for tp in targets:
            state = self._state(tp)
            state.position = None
            state.position_epoch = None
            state.reset = reset
            state.awaits_committed = False
            clear_buffer(state)

    def _set_assignment(self, wanted: Iterable[TopicPartition]) -> None:
        states = {}
        for tp in wanted:
            state = self._states.get(tp)
            states[tp] = (
                state
                if state is not None
                else PartitionState(reset=self._fetcher.settings.default_reset)
            )
        self._states = states

    def _sync_subscription(self) -> None:
        if self._subscription is None:
            return
        wanted = [
            TopicPartition(topic, p)
            for topic in sorted(self._subscription)
            for p in self.metadata.partitions_for(topic) or ()
        ]
        if set(wanted) != set(self._states):
            self._set_assignment(wanted)

    # ----- poll --------------------------------------------------------------------------------

    async def poll(
        self, timeout_ms: float = 1_000, max_records: int | None = None
    ) -> list[ConsumerRecord]:
        """Records after the current positions (offset order within each partition), waiting
        at most timeout_ms for some to arrive; [] if none did. A group member also takes on
        assignment changes here (awaiting the rebalance listener) and auto-commits."""
        if self._closed:
            raise ClientClosedError("consumer is closed")
        group = self._group
        if group is not None and group.subscribed and self._exit_stack is None:
            raise ClientClosedError(
                "a consumer in a group needs `async with` (its heartbeats run in the background)"
            )
        if not self._states and self._subscription is None and not (group and group.subscribed):
            raise HighwaterClientError("poll without assign() or subscribe()")
        limit = self.max_poll_records if max_records is None else max_records
        deadline = trio.current_time() + max(0.0, timeout_ms) / 1000
        while True:
            # A schedule point before records leave the buffer, at least every 20 ms: a Ctrl-C
            # (a cancellation) lands here even while buffered records keep poll from waiting,
            # never after a drain; not on every poll, which would cost the hot path.
            if trio.current_time() >= self._next_checkpoint:
                await trio.lowlevel.checkpoint()
                self._next_checkpoint = trio.current_time() + _CHECKPOINT_INTERVAL_S
            if group is not None:
                await group.poll_work()
            await self.metadata.maybe_refresh()
            self._sync_subscription()
            if any(s.position is None for s in self._states.values()):
                remaining_ms = max(0.0, (deadline - trio.current_time()) * 1000)
                if group is not None:
                    await group.init_positions(remaining_ms)
                await self._positions.resolve_resets(self._states, remaining_ms, quiet=True)
            records = self._fetcher.drain(self._states, limit)
            if records:
                self._fetcher.metrics.records_consumed += len(records)
                return records
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                return []
            await self._positions.validate(self._states)
            with trio.CancelScope() as self._fetch_scope:
                await self._fetcher.fetch_round(self._states, deadline)
            self._fetch_scope = None
            self._next_checkpoint = trio.current_time() + _CHECKPOINT_INTERVAL_S

    def _wakeup(self) -> None:
        """The group has work for poll(): end its wait for a fetch now."""
        if self._fetch_scope is not None:
            self._fetch_scope.cancel()

    # ----- committed offsets (a group_id is needed) ----------------------------------------------

    def _needs_group(self) -> GroupSession:
        if self._group is None:
            raise HighwaterClientError("committed offsets need a group_id")
        return self._group

    async def commit(
        self,
        offsets: Offsets | None = None,
        *,
        timeout_ms: float | None = None,
    ) -> None:
        """Commit `offsets` (the next offset to read, per partition), or the positions of
        what poll() returned for every assigned partition; wait for the coordinator. Retries
        until timeout_ms (default_api_timeout_ms). CommitFailedError when the member is no
        longer in the group."""
        group = self._needs_group()
        await group.commit(
            offsets, self.default_api_timeout_ms if timeout_ms is None else timeout_ms
        )

    def commit_async(
        self,
        offsets: Offsets | None = None,
        callback: CommitCallback | None = None,
    ) -> None:
        """As commit(), in the background; `callback(offsets, error or None)` when done."""
        self._needs_group().commit_async(offsets, callback)

    async def committed(
        self, partitions: Iterable[tuple[str, int]], *, timeout_ms: float | None = None
    ) -> dict[TopicPartition, OffsetAndMetadata | None]:
        """The group's committed offsets of these partitions (None: none committed)."""
        group = self._needs_group()
        return await group.committed(
            partitions, self.default_api_timeout_ms if timeout_ms is None else timeout_ms
        )
