"""A follower's fetching from one leader, as decisions (Kafka's ReplicaFetcherThread).

`Follower.poll(now_ms)` (monotonic; `wall_ms` is the wall clock, for the log) says what to
send next: a truncation round (OffsetForLeaderEpoch for
partitions that just became followers, KIP-101/279: ask where our latest epoch ends, truncate
as `replication.truncation_for` decides, ask again while the leader answers an epoch we lack)
or one Fetch from each ready partition's LEO. `on_response` applies the answer, but only to
partitions that still follow this leader in the epoch the request was made for. The shell
sends the requests and waits; docs/architecture.md ("Replication") has the whole story.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

import structlog

from broker.core.controller_requests import FollowerChange
from broker.core.partition import Partition
from broker.core.replication import truncation_for
from broker.core.replication_quota import ReplicationQuota
from broker.core.state import BrokerState
from protocol.errors import ErrorCode, HighwaterError
from protocol.fetch_session import FetchSessionHandler, fetch_entry
from protocol.messages.common import BrokerEndpoint
from protocol.messages.fetch import (
    FetchPartition,
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochTopic,
)
from protocol.topic_partition import TopicPartition

__all__ = [
    "FetchRound",
    "FetchState",
    "FetcherSettings",
    "Follower",
    "FollowerSet",
    "FollowerUpdate",
    "TruncationRound",
    "whole_batches",
]

_LOG_OVERHEAD = 12  # base offset (8) + batch length (4)
_BATCH_LENGTH = struct.Struct(">i")
THROTTLED_RETRY_MS = 100  # how soon a partition held back by the throttle is looked at again


@dataclass(frozen=True, slots=True)
class FetcherSettings:
    replica_fetch_max_bytes: int
    replica_fetch_min_bytes: int
    replica_fetch_wait_max_ms: int
    replica_fetch_backoff_ms: int
    request_timeout_ms: int


@dataclass(slots=True)
class FetchState:
    leader_epoch: int
    truncating: bool = True
    delayed_until_ms: int = 0  # a partition error backs the partition off
    leader_high_watermark: int = -1  # from the last response: are we still catching up?
    # What the last fetch asked for this partition (protocol.fetch_session.fetch_entry).
    wanted: FetchPartition | None = None


@dataclass(frozen=True, slots=True)
class TruncationRound:
    request: OffsetForLeaderEpochRequest
    timeout_ms: int
    states: dict[TopicPartition, FetchState]
    asked: dict[TopicPartition, int]  # the epoch asked about


@dataclass(frozen=True, slots=True)
class FetchRound:
    request: FetchRequest
    timeout_ms: int
    states: dict[TopicPartition, FetchState]
    offsets: dict[TopicPartition, int]  # our LEO when asked
    throttled: frozenset[TopicPartition] = frozenset()


Round = TruncationRound | FetchRound


@dataclass(eq=False)
class Follower:
    state: BrokerState
    settings: FetcherSettings
    leader: BrokerEndpoint
    quota: ReplicationQuota  # one for all throttled partitions of this broker
    partitions: dict[TopicPartition, FetchState] = field(default_factory=dict)
    # KIP-227: an idle partition is named in a fetch only when its LEO or epoch changes.
    session: FetchSessionHandler = field(default_factory=FetchSessionHandler)

    def __post_init__(self) -> None:
        self._log = structlog.get_logger("highwater.fetcher").bind(leader=self.leader.node_id)

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = FetchState(leader_epoch)

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def next_ready_ms(self) -> int | None:
        """When a backed-off partition is ready again (None: no partitions at all)."""
        return min((s.delayed_until_ms for s in self.partitions.values()), default=None)

    def poll(self, now_ms: int) -> Round | None:
        """The next request, or None: nothing is ready (wait for `next_ready_ms` or a change)."""
        ready = {tp: s for tp, s in self.partitions.items() if s.delayed_until_ms <= now_ms}
        truncating = {tp: s for tp, s in ready.items() if s.truncating}
        if truncating:
            round_ = self._truncation_round(truncating)
            if round_ is not None:
                return round_
            ready = {tp: s for tp, s in ready.items() if tp in self.partitions}  # stale: gone
        return self._fetch_round(ready, now_ms) if ready else None

    def request_failed(self) -> None:
        """The request in flight got no answer (connection lost, timed out): the leader may
        or may not have moved the fetch session on, so the next fetch starts a new one."""
        self.session.handle_error()

    def on_response(
        self,
        sent: Round,
        response: OffsetForLeaderEpochResponse | FetchResponse,
        now_ms: int,
        *,
        wall_ms: int,
    ) -> None:
        if isinstance(sent, TruncationRound):
            assert isinstance(response, OffsetForLeaderEpochResponse)
            self._truncated(sent, response, now_ms)
        else:
            assert isinstance(response, FetchResponse)
            self._fetched(sent, response, now_ms, wall_ms)

    # -- helpers -------------------------------------------------------------------------

    def _partition(self, tp: TopicPartition, state: FetchState) -> Partition | None:
        """The partition if it is still ours to fetch in the epoch this request was made for."""
        partition = self.state.replica_manager.partitions.get(tp)
        if (
            self.partitions.get(tp) is not state
            or partition is None
            or partition.leader_id != self.leader.node_id
            or partition.leader_epoch != state.leader_epoch
        ):
            return None
        return partition

    def _drop_stale(self, tp: TopicPartition, state: FetchState) -> None:
        """The partition no longer follows this leader in this epoch, and LeaderAndIsr did not
        tell us (it always should): stop fetching it rather than spin on it."""
        if self.partitions.get(tp) is state:
            del self.partitions[tp]
            self._log.warning("dropped a stale fetch state", topic=tp[0], partition=tp[1])

    def _storage_failed(
        self, tp: TopicPartition, state: FetchState, exc: OSError, now_ms: int
    ) -> None:
        """Writing our copy failed (ENOSPC, EIO): its log dir is offline (KIP-112). The
        partition is no longer hosted, so it is not fetched again (the shell then unfollows
        it); the controller takes it out of the ISR. Out of descriptors: back off, retry."""
        self.state.replica_manager.storage_failed(tp, exc, write=True)
        if tp in self.state.replica_manager.offline:
            self._log.error("follower's log dir failed; not fetching", topic=tp[0], partition=tp[1])
        else:
            state.truncating = True  # the write may have half happened: start over cleanly
            self._delay(tp, state, ErrorCode.KAFKA_STORAGE_ERROR, now_ms)

    def _delay(self, tp: TopicPartition, state: FetchState, code: int, now_ms: int) -> None:
        state.delayed_until_ms = now_ms + self.settings.replica_fetch_backoff_ms
        self._log.info(
            "partition fetch error, backing off",
            topic=tp[0],
            partition=tp[1],
            error=ErrorCode(code).name if code in ErrorCode._value2member_map_ else code,
        )

    # -- truncation (KIP-101 / KIP-279) --------------------------------------------------

    def _truncation_round(self, states: dict[TopicPartition, FetchState]) -> TruncationRound | None:
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
            return None
        request = OffsetForLeaderEpochRequest(
            tuple(OffsetForLeaderEpochTopic(t, tuple(ps)) for t, ps in sorted(by_topic.items())),
            replica_id=self.state.broker_id,
        )
        return TruncationRound(request, self.settings.request_timeout_ms, states, asked)

    def _truncated(
        self, sent: TruncationRound, response: OffsetForLeaderEpochResponse, now_ms: int
    ) -> None:
        for topic in response.topics:
            for answer in topic.partitions:
                tp = TopicPartition(topic.topic, answer.partition)
                state = sent.states.get(tp)
                partition = self._partition(tp, state) if state is not None else None
                if partition is None or state is None or tp not in sent.asked:
                    continue
                if answer.error_code != ErrorCode.NONE:
                    self._delay(tp, state, answer.error_code, now_ms)
                    continue
                decision = truncation_for(
                    sent.asked[tp],
                    answer.leader_epoch,
                    answer.end_offset,
                    partition.log_end_offset,
                    partition.high_watermark,
                    partition.log.end_offset_for_epoch,
                )
                try:
                    partition.truncate_to(decision.offset)
                except OSError as exc:
                    self._storage_failed(tp, state, exc, now_ms)
                    continue
                if decision.complete:
                    state.truncating = False
                    self._log.info(
                        "follower truncated, fetching",
                        topic=tp[0],
                        partition=tp[1],
                        leader_epoch=state.leader_epoch,
                        log_end_offset=partition.log_end_offset,
                    )

    # -- fetching ------------------------------------------------------------------------

    def _fetch_round(
        self, states: dict[TopicPartition, FetchState], now_ms: int
    ) -> FetchRound | None:
        settings = self.settings
        offsets: dict[TopicPartition, int] = {}
        throttled: set[TopicPartition] = set()
        wanted: dict[TopicPartition, FetchPartition] = {}
        for tp, state in states.items():
            partition = self._partition(tp, state)
            if partition is None:
                self._drop_stale(tp, state)
                continue
            max_bytes = settings.replica_fetch_max_bytes
            throttle = _throttle_for(partition, state)
            if throttle > 0:
                if self.quota.exceeded(throttle, now_ms):
                    state.delayed_until_ms = now_ms + THROTTLED_RETRY_MS
                    continue
                throttled.add(tp)
                max_bytes = min(max_bytes, throttle)  # smaller steps keep the rate even
            offsets[tp] = partition.log_end_offset
            wanted[tp] = state.wanted = fetch_entry(
                state.wanted,
                tp[1],
                offsets[tp],
                max_bytes,
                state.leader_epoch,
                partition.log.log_start_offset,
            )
        if not wanted:
            return None
        plan = self.session.build(wanted)
        request = FetchRequest(
            replica_id=self.state.broker_id,
            max_wait_ms=settings.replica_fetch_wait_max_ms,
            min_bytes=settings.replica_fetch_min_bytes,
            max_bytes=settings.replica_fetch_max_bytes,
            topics=plan.topics,
            replica_epoch=self.state.broker_epoch,
            session_id=plan.session_id,
            session_epoch=plan.session_epoch,
            forgotten_topics_data=plan.forgotten,
        )
        timeout_ms = settings.request_timeout_ms + settings.replica_fetch_wait_max_ms
        return FetchRound(request, timeout_ms, states, offsets, frozenset(throttled))

    def _fetched(
        self, sent: FetchRound, response: FetchResponse, now_ms: int, wall_ms: int
    ) -> None:
        """Partitions the answer leaves out (an incremental fetch) had nothing new."""
        self.session.handle_response(response)
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                state = sent.states.get(tp)
                partition = self._partition(tp, state) if state is not None else None
                if partition is None or state is None or tp not in sent.offsets:
                    continue
                if partition.log_end_offset != sent.offsets[tp]:
                    continue  # truncated meanwhile; this data may not continue our log
                if tp in sent.throttled:
                    self.quota.record(len(data.records), now_ms)
                state.leader_high_watermark = data.high_watermark
                self._apply(tp, state, partition, data, now_ms, wall_ms)

    def _apply(
        self,
        tp: TopicPartition,
        state: FetchState,
        partition: Partition,
        data: FetchPartitionData,
        now_ms: int,
        wall_ms: int,
    ) -> None:
        if data.error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(tp, state, partition, data.log_start_offset, now_ms, wall_ms)
            return
        if data.error_code != ErrorCode.NONE:
            self._delay(tp, state, data.error_code, now_ms)
            return
        try:
            records = whole_batches(data.records)
            partition.append_as_follower(records, data.high_watermark, wall_ms)
            if records:
                self.state.replica_manager.counters(tp[0]).replication_bytes_in += len(records)
        except OSError as exc:
            self._storage_failed(tp, state, exc, now_ms)
        except HighwaterError as exc:
            # A batch that does not continue our log: find the divergence point again.
            self._log.warning(
                "follower append failed; truncating again",
                topic=tp[0],
                partition=tp[1],
                error=str(exc),
            )
            state.truncating = True
            self._delay(tp, state, ErrorCode.CORRUPT_MESSAGE, now_ms)

    def _out_of_range(
        self,
        tp: TopicPartition,
        state: FetchState,
        partition: Partition,
        leader_log_start_offset: int,
        now_ms: int,
        wall_ms: int,
    ) -> None:
        """Kafka's handleOffsetOutOfRange: behind the leader's log start -> start over there;
        otherwise our log runs past the leader's, so find the divergence point again."""
        if leader_log_start_offset >= 0 and partition.log_end_offset < leader_log_start_offset:
            try:
                partition.log.truncate_fully_and_start_at(leader_log_start_offset, wall_ms)
            except OSError as exc:
                self._storage_failed(tp, state, exc, now_ms)
                return
            partition.high_watermark = min(partition.high_watermark, leader_log_start_offset)
            self._log.info(
                "follower behind leader's log start; restarting log",
                topic=tp[0],
                partition=tp[1],
                start_offset=leader_log_start_offset,
            )
        else:
            state.truncating = True


