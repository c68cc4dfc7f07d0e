"""One simulated broker: the synchronous twin of the broker's async shells.

Each request handler here follows its real counterpart line by line (broker/handlers/fetch.py,
produce.py, offset_for_leader_epoch.py, leader_and_isr.py, update_metadata.py,
stop_replica.py, broker/replica_manager.py, broker/isr_manager.py; the replica fetcher is in
fetcher.py), calling the same `Partition` methods and `broker.core.replication` rules; only trio's
waiting is replaced by events on the simulated clock. One deliberate difference, Kafka's and not
produce.py's: an acks=all produce is acknowledged only if the ISR still has min.insync.replicas
members when the HW reaches it (Kafka's checkEnoughReplicasReachOffset); see
test_scenarios.py for why.

A broker's process state (partitions, fetchers, parked requests) dies with a crash; its disk
(log directories, the HW and recovery-point checkpoints) survives, minus unflushed data.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from broker.core.partition import NotLeaderError, Partition, ReadResult
from broker.core.replication import should_propagate_isr_changes
from controller.zk_data import PartitionStateZnode
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.fetch import (
    FetchPartitionData,
    FetchRequest,
    FetchResponse,
    FetchTopicResponse,
)
from protocol.messages.leader_and_isr import (
    LeaderAndIsrPartitionError,
    LeaderAndIsrRequest,
    LeaderAndIsrResponse,
)
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartitionResult,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochResponse,
    OffsetForLeaderEpochTopicResult,
)
from protocol.messages.stop_replica import StopReplicaRequest, StopReplicaResponse
from protocol.messages.update_metadata import UpdateMetadataRequest, UpdateMetadataResponse
from protocol.records import read_header
from tests.simulation.disk import CrashCut, MirroredLog, crash, open_log
from tests.simulation.fetcher import FetchState, ReplicaFetcher
from tests.simulation.network import Envelope
from tests.simulation.world import Ack, World
from tests.simulation.zk import TopicPartition

if TYPE_CHECKING:
    from tests.simulation.controller_shell import SimController

__all__ = ["ProduceCall", "ProduceResult", "SimBroker"]

MAX_WAIT_CAP_MS = 60_000


class UnknownPartitionError(HighwaterError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- messages the real protocol has but the simulation keeps small ---------------------------


@dataclass(frozen=True, slots=True)
class ProduceCall:
    """An acks=all produce of one batch to one partition."""

    tp: TopicPartition
    records: bytes
    values: tuple[bytes, ...]
    timeout_ms: int


@dataclass(frozen=True, slots=True)
class ProduceResult:
    error_code: int
    base_offset: int = -1


# -- per-request state -----------------------------------------------------------------------


@dataclass(slots=True)
class ParkedFetch:
    """A fetch waiting in the purgatory for data (Kafka's DelayedFetch)."""

    envelope: Envelope
    request: FetchRequest
    keys: frozenset[TopicPartition]
    deadline_ms: int
    done: bool = False
    wake_pending: bool = False


@dataclass(slots=True)
class WaitingProduce:
    """An acks=all produce waiting for the HW (Kafka's DelayedProduce)."""

    envelope: Envelope
    call: ProduceCall
    needed: int  # the HW that covers the batch
    base_offset: int
    leader_epoch: int
    appended_ms: int
    deadline_ms: int
    done: bool = False
    wake_pending: bool = False


class SimBroker:
    def __init__(self, world: World, broker_id: int, data_dir: Path) -> None:
        self.world = world
        self.broker_id = broker_id
        self.data_dir = data_dir
        self.alive = False
        self.incarnation = 0
        self.session_id: int | None = None
        self.broker_epoch = -1
        self.crashes = 0
        self.last_crash_ms = -1
        # What survives a crash: the disk.
        self.hw_checkpoint: dict[TopicPartition, int] = {}
        self.recovery_points: dict[TopicPartition, int] = {}
        self.last_crash: dict[TopicPartition, CrashCut] = {}
        self.lost_data_in_last_crash = False
        self._reset_process_state()

    def _reset_process_state(self) -> None:
        self.registered = False  # this process has not registered yet
        # The broker epoch of this process's first registration, written with every
        # re-registration (zk_brokers.maintain_registration): the controller's incarnation.
        self.first_broker_epoch: int | None = None
        self.controller_epoch = -1
        self.logs: dict[TopicPartition, MirroredLog] = {}
        self.partitions: dict[TopicPartition, Partition] = {}
        self.high_watermarks: dict[TopicPartition, int] = dict(self.hw_checkpoint)
        self.fetchers: dict[int, ReplicaFetcher] = {}
        self.parked_fetches: list[ParkedFetch] = []
        self.waiting_produces: list[WaitingProduce] = []
        self.metadata_brokers: set[int] = set()
        self.isr_changed: set[TopicPartition] = set()
        self.last_isr_change_ms = 0
        self.last_isr_propagation_ms = self.world.now_ms
        self.controller: SimController | None = None

    # -- helpers ---------------------------------------------------------------------------

    @property
    def now_ms(self) -> int:
        return self.world.now_ms

    def after(self, delay_ms: int, label: str, action: Callable[[], None]) -> None:
        """Run `action` later, unless this process has crashed by then."""
        incarnation = self.incarnation

        def guarded() -> None:
            if self.alive and self.incarnation == incarnation:
                action()

        self.world.scheduler.after(delay_ms, f"b{self.broker_id} {label}", guarded)

    def every(self, interval_ms: int, label: str, action: Callable[[], None]) -> None:
        def tick() -> None:
            action()
            self.after(interval_ms, label, tick)

        self.after(interval_ms, label, tick)

    def _log_dir(self, tp: TopicPartition) -> Path:
        return self.data_dir / f"{tp[0]}-{tp[1]}"

    def _respond(self, envelope: Envelope, payload: object) -> None:
        self.world.net.respond(envelope, payload)

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """(Re)start the process: recover the logs, register in ZooKeeper, start timers."""
        assert not self.alive
        self.alive = True
        self.incarnation += 1
        self._reset_process_state()
        for tp in sorted(self.recovery_points):
            self.logs[tp] = open_log(
                self._log_dir(tp),
                self.world.log_config,
                self.now_ms,
                recovery_point=self.recovery_points[tp],
            )
        self.world.trace(
            f"b{self.broker_id} started (incarnation {self.incarnation}); logs "
            + ", ".join(f"{t}-{p}: LEO {log.log_end_offset}" for (t, p), log in self.logs.items())
        )
        self._new_session()
        config = self.world.config
        self.every(config.replica_lag_time_max_ms // 2, "isr-expiration", self._maybe_shrink_all)
        self.every(
            config.isr_change_propagation_interval_ms, "isr-change-propagation", self._propagate
        )
        self.every(
            config.high_watermark_checkpoint_interval_ms, "hw-checkpoint", self.checkpoint_hws
        )
        self.after(self.world.draw(config.log_flush_interval_ms), "log-flush", self._flush_logs)

    def crash(
        self, keep: Literal["random", "all", "flushed"] = "random", torn: bool | None = None
    ) -> dict[TopicPartition, CrashCut]:
        """Power loss: the process and unflushed data are gone (see disk.crash for `keep`;
        `torn` forces or forbids a torn tail); ZooKeeper notices only when the session times
        out."""
        assert self.alive
        config = self.world.config
        torn_probability = config.torn_tail_probability if torn is None else float(torn)
        cuts = {
            tp: crash(log, self.world.rng, torn_probability, keep=keep)
            for tp, log in sorted(self.logs.items())
        }
        for tp, cut in cuts.items():
            self.recovery_points[tp] = cut.recovery_point
        self.last_crash = cuts
        self.lost_data_in_last_crash = any(
            c.kept_offset < c.log_end_offset or c.torn_bytes for c in cuts.values()
        )
        self.alive = False
        self.incarnation += 1
        self.crashes += 1
        self.last_crash_ms = self.now_ms
        if self.controller is not None:
            self.controller.die()
        self._reset_process_state()
        session = self.session_id
        self.session_id = None
        if session is not None:
            zk = self.world.zk
            self.world.scheduler.after(
                config.zk_session_timeout_ms,
                f"zk session of b{self.broker_id} expires",
                lambda: zk.expire_session(session),
            )
        for hook in self.world.on_crash:
            hook(self.broker_id)
        return cuts

    def expire_session(self) -> None:
        """ZooKeeper expired our session (not a crash): re-register with a new one; a
        controller resigns at once (it can no longer write anything)."""
        if self.session_id is None:
            return
        self.world.zk.expire_session(self.session_id)
        self.session_id = None
        if self.controller is not None:
            self.controller.resign("zookeeper session expired")
        self.after(
            self.world.draw(self.world.config.zk_latency_ms), "new session", self._new_session
        )

    def _new_session(self) -> None:
        self.session_id = self.world.zk.open_session(self.broker_id)
        self._register()

    def _register(self) -> None:
        """register_broker: wait for a node left by our previous session to expire."""
        epoch = self.world.zk.register_broker(
            self.broker_id, self.session_id or -1, self.first_broker_epoch
        )
        if epoch is None:
            self.after(self.world.config.broker_registration_retry_ms, "register", self._register)
            return
        if self.first_broker_epoch is None:
            self.first_broker_epoch = epoch
        self.broker_epoch = epoch
        self.registered = True
        self.world.trace(
            f"b{self.broker_id} registered, broker epoch {epoch} "
            f"(this process's first: {self.first_broker_epoch})"
        )
        from tests.simulation.controller_shell import campaign

        campaign(self.world, self)

    def close(self) -> None:
        for log in self.logs.values():
            log.close()

    # -- requests --------------------------------------------------------------------------

    def handle_request(self, envelope: Envelope) -> None:
        payload = envelope.payload
        if isinstance(payload, FetchRequest):
            self._on_fetch(envelope, payload)
        elif isinstance(payload, ProduceCall):
            self._on_produce(envelope, payload)
        elif isinstance(payload, OffsetForLeaderEpochRequest):
            self._respond(envelope, self._offset_for_leader_epoch(payload))
        elif isinstance(payload, LeaderAndIsrRequest):
            self._respond(envelope, self._on_leader_and_isr(payload))
        elif isinstance(payload, UpdateMetadataRequest):
            self._respond(envelope, self._on_update_metadata(payload))
        elif isinstance(payload, StopReplicaRequest):
            self._respond(envelope, self._on_stop_replica(payload))
        else:
            raise TypeError(f"unexpected request {payload!r}")

    def _check_controller_request(self, controller_epoch: int, broker_epoch: int) -> ErrorCode:
        """BrokerContext.admit_controller_request. The real broker holds a request that
        arrives before its process registered until it has; here it is refused, a harsher
        model (the controller does not resend it)."""
        if not self.registered:
            return ErrorCode.STALE_BROKER_EPOCH
        if controller_epoch < self.controller_epoch:
            return ErrorCode.STALE_CONTROLLER_EPOCH
        if broker_epoch != -1 and broker_epoch < self.broker_epoch:
            return ErrorCode.STALE_BROKER_EPOCH
        self.controller_epoch = controller_epoch
        return ErrorCode.NONE

    # -- LeaderAndIsr / UpdateMetadata / StopReplica ---------------------------------------

    def _on_leader_and_isr(self, request: LeaderAndIsrRequest) -> LeaderAndIsrResponse:
        refused = self._check_controller_request(request.controller_epoch, request.broker_epoch)
        if refused != ErrorCode.NONE:
            self.world.trace(f"b{self.broker_id} refused LeaderAndIsr: {refused.name}")
            return LeaderAndIsrResponse(refused)
        results: list[tuple[str, int, int]] = []
        for state in request.partition_states:
            tp = (state.topic_name, state.partition_index)
            if self.broker_id not in state.replicas:
                results.append((*tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.value))
                continue
            partition = self._get_or_create(tp)
            applied = partition.apply_state(state, self.now_ms)
            code = ErrorCode.NONE if applied else ErrorCode.FENCED_LEADER_EPOCH
            results.append((*tp, code.value))
            self.world.trace(
                f"b{self.broker_id} {tp[0]}-{tp[1]}: LeaderAndIsr leader {state.leader} "
                f"epoch {state.leader_epoch} isr {list(state.isr)} pe {state.partition_epoch}"
                + ("" if applied else " (stale, ignored)")
            )
        self._update_fetchers(request, results)
        for topic, index, _ in results:
            self._notify((topic, index))
        return LeaderAndIsrResponse(
            ErrorCode.NONE,
            tuple(LeaderAndIsrPartitionError(t, p, code) for t, p, code in results),
        )

    def _get_or_create(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            log = self.logs.get(tp)
            if log is None:
                log = open_log(self._log_dir(tp), self.world.log_config, self.now_ms)
                self.logs[tp] = log
                self.recovery_points.setdefault(tp, 0)
            partition = Partition(
                tp[0], tp[1], self.broker_id, log, high_watermark=self.high_watermarks.get(tp, 0)
            )
            self.partitions[tp] = partition
        return partition

    def _update_fetchers(
        self, request: LeaderAndIsrRequest, results: list[tuple[str, int, int]]
    ) -> None:
        leaders = set(self.metadata_brokers) | {b.node_id for b in request.live_leaders}
        for topic, index, code in results:
            partition = self.partitions.get((topic, index))
            if code != ErrorCode.NONE or partition is None:
                continue
            if partition.is_leader or partition.leader_id not in leaders:
                self.unfollow((topic, index))
            else:
                self.follow((topic, index), partition.leader_id, partition.leader_epoch)

    def _on_update_metadata(self, request: UpdateMetadataRequest) -> UpdateMetadataResponse:
        refused = self._check_controller_request(request.controller_epoch, request.broker_epoch)
        if refused != ErrorCode.NONE:
            return UpdateMetadataResponse(refused)
        self.metadata_brokers = {b.node_id for b in request.live_brokers}
        return UpdateMetadataResponse(ErrorCode.NONE)

    def _on_stop_replica(self, request: StopReplicaRequest) -> StopReplicaResponse:
        refused = self._check_controller_request(request.controller_epoch, request.broker_epoch)
        if refused != ErrorCode.NONE:
            return StopReplicaResponse(refused)
        for topic in request.topic_states:
            for state in topic.partition_states:
                tp = (topic.topic_name, state.partition_index)
                self.unfollow(tp)
                partition = self.partitions.pop(tp, None)
                if partition is not None:
                    partition.leader_id = -1
                    self.high_watermarks[tp] = partition.high_watermark
                self.world.trace(f"b{self.broker_id} {tp[0]}-{tp[1]}: StopReplica")
                self._notify(tp)
        return StopReplicaResponse(ErrorCode.NONE)

    # -- the purgatory ---------------------------------------------------------------------

    def _notify(self, tp: TopicPartition) -> None:
        """Purgatory.notify: parked fetches and produces on `tp` re-check (as a later step,
        as their trio tasks would)."""
        for parked in self.parked_fetches:
            if tp in parked.keys and not parked.done and not parked.wake_pending:
                parked.wake_pending = True
                self.after(0, "fetch wakes", functools.partial(self._retry_fetch, parked))
        for waiting in self.waiting_produces:
            if waiting.call.tp == tp and not waiting.done and not waiting.wake_pending:
                waiting.wake_pending = True
                self.after(0, "produce wakes", functools.partial(self._check_produce, waiting))

    # -- Fetch (leader side) ---------------------------------------------------------------

    def _on_fetch(self, envelope: Envelope, request: FetchRequest) -> None:
        deadline_ms = self.now_ms + min(max(request.max_wait_ms, 0), MAX_WAIT_CAP_MS)
        response, total_bytes, has_error = self._read_all(request)
        if total_bytes >= request.min_bytes or has_error or self.now_ms >= deadline_ms:
            self._respond(envelope, response)
            return
        keys = frozenset((t.topic, p.partition) for t in request.topics for p in t.partitions)
        parked = ParkedFetch(envelope, request, keys, deadline_ms)
        self.parked_fetches.append(parked)
        self.after(deadline_ms - self.now_ms, "fetch deadline", lambda: self._expire_fetch(parked))

    def _retry_fetch(self, parked: ParkedFetch) -> None:
        parked.wake_pending = False
        if parked.done:
            return
        response, total_bytes, has_error = self._read_all(parked.request)
        if total_bytes >= parked.request.min_bytes or has_error:
            self._finish_fetch(parked, response)

    def _expire_fetch(self, parked: ParkedFetch) -> None:
        if not parked.done:
            self._finish_fetch(parked, self._read_all(parked.request)[0])

    def _finish_fetch(self, parked: ParkedFetch, response: FetchResponse) -> None:
        parked.done = True
        self.parked_fetches.remove(parked)
        self._respond(parked.envelope, response)

    def _read_all(self, request: FetchRequest) -> tuple[FetchResponse, int, bool]:
        """handlers/fetch.py::_read_all."""
        now_ms = self.now_ms
        remaining = max(request.max_bytes, 0)
        total_bytes = 0
        has_error = False
        topics = []
        for topic in request.topics:
            partitions = []
            for wanted in topic.partitions:
                tp = (topic.topic, wanted.partition)
                try:
                    result = self._replica_read(
                        tp,
                        wanted.fetch_offset,
                        min(max(wanted.partition_max_bytes, 0), remaining),
                        replica_id=request.replica_id,
                        current_leader_epoch=wanted.current_leader_epoch,
                        min_one_batch=total_bytes == 0,
                    )
                except HighwaterError as exc:
                    has_error = True
                    code = exc.code
                    if code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION:
                        code = ErrorCode.NOT_LEADER_OR_FOLLOWER  # the metadata knows it
                    partition = self.partitions.get(tp)
                    partitions.append(
                        FetchPartitionData(
                            wanted.partition,
                            code,
                            high_watermark=partition.high_watermark if partition else -1,
                            log_start_offset=partition.log.log_start_offset if partition else -1,
                            records=b"",
                        )
                    )
                    continue
                if request.replica_id >= 0:
                    self._follower_fetched(
                        tp, request.replica_id, wanted.fetch_offset, result, now_ms
                    )
                records = result.data.read()
                total_bytes += len(records)
                remaining = max(0, remaining - len(records))
                partitions.append(
                    FetchPartitionData(
                        wanted.partition,
                        ErrorCode.NONE,
                        high_watermark=result.high_watermark,
                        log_start_offset=result.log_start_offset,
                        records=records,
                        current_leader_epoch=self.partitions[tp].leader_epoch,
                    )
                )
            topics.append(FetchTopicResponse(topic.topic, tuple(partitions)))
        return FetchResponse(ErrorCode.NONE, tuple(topics)), total_bytes, has_error

    def _leader_partition(self, tp: TopicPartition) -> Partition:
        partition = self.partitions.get(tp)
        if partition is None:
            raise UnknownPartitionError(f"{tp} is not hosted on broker {self.broker_id}")
        if not partition.is_leader:
            raise NotLeaderError(f"broker {self.broker_id} does not lead {tp}")
        return partition

    def _replica_read(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        max_bytes: int,
        *,
        replica_id: int,
        current_leader_epoch: int,
        min_one_batch: bool,
    ) -> ReadResult:
        """ReplicaManager.read."""
        partition = self._leader_partition(tp)
        partition.check_leader_epoch(current_leader_epoch)
        return partition.read(
            fetch_offset, max_bytes, replica_id=replica_id, min_one_batch=min_one_batch
        )

    def _follower_fetched(
        self,
        tp: TopicPartition,
        replica_id: int,
        fetch_offset: int,
        result: ReadResult,
        now_ms: int,
    ) -> None:
        partition = self.partitions[tp]
        if partition.update_follower_fetch(replica_id, fetch_offset, result.log_end_offset, now_ms):
            self._notify(tp)
        self._maybe_expand(partition)

    # -- OffsetForLeaderEpoch (leader side) ------------------------------------------------

    def _offset_for_leader_epoch(
        self, request: OffsetForLeaderEpochRequest
    ) -> OffsetForLeaderEpochResponse:
        topics = []
        for topic in request.topics:
            results = []
            for wanted in topic.partitions:
                try:
                    partition = self._leader_partition((topic.topic, wanted.partition))
                    partition.check_leader_epoch(wanted.current_leader_epoch)
                except HighwaterError as exc:
                    results.append(OffsetForLeaderEpochPartitionResult(exc.code, wanted.partition))
                    continue
                epoch, end_offset = partition.log.end_offset_for_epoch(wanted.leader_epoch)
                results.append(
                    OffsetForLeaderEpochPartitionResult(
                        ErrorCode.NONE, wanted.partition, end_offset, epoch
                    )
                )
            topics.append(OffsetForLeaderEpochTopicResult(topic.topic, tuple(results)))
        return OffsetForLeaderEpochResponse(tuple(topics))

    # -- Produce (leader side) -------------------------------------------------------------

    def _enough_replicas(self, partition: Partition) -> bool:
        """min(min.insync.replicas, replication factor) ISR members."""
        min_isr = partition.min_insync_replicas or self.world.config.min_insync_replicas
        return len(partition.isr) >= min(min_isr, len(partition.replicas))

    def _on_produce(self, envelope: Envelope, call: ProduceCall) -> None:
        partition = self.partitions.get(call.tp)
        if partition is None or not partition.is_leader:
            self._respond(envelope, ProduceResult(ErrorCode.NOT_LEADER_OR_FOLLOWER))
            return
        if not self._enough_replicas(partition):
            self._respond(envelope, ProduceResult(ErrorCode.NOT_ENOUGH_REPLICAS))
            return
        try:
            info = partition.append_as_leader(call.records, self.now_ms)
        except HighwaterError as exc:
            self._respond(envelope, ProduceResult(exc.code))
            return
        self._notify(call.tp)
        timeout_ms = min(max(call.timeout_ms, 0), 5 * 60 * 1000)
        waiting = WaitingProduce(
            envelope,
            call,
            info.last_offset + 1,
            info.first_offset,
            partition.leader_epoch,
            self.now_ms,
            self.now_ms + timeout_ms,
        )
        self.waiting_produces.append(waiting)
        self.after(timeout_ms, "produce deadline", lambda: self._check_produce(waiting))
        self._check_produce(waiting)

    def _check_produce(self, waiting: WaitingProduce) -> None:
        """produce.py::_wait_for_high_watermarks, one round, with Kafka's ISR check at ack."""
        waiting.wake_pending = False
        if waiting.done:
            return
        tp = waiting.call.tp
        partition = self.partitions.get(tp)
        if partition is None or not partition.is_leader:
            self._finish_produce(waiting, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        elif partition.high_watermark >= waiting.needed:
            if self._enough_replicas(partition):
                self._acked(waiting, partition)
                self._finish_produce(waiting, ErrorCode.NONE)
            else:
                self._finish_produce(waiting, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        elif not self._enough_replicas(partition):
            self._finish_produce(waiting, ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND)
        elif self.now_ms >= waiting.deadline_ms:
            self._finish_produce(waiting, ErrorCode.REQUEST_TIMED_OUT)

    def _acked(self, waiting: WaitingProduce, partition: Partition) -> None:
        ack = Ack(
            waiting.call.tp,
            waiting.base_offset,
            waiting.needed,
            read_header(waiting.call.records).crc,
            waiting.call.values,
            self.broker_id,
            partition.leader_epoch,
            partition.isr,
            waiting.appended_ms,
            self.now_ms,
        )
        for hook in self.world.on_ack:
            hook(ack)

    def _finish_produce(self, waiting: WaitingProduce, code: ErrorCode) -> None:
        waiting.done = True
        self.waiting_produces.remove(waiting)
        base_offset = waiting.base_offset if code == ErrorCode.NONE else -1
        self._respond(waiting.envelope, ProduceResult(code, base_offset))

    # -- the ISR manager (leader side) -----------------------------------------------------

    def _maybe_expand(self, partition: Partition) -> None:
        new_isr = partition.isr_to_expand()
        if new_isr is not None:
            self._propose(partition, new_isr)

    def _maybe_shrink_all(self) -> None:
        lag_ms = self.world.config.replica_lag_time_max_ms
        for _, partition in sorted(self.partitions.items()):
            new_isr = partition.isr_to_shrink(self.now_ms, lag_ms)
            if new_isr is not None:
                self._propose(partition, new_isr)

    def _propose(self, partition: Partition, new_isr: tuple[int, ...]) -> None:
        partition.begin_isr_update(new_isr)
        # IsrManager._propose: the epochs are taken when the change is decided; the write
        # runs as its own task (start_soon), so it may start a little later.
        znode = PartitionStateZnode(
            self.broker_id, partition.leader_epoch, new_isr, partition.controller_epoch
        )
        expected = partition.partition_epoch
        self.after(
            self.world.rng.randint(0, 2),
            f"isr write {partition.topic}-{partition.index} {list(new_isr)}",
            lambda: self._write_isr(partition, znode, expected),
        )

    def _write_isr(self, partition: Partition, znode: PartitionStateZnode, expected: int) -> None:
        """IsrManager._write: the CAS happens now, its answer arrives after ZK latency."""
        tp = (partition.topic, partition.index)
        new_isr, epoch = znode.isr, znode.leader_epoch
        if partition.pending_isr != new_isr or partition.leader_epoch != epoch:
            return  # superseded by a LeaderAndIsr before the write started
        version = self.world.zk.cas_state(
            self.session_id, tp, znode, expected, f"leader b{self.broker_id}"
        )
        self.world.trace(
            f"b{self.broker_id} {tp[0]}-{tp[1]}: isr write {list(new_isr)} at pe "
            f"{expected}: " + ("lost" if version is None else f"pe {version}")
        )
        self.after(
            self.world.draw(self.world.config.zk_latency_ms),
            f"isr write done {tp[0]}-{tp[1]}",
            lambda: self._complete_isr(partition, new_isr, epoch, version),
        )

    def _complete_isr(
        self, partition: Partition, new_isr: tuple[int, ...], epoch: int, version: int | None
    ) -> None:
        tp = (partition.topic, partition.index)
        moved = partition.complete_isr_update(new_isr, epoch, version)
        if version is not None and partition.isr == new_isr:
            self.isr_changed.add(tp)
            self.last_isr_change_ms = self.now_ms
        if moved:
            self._notify(tp)

    def _propagate(self) -> None:
        config = self.world.config
        if not should_propagate_isr_changes(
            bool(self.isr_changed),
            self.last_isr_change_ms,
            self.last_isr_propagation_ms,
            self.now_ms,
            config.isr_change_propagation_blackout_ms,
            config.isr_change_propagation_max_delay_ms,
        ):
            return
        if self.world.zk.publish_isr_changes(self.session_id, sorted(self.isr_changed)):
            self.isr_changed = set()
            self.last_isr_propagation_ms = self.now_ms

    # -- disk upkeep -----------------------------------------------------------------------

    def checkpoint_hws(self) -> None:
        """ReplicaManager.checkpoint_high_watermarks (the replication-offset-checkpoint)."""
        for tp, partition in self.partitions.items():
            self.high_watermarks[tp] = partition.high_watermark
        self.hw_checkpoint = dict(self.high_watermarks)

    def _flush_logs(self) -> None:
        """log.flush.interval: fsync, so the recovery point (its checkpoint) moves up."""
        for tp, log in sorted(self.logs.items()):
            log.flush(self.now_ms)
            self.recovery_points[tp] = log.recovery_point
        config = self.world.config
        self.after(self.world.draw(config.log_flush_interval_ms), "log-flush", self._flush_logs)

    # -- the replica fetcher manager (follower side) ---------------------------------------

    def follow(self, tp: TopicPartition, leader_id: int, leader_epoch: int) -> None:
        current = self.fetchers.get(leader_id)
        if current is not None:
            state = current.partitions.get(tp)
            if state is not None and state.leader_epoch == leader_epoch:
                return
        self.unfollow(tp)
        fetcher = self.fetchers.get(leader_id)
        if fetcher is None:
            fetcher = ReplicaFetcher(self, leader_id)
            self.fetchers[leader_id] = fetcher
        fetcher.add(tp, leader_epoch)

    def unfollow(self, tp: TopicPartition) -> None:
        for leader_id, fetcher in list(self.fetchers.items()):
            if tp in fetcher.partitions:
                fetcher.partitions.pop(tp)
                if not fetcher.partitions:
                    fetcher.stopped = True
                    del self.fetchers[leader_id]

    def fetch_state(self, tp: TopicPartition) -> FetchState | None:
        for fetcher in self.fetchers.values():
            state = fetcher.partitions.get(tp)
            if state is not None:
                return state
        return None
