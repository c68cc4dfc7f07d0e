"""Followers: one replica fetcher per source broker (Kafka's ReplicaFetcherThread).

Each fetcher is one trio task with one connection to the leader it fetches from; one Fetch
covers every partition this broker follows from that leader. A partition that has just
become a follower first truncates (KIP-101/279): it asks the leader, with OffsetForLeaderEpoch,
where its own latest leader epoch ends, truncates as `replication.truncation_for` decides
(asking again while the leader answers with an epoch it does not have), and only then fetches
from its LEO. Every response is checked against the partition's current role and epoch
before it is applied, because LeaderAndIsr may have changed them while the request was out.

A reassignment's throttle applies here, on the follower side: while this broker is an adding
replica still behind the leader's HW, the partition's fetched bytes count against one
broker-wide quota, and while that quota is exceeded the partition sits out (Kafka's
`shouldFollowerThrottle`). Caught-up replicas are never throttled, so a throttle cannot push
an in-sync replica out of the ISR.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog
import trio

from broker.partition import Partition
from broker.replication import truncation_for
from broker.replication_quota import ReplicationQuota
from client.network import BrokerConnection, BrokerConnectionError, connect
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.common import BrokerEndpoint
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
from protocol.topic_partition import TopicPartition

if TYPE_CHECKING:
    from broker.context import BrokerContext

__all__ = ["ReplicaFetcherManager"]

_LOG_OVERHEAD = 12  # base offset (8) + batch length (4)
_BATCH_LENGTH = struct.Struct(">i")
_THROTTLED_RETRY_S = 0.1  # how soon a partition held back by the throttle is looked at again
MAX_TRUNCATION_ROUNDS = 100  # KIP-279 iterations per partition before backing off


@dataclass(slots=True)
class _FetchState:
    leader_epoch: int
    truncating: bool = True
    delayed_until: float = 0.0  # trio clock; a partition error backs the partition off
    leader_high_watermark: int = -1  # from the last response: are we still catching up?


class ReplicaFetcherManager:
    """Which partitions this broker follows, from whom; starts and stops fetchers."""

    def __init__(self, ctx: BrokerContext) -> None:
        self._ctx = ctx
        self._nursery: trio.Nursery | None = None
        self._fetchers: dict[BrokerEndpoint, _ReplicaFetcher] = {}
        # One quota for all throttled partitions of this broker, across its fetchers.
        self.throttle_quota = ReplicationQuota()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            await trio.sleep_forever()

    def follow(self, tp: TopicPartition, leader: BrokerEndpoint, leader_epoch: int) -> None:
        """Fetch `tp` from `leader` in `leader_epoch`, truncating first. Idempotent for the
        same leader and epoch (a repeated LeaderAndIsr must not restart truncation)."""
        current = self._fetchers.get(leader)
        if current is not None:
            state = current.partitions.get(tp)
            if state is not None and state.leader_epoch == leader_epoch:
                return
        self.unfollow(tp)
        if self._nursery is None:
            return
        fetcher = self._fetchers.get(leader)
        if fetcher is None:
            fetcher = _ReplicaFetcher(self._ctx, leader, self.throttle_quota)
            self._fetchers[leader] = fetcher
            self._nursery.start_soon(fetcher.run)
        fetcher.add(tp, leader_epoch)

    def unfollow(self, tp: TopicPartition) -> None:
        for endpoint, fetcher in list(self._fetchers.items()):
            if tp in fetcher.partitions:
                fetcher.remove(tp)
                if not fetcher.partitions:
                    fetcher.stop()
                    del self._fetchers[endpoint]

    def fetching_from(self) -> dict[TopicPartition, int]:
        """tp -> the leader's broker id, for every partition being followed (for tests/logs)."""
        return {
            tp: endpoint.node_id for endpoint, f in self._fetchers.items() for tp in f.partitions
        }


