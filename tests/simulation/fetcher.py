"""The follower side of a simulated broker: replica_fetcher._ReplicaFetcher, synchronously.

One fetcher per (follower, leader) pair, one request in flight. Partitions that just became
followers first truncate (KIP-101 step 4, KIP-279's iteration: OffsetForLeaderEpoch and
`broker.core.replication.truncation_for`), then fetch from their LEO; every answer is checked
against the partition's current leader and epoch before it is applied, as in the real one.
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from broker.core.partition import Partition
from broker.core.replication import truncation_for
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.fetch import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochTopic,
)
from tests.simulation.world import World
from tests.simulation.zk import TopicPartition

if TYPE_CHECKING:
    from tests.simulation.broker import SimBroker

__all__ = ["FetchState", "ReplicaFetcher", "whole_batches"]

_LOG_OVERHEAD = 12
_BATCH_LENGTH = struct.Struct(">i")


@dataclass(slots=True)
class FetchState:
    """replica_fetcher._FetchState."""

    leader_epoch: int
    truncating: bool = True
    delayed_until_ms: int = 0


class ReplicaFetcher:
    """replica_fetcher._ReplicaFetcher: one request at a time to one leader, truncating
    partitions first (KIP-101/279), then fetching the rest from their LEOs."""

    def __init__(self, broker: SimBroker, leader_id: int) -> None:
        self.broker = broker
        self.leader_id = leader_id
        self.partitions: dict[TopicPartition, FetchState] = {}
        self.stopped = False
        self._in_flight = False
        self._wake_at_ms: int | None = None

    @property
    def _world(self) -> World:
        return self.broker.world

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = FetchState(leader_epoch)
        self.wake(0)

    def wake(self, delay_ms: int) -> None:
        at_ms = self.broker.now_ms + delay_ms
        if self._wake_at_ms is not None and self._wake_at_ms <= at_ms:
            return
        self._wake_at_ms = at_ms

        def run() -> None:
            if self._wake_at_ms == at_ms:
                self._wake_at_ms = None
            self._run_once()

        self.broker.after(delay_ms, f"fetcher->b{self.leader_id} runs", run)

    def _run_once(self) -> None:
        if self.stopped or self._in_flight or not self.partitions:
            return
        now_ms = self.broker.now_ms
        truncating = [
            tp for tp, s in self.partitions.items() if s.truncating and s.delayed_until_ms <= now_ms
        ]
        if truncating:
            self._truncate(truncating)
            return
        ready = [
            tp
            for tp, s in self.partitions.items()
            if not s.truncating and s.delayed_until_ms <= now_ms
        ]
        if not ready:
            wake_at = min(s.delayed_until_ms for s in self.partitions.values())
            self.wake(wake_at - now_ms)
            return
        self._fetch(ready)

    def _partition(self, tp: TopicPartition, state: FetchState) -> Partition | None:
        partition = self.broker.partitions.get(tp)
        if (
            self.partitions.get(tp) is not state
            or partition is None
            or partition.leader_id != self.leader_id
            or partition.leader_epoch != state.leader_epoch
        ):
            return None
        return partition

    def _drop_stale(self, tp: TopicPartition, state: FetchState) -> None:
        """The partition no longer follows this leader in this epoch (LeaderAndIsr should
        have told the manager): stop fetching it rather than spin on it."""
        if self.partitions.get(tp) is state:
            del self.partitions[tp]
            self._world.trace(f"b{self.broker.broker_id} dropped a stale fetch state for {tp}")

    def _delay(self, state: FetchState) -> None:
        state.delayed_until_ms = self.broker.now_ms + self._world.config.replica_fetch_backoff_ms

    def _send(
        self, payload: object, timeout_ms: int, on_response: Callable[[object], None]
    ) -> None:
        self._in_flight = True

        def answered(response: object) -> None:
            self._in_flight = False
            if self.stopped:
                return
            on_response(response)
            self.wake(0)

        def failed() -> None:
            # "fetcher connection failed": reconnect after the backoff.
            self._in_flight = False
            if not self.stopped:
                self.wake(self._world.config.replica_fetch_backoff_ms)

        self._world.net.request(
            self.broker.broker_id,
            self.leader_id,
            payload,
            timeout_ms=timeout_ms,
            on_response=answered,
            on_timeout=failed,
            label=f"{type(payload).__name__} b{self.broker.broker_id}->b{self.leader_id}",
        )

    # -- truncation (KIP-101 / KIP-279) ----------------------------------------------------

    def _truncate(self, tps: list[TopicPartition]) -> None:
        states = {tp: self.partitions[tp] for tp in tps}
        asked: dict[TopicPartition, int] = {}
        by_topic: dict[str, list[OffsetForLeaderEpochPartition]] = {}
        for tp, state in states.items():
            partition = self._partition(tp, state)
            if partition is None:
                self._drop_stale(tp, state)
                continue
            asked[tp] = partition.log.latest_epoch()
            by_topic.setdefault(tp[0], []).append(
                OffsetForLeaderEpochPartition(tp[1], asked[tp], state.leader_epoch)
            )
        if not by_topic:
            self.wake(0)
            return
        request = OffsetForLeaderEpochRequest(
            tuple(OffsetForLeaderEpochTopic(t, tuple(ps)) for t, ps in sorted(by_topic.items())),
            replica_id=self.broker.broker_id,
        )

        def on_response(response: object) -> None:
            assert isinstance(response, OffsetForLeaderEpochResponse)
            self._truncated(states, asked, response)

        self._send(request, self._world.config.request_timeout_ms, on_response)

    def _truncated(
        self,
        states: dict[TopicPartition, FetchState],
        asked: dict[TopicPartition, int],
        response: OffsetForLeaderEpochResponse,
    ) -> None:
        for topic in response.topics:
            for answer in topic.partitions:
                tp = (topic.topic, answer.partition)
                state = states.get(tp)
                partition = self._partition(tp, state) if state is not None else None
                if partition is None or state is None or tp not in asked:
                    continue
                if answer.error_code != ErrorCode.NONE:
                    self._delay(state)
                    continue
                decision = truncation_for(
                    asked[tp],
                    answer.leader_epoch,
                    answer.end_offset,
                    partition.log_end_offset,
                    partition.high_watermark,
                    partition.log.end_offset_for_epoch,
                )
                before = partition.log_end_offset
                partition.truncate_to(decision.offset)
                self._world.trace(
                    f"b{self.broker.broker_id} {tp[0]}-{tp[1]}: asked epoch {asked[tp]}, leader "
                    f"b{self.leader_id} said (epoch {answer.leader_epoch}, end "
                    f"{answer.end_offset}); LEO {before} -> {partition.log_end_offset}"
                    + ("" if decision.complete else f", ask again for {decision.next_epoch}")
                )
                if decision.complete:
                    state.truncating = False

    # -- fetching --------------------------------------------------------------------------

    def _fetch(self, tps: list[TopicPartition]) -> None:
        config = self._world.config
        states = {tp: self.partitions[tp] for tp in tps}
        offsets: dict[TopicPartition, int] = {}
        by_topic: dict[str, list[FetchPartition]] = {}
        for tp, state in states.items():
            partition = self._partition(tp, state)
            if partition is None:
                self._drop_stale(tp, state)
                continue
            offsets[tp] = partition.log_end_offset
            by_topic.setdefault(tp[0], []).append(
                FetchPartition(
                    tp[1],
                    offsets[tp],
                    self._world.replica_fetch_max_bytes,
                    current_leader_epoch=state.leader_epoch,
                    log_start_offset=partition.log.log_start_offset,
                )
            )
        if not by_topic:
            self.wake(0)
            return
        request = FetchRequest(
            replica_id=self.broker.broker_id,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=self._world.replica_fetch_max_bytes,
            topics=tuple(FetchTopic(t, tuple(ps)) for t, ps in sorted(by_topic.items())),
            replica_epoch=self.broker.broker_epoch,
        )

        def on_response(response: object) -> None:
            assert isinstance(response, FetchResponse)
            self._fetched(states, offsets, response)

        self._send(
            request, config.request_timeout_ms + config.replica_fetch_wait_max_ms, on_response
        )

    def _fetched(
        self,
        states: dict[TopicPartition, FetchState],
        offsets: dict[TopicPartition, int],
        response: FetchResponse,
    ) -> None:
        now_ms = self.broker.now_ms
        for topic in response.responses:
            for data in topic.partitions:
                tp = (topic.topic, data.partition_index)
                state = states.get(tp)
                partition = self._partition(tp, state) if state is not None else None
                if partition is None or state is None or tp not in offsets:
                    continue
                if partition.log_end_offset != offsets[tp]:
                    continue  # truncated meanwhile; this data may not continue our log
                self._apply(state, partition, data, now_ms)

    def _apply(
        self, state: FetchState, partition: Partition, data: FetchPartitionData, now_ms: int
    ) -> None:
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(state, partition, data.log_start_offset, now_ms)
            return
        if data.error_code != ErrorCode.NONE:
            self._delay(state)
            return
        records = whole_batches(data.records)
        try:
            partition.append_as_follower(records, data.high_watermark, now_ms)
        except (HighwaterError, OSError) as exc:
            self._world.trace(
                f"b{self.broker.broker_id} {partition.topic}-{partition.index}: follower "
                f"append failed ({exc}); truncating again"
            )
            state.truncating = True
            self._delay(state)

    def _out_of_range(
        self, state: FetchState, partition: Partition, leader_log_start_offset: int, now_ms: int
    ) -> None:
        if leader_log_start_offset >= 0 and partition.log_end_offset < leader_log_start_offset:
            partition.log.truncate_fully_and_start_at(leader_log_start_offset, now_ms)
            partition.high_watermark = min(partition.high_watermark, leader_log_start_offset)
        else:
            state.truncating = True


def whole_batches(records: bytes) -> bytes:
    """replica_fetcher._whole_batches: the longest prefix of whole batches."""
    position, size = 0, len(records)
    while position + _LOG_OVERHEAD <= size:
        (length,) = _BATCH_LENGTH.unpack_from(records, position + 8)
        end = position + _LOG_OVERHEAD + length
        if length <= 0 or end > size:
            break
        position = end
    return records if position == size else records[:position]
