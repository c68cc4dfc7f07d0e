"""Where each partition's position comes from and whether it still holds (Kafka's
OffsetFetcher): pending resets resolved with ListOffsets (seek_to_*, auto_offset_reset), and
KIP-320 validation with OffsetForLeaderEpoch after a leader change, which raises
LogTruncationError when the consumed records were truncated away."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

import trio

from client.consumer.fetcher import LEADER_ERRORS, Fetcher
from client.consumer.partition_state import PartitionState, set_position
from client.errors import (
    HighwaterClientError,
    LogTruncationError,
    OffsetOutOfRangeError,
    error_for_code,
)
from client.metadata import list_offsets
from client.network import BrokerConnectionError
from protocol.errors import ErrorCode
from protocol.messages.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochPartitionResult,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochTopic,
)
from protocol.topic_partition import TopicPartition

__all__ = ["RESETS", "Positions", "truncation_offset"]

RESETS: Final = {"earliest": EARLIEST_TIMESTAMP, "latest": LATEST_TIMESTAMP, "none": None}

States = Mapping[TopicPartition, PartitionState]


def truncation_offset(
    position: int, position_epoch: int, leader_epoch: int, end_offset: int
) -> int | None:
    """KIP-320: the first offset known to diverge, or None if the position is valid.

    `position_epoch` is the epoch of the record consumed before `position`; (leader_epoch,
    end_offset) the leader's OffsetForLeaderEpoch answer for it: the largest epoch <= it that
    the leader has, and where that epoch ends in the leader's log. The log was truncated below
    the position if that end is before it, or if the leader never had the epoch (its records
    at those offsets carry an older one, so the last record consumed is not among them).
    An undefined answer (-1) means the leader has no epoch information: nothing to check.
    """
    if leader_epoch < 0 or end_offset < 0:
        return None
    if end_offset < position:
        return end_offset
    if leader_epoch < position_epoch:
        return position - 1
    return None


class Positions:
    def __init__(self, fetcher: Fetcher) -> None:
        self.fetcher = fetcher
        self.metadata = fetcher.metadata

    # ----- resets ------------------------------------------------------------------------------

    async def resolve_resets(self, states: States, timeout_ms: float, *, quiet: bool) -> None:
        """ListOffsets for partitions whose position is pending; raise OffsetOutOfRangeError
        for those without a strategy ("none"). `quiet`: leave unresolved ones for later."""
        # Twice: a timestamp with no record at/after it turns into a "latest" reset.
        for _ in range(2):
            await self._resolve_resets_once(states, timeout_ms, quiet=quiet)
            if all(s.position is not None for s in _resettable(states).values()):
                return

    async def _resolve_resets_once(self, states: States, timeout_ms: float, *, quiet: bool) -> None:
        pending = {tp: s for tp, s in _resettable(states).items() if s.position is None}
        none = {tp: -1 for tp, s in pending.items() if s.reset is None}
        if none:
            raise OffsetOutOfRangeError(
                "OFFSET_OUT_OF_RANGE: no position and auto_offset_reset is 'none' for "
                + ", ".join(f"{t}-{p}" for t, p in none),
                {(tp.topic, tp.partition): pos for tp, pos in none.items()},
            )
        if not pending:
            return
        timestamps = {
            (tp.topic, tp.partition): s.reset for tp, s in pending.items() if s.reset is not None
        }
        try:
            found = await list_offsets(
                self.metadata, timestamps, timeout_ms=timeout_ms, partial=quiet
            )
        except HighwaterClientError:
            if quiet:
                return  # as Kafka's poll: retried on the next round (e.g. a topic being created)
            raise
        for tp, (offset, _) in found.items():
            state = states.get(TopicPartition(*tp))
            if state is None or state.position is not None or state.awaits_committed:
                continue
            if offset < 0:
                state.reset = LATEST_TIMESTAMP  # no record at/after the timestamp: the end
                continue
            set_position(state, offset)  # as Kafka: a reset position is not validated

    # ----- validation (KIP-320) ------------------------------------------------------------------

    async def validate(self, states: States) -> None:
        """OffsetForLeaderEpoch (one request per leader, concurrently) for the positions whose
        partition has a new leader epoch since they were fetched; LogTruncationError if a
        leader's log no longer holds what was consumed."""
        now = trio.current_time()
        by_leader: dict[int, list[tuple[TopicPartition, int]]] = {}
        for tp, state in states.items():
            if state.position is None or state.buffer or state.retry_at > now:
                continue
            if not state.fetchable:
                continue
            info = self.metadata.partition_info(*tp)
            if info is None or not state.awaits_validation(info.leader_epoch):
                continue
            leader = self.metadata.leader_for(*tp)
            if leader is None:
                self.metadata.request_update()
                continue
            by_leader.setdefault(leader, []).append((tp, info.leader_epoch))
        if not by_leader:
            return
        errors: list[HighwaterClientError] = []
        async with trio.open_nursery() as nursery:
            for leader, wanted in by_leader.items():
                nursery.start_soon(self._validate_at, states, leader, wanted, errors)
        if errors:
            raise errors[0]

    async def _validate_at(
        self,
        states: States,
        leader: int,
        wanted: list[tuple[TopicPartition, int]],
        errors: list[HighwaterClientError],
    ) -> None:
        asked: dict[TopicPartition, tuple[int, int, int]] = {}  # position, its epoch, current
        topics: dict[str, list[OffsetForLeaderEpochPartition]] = {}
        for tp, current_epoch in wanted:
            state = states[tp]
            assert state.position is not None and state.position_epoch is not None
            asked[tp] = (state.position, state.position_epoch, current_epoch)
            topics.setdefault(tp.topic, []).append(
                OffsetForLeaderEpochPartition(tp.partition, state.position_epoch, current_epoch)
            )
        request = OffsetForLeaderEpochRequest(
            tuple(OffsetForLeaderEpochTopic(t, tuple(ps)) for t, ps in topics.items())
        )
        try:
            response: OffsetForLeaderEpochResponse = await self.metadata.request(
                leader, request, timeout_ms=self.fetcher.settings.request_timeout_ms
            )
        except BrokerConnectionError:
            self.metadata.request_update()
            self.fetcher.back_off(states, asked)
            return
        for topic_result in response.topics:
            for result in topic_result.partitions:
                tp = TopicPartition(topic_result.topic, result.partition)
                current = states.get(tp)
                if tp not in asked or current is None:
                    continue
                position, position_epoch, current_epoch = asked[tp]
                if (current.position, current.position_epoch) != (position, position_epoch):
                    continue  # sought meanwhile: the answer is about another position
                try:
                    self._complete_validation(states, tp, current, current_epoch, result)
                except HighwaterClientError as exc:
                    errors.append(exc)

    def _complete_validation(
        self,
        states: States,
        tp: TopicPartition,
        state: PartitionState,
        current_epoch: int,
        result: OffsetForLeaderEpochPartitionResult,
    ) -> None:
        code = result.error_code
        if code == ErrorCode.NONE:
            assert state.position is not None and state.position_epoch is not None
            divergent = truncation_offset(
                state.position, state.position_epoch, result.leader_epoch, result.end_offset
            )
            if divergent is not None:
                # The position stays unvalidated: every poll raises this until a seek.
                raise LogTruncationError(tp.topic, tp.partition, state.position, divergent)
            state.leader_epoch = current_epoch
            state.failures = 0
            return
        if code in LEADER_ERRORS or ErrorCode(code).retriable:
            self.metadata.request_update()
            self.fetcher.back_off(states, [tp])
            return
        raise error_for_code(code, f"offset for leader epoch of {tp.topic}-{tp.partition}")


def _resettable(states: States) -> dict[TopicPartition, PartitionState]:
    """Partitions a reset may place: not waiting for a committed offset, not being let go."""
    return {tp: s for tp, s in states.items() if s.fetchable and not s.awaits_committed}
