"""The partitions this broker hosts, and the entry points the API handlers call.

Synchronous: handlers and the purgatory add the waiting. Every data-path error is reported per
partition with Kafka's error code, never raised to the connection. A partition whose log (or
log dir) failed is offline (Kafka's HostedPartition.Offline, KIP-112): it answers
KAFKA_STORAGE_ERROR until the broker restarts, and the shell tells the controller.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

import structlog

from broker.config.dynamic_update import partition_config
from broker.config.log_config import LogConfig
from broker.config.topic_config import TopicConfigError
from broker.core.partition import NotLeaderError, Partition, ReadResult
from broker.core.topic_id_check import has_consistent_topic_id
from broker.log.errors import LogStorageError, is_transient
from broker.log.manager import LogManager
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.topic_partition import TopicPartition

__all__ = ["AppendResult", "ReplicaManager", "TopicCounters"]


@dataclass(slots=True)
class TopicCounters:
    """One topic's traffic through this broker since it started (Kafka's BrokerTopicMetrics,
    as counts): produced to it as leader, fetched by consumers, and replicated in and out."""

    bytes_in: int = 0
    records_in: int = 0
    bytes_out: int = 0
    records_out: int = 0
    replication_bytes_in: int = 0
    replication_bytes_out: int = 0


class AppendResult:
    __slots__ = ("base_offset", "error_code", "error_message", "log_start_offset", "next_offset")

    def __init__(
        self,
        error_code: int,
        base_offset: int = -1,
        next_offset: int = -1,
        log_start_offset: int = -1,
        error_message: str | None = None,
    ) -> None:
        self.error_code = error_code
        self.base_offset = base_offset
        self.next_offset = next_offset  # one past the last appended offset
        self.log_start_offset = log_start_offset
        self.error_message = error_message


class ReplicaManager:
    def __init__(self, broker_id: int, log_manager: LogManager) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.partitions: dict[TopicPartition, Partition] = {}
        self.topic_counters: dict[str, TopicCounters] = {}
        self._high_watermarks = log_manager.read_high_watermarks()
        self._logger = structlog.get_logger("highwater.replica_manager")
        # Offline partitions found since the shell last took them (`take_offline`), and the
        # shell's hook, called when there are new ones (a trio Event, a simulator timer).
        self._newly_offline: list[TopicPartition] = list(log_manager.offline_logs)
        self.on_offline: Callable[[], None] | None = None
        log_manager.on_offline = self._went_offline

    # -- offline partitions (KIP-112) ------------------------------------------------------

    @property
    def offline(self) -> Mapping[TopicPartition, str]:
        """Partitions whose log is unusable here, with what failed."""
        return self.log_manager.offline_logs

    def take_offline(self) -> list[TopicPartition]:
        """The partitions that went offline since the last call (the shell stops fetching
        them, fails what waits on them and tells the controller)."""
        newly, self._newly_offline = self._newly_offline, []
        return newly

    def storage_failed(self, tp: TopicPartition, exc: OSError, *, write: bool) -> LogStorageError:
        """An operation on `tp`'s log failed: a write takes its whole log dir offline, a read
        just this log; out of descriptors or memory, nothing goes offline (the client retries).
        Returns the error to answer with."""
        if is_transient(exc):
            return LogStorageError(f"{tp[0]}-{tp[1]}: {exc}; not a disk failure, retry")
        log_dir = self.log_manager.dir_of(tp)
        if tp not in self.offline:
            if write and log_dir is not None:
                self.log_manager.fail_dir(log_dir, exc)
            else:
                self.log_manager.fail_log(tp, exc)
        return LogStorageError(self.offline.get(tp, str(exc)))

    def _went_offline(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            partition = self.partitions.pop(tp, None)
            if partition is not None:
                partition.leader_id = -1  # whoever still holds it sees it lead nothing
                self._high_watermarks[tp] = partition.high_watermark
        self._newly_offline += tps
        if self.on_offline is not None:
            self.on_offline()

    # -- controller requests -------------------------------------------------------------

    def become_leader_or_follower(
        self,
        states: tuple[LeaderAndIsrPartitionState, ...],
        now_ms: int,
        topic_configs: Mapping[str, Mapping[str, str]] | None = None,
        *,
        wall_ms: int,
    ) -> list[tuple[str, int, int]]:
        """Apply LeaderAndIsr partition states; (topic, partition, error code) for each.
        `now_ms` (monotonic) starts a new leader's followers' lag clocks; `wall_ms` dates the
        segments of a log created here.

        `topic_configs` (from `/config/topics/<t>`) override the broker's defaults (the log
        manager's default config, dynamic defaults included); an open log takes them at once,
        its active segment too."""
        results = []
        for state in states:
            tp = TopicPartition(state.topic_name, state.partition_index)
            if self.broker_id not in state.replicas:
                results.append((*tp, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.value))
                continue
            if tp in self.offline:  # Kafka answers the controller so for an offline replica
                results.append((*tp, ErrorCode.KAFKA_STORAGE_ERROR.value))
                continue
            if not self._topic_id_matches(tp, state.topic_id):
                results.append((*tp, ErrorCode.INCONSISTENT_TOPIC_ID.value))
                continue
            overrides = (topic_configs or {}).get(tp[0], {})
            try:
                config = partition_config(self.log_manager.default_config, overrides)
                partition = self._get_or_create(tp, wall_ms, config.log_config, state.topic_id)
                if partition is None:  # the dir opened holds another topic's log
                    results.append((*tp, ErrorCode.INCONSISTENT_TOPIC_ID.value))
                    continue
                partition.min_insync_replicas = config.min_insync_replicas
                if state.topic_id and not partition.log.topic_id:
                    partition.log.assign_topic_id(state.topic_id)  # new, or from before ids
            except (HighwaterError, OSError, ValueError, TopicConfigError) as exc:
                self._logger.error("cannot open partition log", tp=tp, error=str(exc))
                results.append((*tp, ErrorCode.KAFKA_STORAGE_ERROR.value))
                continue
            try:
                applied = partition.apply_state(state, now_ms)
            except OSError as exc:  # the leader-epoch checkpoint could not be written
                self.storage_failed(tp, exc, write=True)
                results.append((*tp, ErrorCode.KAFKA_STORAGE_ERROR.value))
                continue
            code = ErrorCode.NONE if applied else ErrorCode.FENCED_LEADER_EPOCH
            results.append((*tp, code.value))
        return results

    def _topic_id_matches(self, tp: TopicPartition, topic_id: str) -> bool:
        """Check the LeaderAndIsr's topic id against the log's (KIP-516). A hosted partition
        whose log holds another id refuses the state (Kafka's ReplicaManager
        .becomeLeaderOrFollower answers INCONSISTENT_TOPIC_ID). A log no LeaderAndIsr has
        claimed since it was loaded (or since StopReplica) with another id is most likely a
        deleted topic's, recreated under its name while this broker was down: it is moved
        aside (`-stray`, as Kafka's LogManager moves a stray log, KIP-858), never deleted,
        and the state applies to a new, empty log. Kafka in ZooKeeper mode refuses instead,
        but Highwater's controller finishes a deletion while a replica is down, so that
        replica would refuse forever; and one LeaderAndIsr (a controller that gave the
        topic a new id during an upgrade, say) must not be able to destroy data. Never
        serve the old records as the new topic's."""
        hosted = self.partitions.get(tp)
        log = hosted.log if hosted is not None else self.log_manager.get_log(tp)
        if log is None or has_consistent_topic_id(topic_id, log.topic_id):
            return True
        if hosted is not None:
            self._logger.error(
                "topic id of the request differs from the log's",
                topic=tp[0],
                partition=tp[1],
                topic_id=topic_id,
                log_topic_id=log.topic_id,
            )
            return False
        try:
            stray = self.log_manager.move_log_aside(tp)
        except OSError as exc:
            self.storage_failed(tp, exc, write=True)
            return False
        self._high_watermarks.pop(tp, None)  # the old log's, not the new one's
        self._logger.warning(
            "moved aside a log whose topic id is not the topic's; restore it by hand if wanted",
            topic=tp[0],
            partition=tp[1],
            directory=str(stray),
            topic_id=topic_id,
            log_topic_id=log.topic_id,
        )
        return True

    def _get_or_create(
        self, tp: TopicPartition, wall_ms: int, config: LogConfig, topic_id: str
    ) -> Partition | None:
        """The partition, its log opened or created; None when the log opened holds another
        topic id than `topic_id` (a dir a failed deletion left, say): checked again after
        opening, as Kafka's LogManager.getOrCreateLog raises InconsistentTopicIdException."""
        partition = self.partitions.get(tp)
        if partition is not None:
            partition.log.config = config
        else:
            log = self.log_manager.get_or_create_log(tp, wall_ms, config)
            if not has_consistent_topic_id(topic_id, log.topic_id):
                self._logger.error(
                    "topic id of the request differs from the opened log's",
                    topic=tp[0],
                    partition=tp[1],
                    directory=str(log.directory),
                    topic_id=topic_id,
                    log_topic_id=log.topic_id,
                )
                return None
            log.config = config
            partition = Partition(
                tp[0], tp[1], self.broker_id, log, high_watermark=self._high_watermarks.get(tp, 0)
            )
            self.partitions[tp] = partition
        return partition

    def stop_replica(self, tp: TopicPartition, *, delete: bool) -> None:
        partition = self.partitions.pop(tp, None)
        if partition is not None:
            partition.leader_id = -1
            self._high_watermarks[tp] = partition.high_watermark  # for when it comes back
        if delete:
            self.log_manager.delete_log(tp)
            self._high_watermarks.pop(tp, None)
            if not any(other.topic == tp[0] for other in self.partitions.values()):
                self.topic_counters.pop(tp[0], None)
            self._logger.info("partition deleted", topic=tp[0], partition=tp[1])

    def delete_stray_logs(
        self,
        assignments: Mapping[TopicPartition, Collection[int]],
        leader_epochs: Mapping[TopicPartition, int] | None = None,
        controller_epoch: int = -1,
    ) -> list[TopicPartition]:
        """Delete the logs that the cluster no longer places here: their topic is gone, or
        this broker is not among the partition's replicas.

        Deletion and reassignment reach a replica through StopReplica, which a replica that
        was down at the time (or a controller that failed mid-way) never gets; the next full
        metadata from the controller shows it, and the data goes then. `assignments`: every
        partition in that metadata with its replicas. A partition a LeaderAndIsr gave us is
        kept unless the metadata says so in a newer leader epoch (`leader_epochs`): the
        controller that completed a reassignment may have failed before its StopReplica. So
        is one of a deleted topic, unless the metadata comes from the controller that gave it
        (`controller_epoch`, the sender's): a controller that took over after the deletion,
        whose StopReplica never reached us, knows nothing of it (the old controller's would
        name it, or come after its StopReplica)."""
        topics = {topic for topic, _ in assignments}
        epochs = leader_epochs or {}

        def stray(tp: TopicPartition) -> bool:
            if tp[0] not in topics:
                hosted = self.partitions.get(tp)
                return hosted is None or hosted.controller_epoch < controller_epoch
            if tp not in assignments or self.broker_id in assignments[tp]:
                return False
            hosted = self.partitions.get(tp)
            return hosted is None or epochs.get(tp, -1) > hosted.leader_epoch

        deleted = [tp for tp in sorted(self.log_manager.logs) if stray(tp)]
        for tp in deleted:
            self.stop_replica(tp, delete=True)
            self._logger.info("stray log deleted", topic=tp[0], partition=tp[1])
        return deleted

    # -- data path -----------------------------------------------------------------------

    def leader_partition(self, tp: TopicPartition) -> Partition:
        """The partition if this broker leads it; else a HighwaterError with Kafka's code."""
        partition = self.partitions.get(tp)
        if partition is None:
            if tp in self.offline:
                raise LogStorageError(self.offline[tp])
            raise _UnknownPartition(f"{tp[0]}-{tp[1]} is not hosted on broker {self.broker_id}")
        if not partition.is_leader:
            raise NotLeaderError(f"broker {self.broker_id} does not lead {tp[0]}-{tp[1]}")
        return partition

    def counters(self, topic: str) -> TopicCounters:
        counters = self.topic_counters.get(topic)
        if counters is None:
            counters = self.topic_counters[topic] = TopicCounters()
        return counters

    def append(self, tp: TopicPartition, records: bytes, wall_ms: int) -> AppendResult:
        try:
            partition = self.leader_partition(tp)
            info = partition.append_as_leader(records, wall_ms)
        except HighwaterError as exc:
            return AppendResult(exc.code, error_message=str(exc))
        except OSError as exc:  # ENOSPC, EIO: the dir goes offline, nothing is acknowledged
            error = self.storage_failed(tp, exc, write=True)
            return AppendResult(error.code, error_message=str(error))
        if not info.duplicate:
            counters = self.counters(tp[0])
            counters.bytes_in += info.byte_count
            counters.records_in += info.record_count
        return AppendResult(
            ErrorCode.NONE, info.first_offset, info.last_offset + 1, info.log_start_offset
        )

    def read(
        self,
        tp: TopicPartition,
        fetch_offset: int,
        max_bytes: int,
        *,
        replica_id: int,
        current_leader_epoch: int,
        min_one_batch: bool,
    ) -> ReadResult:
        partition = self.leader_partition(tp)
        partition.check_leader_epoch(current_leader_epoch)
        return partition.read(
            fetch_offset, max_bytes, replica_id=replica_id, min_one_batch=min_one_batch
        )

    def checkpoint_high_watermarks(self) -> None:
        for tp, partition in self.partitions.items():
            self._high_watermarks[tp] = partition.high_watermark
        self.log_manager.checkpoint_high_watermarks(self._high_watermarks)


class _UnknownPartition(HighwaterError):
    code = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