class _ReplicaFetcher:
    def __init__(self, ctx: BrokerContext, leader: BrokerEndpoint, quota: ReplicationQuota) -> None:
        self._ctx = ctx
        self.leader = leader
        self._quota = quota
        self.partitions: dict[TopicPartition, _FetchState] = {}
        self._changed = trio.Event()
        self._scope = trio.CancelScope()
        self._connection: BrokerConnection | None = None
        self._log = structlog.get_logger("highwater.fetcher").bind(leader=leader.node_id)

    def add(self, tp: TopicPartition, leader_epoch: int) -> None:
        self.partitions[tp] = _FetchState(leader_epoch)
        self._changed.set()

    def remove(self, tp: TopicPartition) -> None:
        self.partitions.pop(tp, None)

    def stop(self) -> None:
        self._scope.cancel()

    async def run(self) -> None:
        backoff_s = self._ctx.config.replica_fetch_backoff_ms / 1000
        with self._scope:
            try:
                while True:
                    try:
                        await self._run_once()
                    except (BrokerConnectionError, HighwaterError) as exc:
                        self._log.info("fetcher connection failed", error=str(exc))
                        self._close()
                        await trio.sleep(backoff_s)
            finally:
                self._close()

    def _close(self) -> None:
        if self._connection is not None:
            self._connection.close_now()
            self._connection = None

    async def _run_once(self) -> None:
        if not self.partitions:
            self._changed = trio.Event()
            await self._changed.wait()
            return
        if self._connection is None or self._connection.broken:
            self._connection = await connect(
                self.leader.host,
                self.leader.port,
                client_id=f"replica-fetcher-{self._ctx.broker_id}",
                timeout_ms=self._ctx.config.request_timeout_ms,
            )
        now = trio.current_time()
        truncating = [
            tp for tp, s in self.partitions.items() if s.truncating and s.delayed_until <= now
        ]
        if truncating:
            await self._truncate(self._connection, truncating)
            return
        ready = [
            tp for tp, s in self.partitions.items() if not s.truncating and s.delayed_until <= now
        ]
        if not ready:
            wake_at = min(s.delayed_until for s in self.partitions.values())
            self._changed = trio.Event()
            with trio.move_on_at(wake_at):
                await self._changed.wait()
            return
        await self._fetch(self._connection, ready)

    # -- helpers -------------------------------------------------------------------------

    def _partition(self, tp: TopicPartition, state: _FetchState) -> Partition | None:
        """The partition if it is still ours to fetch in the epoch this request was made for."""
        partition = self._ctx.replica_manager.partitions.get(tp)
        if (
            self.partitions.get(tp) is not state
            or partition is None
            or partition.leader_id != self.leader.node_id
            or partition.leader_epoch != state.leader_epoch
        ):
            return None
        return partition

    def _drop_stale(self, tp: TopicPartition, state: _FetchState) -> None:
        """The partition no longer follows this leader in this epoch, and LeaderAndIsr did not
        tell the manager (it always should): stop fetching it rather than spin on it."""
        if self.partitions.get(tp) is state:
            del self.partitions[tp]
            self._log.warning("dropped a stale fetch state", topic=tp[0], partition=tp[1])

    def _delay(self, tp: TopicPartition, state: _FetchState, code: int) -> None:
        state.delayed_until = trio.current_time() + self._ctx.config.replica_fetch_backoff_ms / 1000
        self._log.info(
            "partition fetch error, backing off",
            topic=tp[0],
            partition=tp[1],
            error=ErrorCode(code).name if code in ErrorCode._value2member_map_ else code,
        )

    def _request_timeout_ms(self) -> int:
        return self._ctx.config.request_timeout_ms + self._ctx.config.replica_fetch_wait_max_ms

    # -- truncation (KIP-101 / KIP-279) --------------------------------------------------

    async def _truncate(self, connection: BrokerConnection, tps: list[TopicPartition]) -> None:
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
            return
        request = OffsetForLeaderEpochRequest(
            tuple(OffsetForLeaderEpochTopic(t, tuple(ps)) for t, ps in sorted(by_topic.items())),
            replica_id=self._ctx.broker_id,
        )
        response: OffsetForLeaderEpochResponse = await connection.request(
            request, timeout_ms=self._ctx.config.request_timeout_ms
        )
        for topic in response.topics:
            for answer in topic.partitions:
                tp = TopicPartition(topic.topic, answer.partition)
                found = states.get(tp)
                partition = self._partition(tp, found) if found is not None else None
                if partition is None or found is None or tp not in asked:
                    continue
                state = found
                if answer.error_code != ErrorCode.NONE:
                    self._delay(tp, state, answer.error_code)
                    continue
                decision = truncation_for(
                    asked[tp],
                    answer.leader_epoch,
                    answer.end_offset,
                    partition.log_end_offset,
                    partition.high_watermark,
                    partition.log.end_offset_for_epoch,
                )
                partition.truncate_to(decision.offset)
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

    async def _fetch(self, connection: BrokerConnection, tps: list[TopicPartition]) -> None:
        config = self._ctx.config
        states = {tp: self.partitions[tp] for tp in tps}
        offsets: dict[TopicPartition, int] = {}
        throttled: set[TopicPartition] = set()
        by_topic: dict[str, list[FetchPartition]] = {}
        now_ms = self._ctx.now_ms()
        for tp, state in states.items():
            partition = self._partition(tp, state)
            if partition is None:
                self._drop_stale(tp, state)
                continue
            max_bytes = config.replica_fetch_max_bytes
            throttle = _throttle_for(partition, state)
            if throttle > 0:
                if self._quota.exceeded(throttle, now_ms):
                    state.delayed_until = trio.current_time() + _THROTTLED_RETRY_S
                    continue
                throttled.add(tp)
                max_bytes = min(max_bytes, throttle)  # smaller steps keep the rate even
            offsets[tp] = partition.log_end_offset
            by_topic.setdefault(tp[0], []).append(
                FetchPartition(
                    tp[1],
                    offsets[tp],
                    max_bytes,
                    current_leader_epoch=state.leader_epoch,
                    log_start_offset=partition.log.log_start_offset,
                )
            )
        if not by_topic:
            return
        request = FetchRequest(
            replica_id=self._ctx.broker_id,
            max_wait_ms=config.replica_fetch_wait_max_ms,
            min_bytes=config.replica_fetch_min_bytes,
            max_bytes=config.replica_fetch_max_bytes,
            topics=tuple(FetchTopic(t, tuple(ps)) for t, ps in sorted(by_topic.items())),
            replica_epoch=self._ctx.broker_epoch,
        )
        response: FetchResponse = await connection.request(
            request, timeout_ms=self._request_timeout_ms()
        )
        now_ms = self._ctx.now_ms()
        for topic in response.responses:
            for data in topic.partitions:
                tp = TopicPartition(topic.topic, data.partition_index)
                found = states.get(tp)
                partition = self._partition(tp, found) if found is not None else None
                if partition is None or found is None or tp not in offsets:
                    continue
                state = found
                if partition.log_end_offset != offsets[tp]:
                    continue  # truncated meanwhile; this data may not continue our log
                if tp in throttled:
                    self._quota.record(len(data.records), now_ms)
                state.leader_high_watermark = data.high_watermark
                self._apply(tp, state, partition, data, now_ms)

    def _apply(
        self,
        tp: TopicPartition,
        state: _FetchState,
        partition: Partition,
        data: FetchPartitionData,
        now_ms: int,
    ) -> None:
        error_code = data.error_code
        if error_code == ErrorCode.OFFSET_OUT_OF_RANGE:
            self._out_of_range(tp, state, partition, data.log_start_offset, now_ms)
            return
        if error_code != ErrorCode.NONE:
            self._delay(tp, state, error_code)
            return
        records = _whole_batches(data.records)
        try:
            partition.append_as_follower(records, data.high_watermark, now_ms)
        except (HighwaterError, OSError) as exc:
            # A batch that does not continue our log: find the divergence point again.
            self._log.warning(
                "follower append failed; truncating again",
                topic=tp[0],
                partition=tp[1],
                error=str(exc),
            )
            state.truncating = True
            self._delay(tp, state, ErrorCode.CORRUPT_MESSAGE)

    def _out_of_range(
        self,
        tp: TopicPartition,
        state: _FetchState,
        partition: Partition,
        leader_log_start_offset: int,
        now_ms: int,
    ) -> None:
        """Kafka's handleOffsetOutOfRange: behind the leader's log start -> start over there;
        otherwise our log runs past the leader's, so find the divergence point again."""
        if leader_log_start_offset >= 0 and partition.log_end_offset < leader_log_start_offset:
            partition.log.truncate_fully_and_start_at(leader_log_start_offset, now_ms)
            partition.high_watermark = min(partition.high_watermark, leader_log_start_offset)
            self._log.info(
                "follower behind leader's log start; restarting log",
                topic=tp[0],
                partition=tp[1],
                start_offset=leader_log_start_offset,
            )
        else:
            state.truncating = True


def _throttle_for(partition: Partition, state: _FetchState) -> int:
    """The throttle on this follower's fetches of `partition` (-1: none): set while it is an
    adding replica of a throttled reassignment and behind the leader's HW."""
    if partition.broker_id not in partition.adding_replicas:
        return -1
    if 0 <= state.leader_high_watermark <= partition.log_end_offset:
        return -1
    return partition.replication_throttle_bytes_per_sec


def _whole_batches(records: bytes) -> bytes:
    """The longest prefix of whole batches: a size-limited read may end inside one."""
    position, size = 0, len(records)
    while position + _LOG_OVERHEAD <= size:
        (length,) = _BATCH_LENGTH.unpack_from(records, position + 8)
        end = position + _LOG_OVERHEAD + length
        if length <= 0 or end > size:
            break
        position = end
    return records if position == size else records[:position]