def _throttle_for(partition: Partition, state: FetchState) -> int:
    """The throttle on this follower's fetches of `partition` (-1: none): set while it is an
    adding replica of a throttled reassignment and behind the leader's HW."""
    if partition.broker_id not in partition.adding_replicas:
        return -1
    if 0 <= state.leader_high_watermark <= partition.log_end_offset:
        return -1
    return partition.replication_throttle_bytes_per_sec


def whole_batches(records: bytes) -> bytes:
    """The longest prefix of whole batches: a size-limited read may end inside one."""
    position, size = 0, len(records)
    while position + _LOG_OVERHEAD <= size:
        (length,) = _BATCH_LENGTH.unpack_from(records, position + 8)
        end = position + _LOG_OVERHEAD + length
        if length <= 0 or end > size:
            break
        position = end
    return records if position == size else records[:position]


@dataclass(frozen=True, slots=True)
class FollowerUpdate:
    """What the shell must do after a change: start a new fetcher, stop empty ones, nudge
    one that gained a partition."""

    started: Follower | None = None
    stopped: tuple[Follower, ...] = ()
    woken: Follower | None = None


@dataclass(eq=False)
class FollowerSet:
    """Which leader each followed partition is fetched from (Kafka's
    ReplicaFetcherManager): one `Follower` per leader endpoint."""

    state: BrokerState
    settings: FetcherSettings
    quota: ReplicationQuota = field(default_factory=ReplicationQuota)
    by_leader: dict[BrokerEndpoint, Follower] = field(default_factory=dict)

    def apply(self, change: FollowerChange) -> FollowerUpdate:
        if change.leader is None:
            return self.unfollow(change.tp)
        return self.follow(change.tp, change.leader, change.leader_epoch)

    def follow(
        self, tp: TopicPartition, leader: BrokerEndpoint, leader_epoch: int
    ) -> FollowerUpdate:
        """Fetch `tp` from `leader` in `leader_epoch`, truncating first. Idempotent for the
        same leader and epoch (a repeated LeaderAndIsr must not restart truncation)."""
        current = self.by_leader.get(leader)
        if current is not None:
            state = current.partitions.get(tp)
            if state is not None and state.leader_epoch == leader_epoch:
                return FollowerUpdate()
        stopped = self.unfollow(tp).stopped
        follower = self.by_leader.get(leader)
        started = None
        if follower is None:
            follower = started = Follower(self.state, self.settings, leader, self.quota)
            self.by_leader[leader] = follower
        follower.add(tp, leader_epoch)
        return FollowerUpdate(started, stopped, None if started else follower)

    def unfollow(self, tp: TopicPartition) -> FollowerUpdate:
        stopped = []
        for leader, follower in list(self.by_leader.items()):
            follower.remove(tp)
            if not follower.partitions:  # also one emptied by dropping stale partitions
                stopped.append(self.by_leader.pop(leader))
        return FollowerUpdate(stopped=tuple(stopped))

    def fetch_state(self, tp: TopicPartition) -> FetchState | None:
        for follower in self.by_leader.values():
            state = follower.partitions.get(tp)
            if state is not None:
                return state
        return None
