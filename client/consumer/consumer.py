"""The async consumer (Kafka's KafkaConsumer): assign or subscribe, seek, and poll records in
offset order. The fetch path is fetcher.py, positions (resets, KIP-320 validation) are
positions.py. Not safe for concurrent use by several tasks (as Kafka's consumer).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from types import TracebackType

import trio

from client.consumer.fetcher import Fetcher, FetchSettings
from client.consumer.partition_state import (
    ConsumerRecord,
    PartitionState,
    clear_buffer,
    set_position,
)
from client.consumer.positions import RESETS, Positions
from client.errors import ClientClosedError, HighwaterClientError
from client.metadata import ClusterMetadata, list_offsets
from protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from protocol.topic_partition import TopicPartition

__all__ = ["Consumer"]


class Consumer:
    """`async with Consumer(bootstrap) as c: c.assign([("t", 0)]); await c.poll(1000)`."""

    def __init__(
        self,
        bootstrap: str | Sequence[str],
        *,
        client_id: str = "highwater-consumer",
        auto_offset_reset: str = "latest",
        fetch_min_bytes: int = 1,
        fetch_max_wait_ms: int = 500,
        fetch_max_bytes: int = 52_428_800,
        max_partition_fetch_bytes: int = 1_048_576,
        max_poll_records: int = 500,
        request_timeout_ms: int = 30_000,
        retry_backoff_ms: int = 100,
        retry_backoff_max_ms: int = 1_000,
        default_api_timeout_ms: int = 60_000,
        metadata_max_age_ms: int = 300_000,
    ) -> None:
        if auto_offset_reset not in RESETS:
            raise ValueError(f"auto_offset_reset must be one of {sorted(RESETS)}")
        self.auto_offset_reset = auto_offset_reset
        self.max_poll_records = max_poll_records
        self.request_timeout_ms = request_timeout_ms
        self.retry_backoff_ms = retry_backoff_ms
        self.default_api_timeout_ms = default_api_timeout_ms
        self.metadata = ClusterMetadata(
            bootstrap,
            client_id=client_id,
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

    # ----- lifecycle -----------------------------------------------------------------------

    async def __aenter__(self) -> Consumer:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        self._closed = True
        await self.metadata.aclose()

    # ----- assignment and positions ----------------------------------------------------------

    def assign(self, partitions: Iterable[tuple[str, int]]) -> None:
        """Consume exactly these partitions (replacing any assignment or subscription).
        Positions of partitions already assigned are kept; new ones start at auto_offset_reset."""
        self._subscription = None
        wanted = [TopicPartition(t, p) for t, p in partitions]
        self._set_assignment(wanted)
        self.metadata.set_topics({tp.topic for tp in wanted})

    def subscribe(self, topics: Iterable[str]) -> None:
        """Consume every partition of these topics; partitions added later are picked up on a
        metadata refresh (metadata_max_age_ms). No consumer groups: this consumer reads all."""
        self._subscription = set(topics)
        self.metadata.set_topics(self._subscription)
        self._sync_subscription()

    def unsubscribe(self) -> None:
        self._subscription = None
        self._states.clear()

    def assignment(self) -> set[TopicPartition]:
        return set(self._states)

    def subscription(self) -> set[str]:
        return set(self._subscription or ())

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
        if state.position is None:
            await self._positions.resolve_resets(
                self._states, self.default_api_timeout_ms, quiet=False
            )
        assert state.position is not None
        return state.position

    def highwater(self, partition: tuple[str, int]) -> int | None:
        """The partition's high watermark as of the last fetch (None before one)."""
        hw = self._state(partition).high_watermark
        return None if hw < 0 else hw

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
        at most timeout_ms for some to arrive; [] if none did."""
        if self._closed:
            raise ClientClosedError("consumer is closed")
        if not self._states and self._subscription is None:
            raise HighwaterClientError("poll without assign() or subscribe()")
        limit = self.max_poll_records if max_records is None else max_records
        deadline = trio.current_time() + max(0.0, timeout_ms) / 1000
        while True:
            await self.metadata.maybe_refresh()
            self._sync_subscription()
            if any(s.position is None for s in self._states.values()):
                await self._positions.resolve_resets(
                    self._states, max(0.0, (deadline - trio.current_time()) * 1000), quiet=True
                )
            records = self._fetcher.drain(self._states, limit)
            if records:
                return records
            remaining = deadline - trio.current_time()
            if remaining <= 0:
                return []
            await self._positions.validate(self._states)
            await self._fetcher.fetch_round(self._states, deadline)
