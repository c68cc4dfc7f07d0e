"""All partition logs of a broker across its log dirs (Kafka's LogManager), with the per-dir
files: recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint (the HWs, for the replica layer), `.highwater_cleanshutdown`
(between a clean shutdown and the next start) and `.lock`. A corrupt checkpoint never loses
data silently: it falls back to recovering everything, to each log's first segment, or to a
HW of 0, and is logged. A write that fails (ENOSPC, EIO) takes its whole log dir offline, a
log that cannot be read or opened only itself (KIP-112; docs/reliability.md, "Disks").
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import shutil
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Final, TextIO, TypeVar

import structlog

from broker.config.log_config import LogConfig
from broker.log.checkpoints import CorruptCheckpointError, OffsetCheckpointFile, fsync_path
from broker.log.errors import LogStorageError, is_transient
from broker.log.log import Log
from broker.log.partition_metadata import CorruptPartitionMetadataError
from protocol.stats import Timings
from protocol.topic_partition import TopicPartition

__all__ = [
    "CLEANER_CHECKPOINT_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "HIGH_WATERMARK_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
    "STRAY_SUFFIX",
    "LogManager",
    "TopicPartition",
    "parse_log_dir_name",
]

RECOVERY_POINT_CHECKPOINT_FILE: Final = "recovery-point-offset-checkpoint"
LOG_START_OFFSET_CHECKPOINT_FILE: Final = "log-start-offset-checkpoint"
HIGH_WATERMARK_CHECKPOINT_FILE: Final = "replication-offset-checkpoint"
CLEANER_CHECKPOINT_FILE: Final = "cleaner-offset-checkpoint"
CLEAN_SHUTDOWN_FILE: Final = ".highwater_cleanshutdown"
LOCK_FILE: Final = ".lock"
DELETE_SUFFIX: Final = "-delete"
# A log moved aside, not deleted, for the operator (Kafka's UnifiedLog.StrayDirSuffix,
# KIP-858): `<topic>-<partition>.<unique id>-stray`. Never loaded, never deleted here.
STRAY_SUFFIX: Final = "-stray"
_TOPIC_RE: Final = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
T = TypeVar("T")


def parse_log_dir_name(name: str) -> TopicPartition | None:
    """`my-topic-3` -> ("my-topic", 3); None for anything that is not a partition dir."""
    topic, sep, partition = name.rpartition("-")
    if not sep or not (partition.isascii() and partition.isdigit()):
        return None
    if not _TOPIC_RE.fullmatch(topic):
        return None
    return TopicPartition(topic, int(partition))


class LogManager:
    def __init__(
        self, log_dirs: list[Path], default_config: LogConfig, *, log_class: type[Log] = Log
    ) -> None:
        """`log_class`: Log, or a subclass (the simulator's keeps its batches in memory)."""
        if not log_dirs:
            raise ValueError("at least one log dir is needed")
        self.log_dirs = log_dirs
        self.default_config = default_config
        self._log_class = log_class
        self.logs: dict[TopicPartition, Log] = {}
        self._dir_of: dict[TopicPartition, Path] = {}
        self._locks: list[TextIO] = []
        self.had_clean_shutdown: dict[Path, bool] = {}
        # Kafka's offline log dirs (KIP-112): a dir whose write failed takes no more appends
        # and holds no open logs; a partition whose log failed, or whose dir did, is offline
        # here until the broker restarts. Values say what failed.
        self.offline_dirs: dict[Path, str] = {}
        self.offline_logs: dict[TopicPartition, str] = {}
        # Called with the partitions that just went offline (the replica manager's hook).
        self.on_offline: Callable[[list[TopicPartition]], None] | None = None
        self.flush_timer = Timings()  # every log's flushes (the metrics read it)
        self._logger = structlog.get_logger("highwater.log_manager")

    # -- start and stop --------------------------------------------------------------------

    def startup(
        self, now_ms: int, configs: Mapping[TopicPartition, LogConfig] | None = None
    ) -> None:
        """Lock every log dir and open every log in it, recovering after an unclean stop. A dir
        that fails is offline (KIP-112); LogStorageError if every one failed."""
        configs = configs or {}
        failed: dict[Path, OSError] = {}
        for log_dir in self.log_dirs:
            try:
                self._load_dir(log_dir, now_ms, configs)
            except OSError as exc:
                if is_transient(exc):
                    raise
                failed[log_dir] = exc
        if len(failed) == len(self.log_dirs):  # Kafka's LogManager: no usable dir, no broker
            raise LogStorageError("; ".join(f"{d}: {error}" for d, error in failed.items()))
        for log_dir, error in failed.items():
            self.fail_dir(log_dir, error)
        self.checkpoint(now_ms)

    def _load_dir(
        self, log_dir: Path, now_ms: int, configs: Mapping[TopicPartition, LogConfig]
    ) -> None:
        log_dir.mkdir(parents=True, exist_ok=True)
        self._lock(log_dir)
        marker = log_dir / CLEAN_SHUTDOWN_FILE
        clean = marker.exists()
        self.had_clean_shutdown[log_dir] = clean
        recovery_points = self._read_checkpoint(log_dir / RECOVERY_POINT_CHECKPOINT_FILE)
        # A corrupt log-start-offset file falls back to each log's first segment.
        start_offsets = self._read_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE) or {}
        if recovery_points is None:
            clean, recovery_points = False, {}  # recover every log from its start
        for child in sorted(log_dir.iterdir()):
            if child.is_dir() and child.name.endswith(DELETE_SUFFIX):
                shutil.rmtree(child, ignore_errors=True)  # a deletion a crash interrupted
                continue
            if child.name.endswith(STRAY_SUFFIX):  # moved aside: the operator's to restore
                self._logger.warning("stray log dir left in place", directory=str(child))
                continue
            tp = parse_log_dir_name(child.name) if child.is_dir() else None
            if tp is None:
                continue
            if tp in self.logs:
                raise LogStorageError(
                    f"{tp[0]}-{tp[1]} is in both {self._dir_of[tp]} and {log_dir}"
                )
            self._dir_of[tp] = log_dir
            try:
                self.logs[tp] = self._log_class.open(
                    child,
                    configs.get(tp, self.default_config),
                    now_ms=now_ms,
                    recovery_point=recovery_points.get(tp, 0),
                    log_start_offset=start_offsets.get(tp, 0),
                    clean_shutdown=clean,
                )
            except (OSError, CorruptPartitionMetadataError) as exc:  # it alone is offline
                self.fail_log(tp, exc)
                continue
            self.logs[tp].flush_timer = self.flush_timer
        # Only now, with every log recovered, is a crash "unclean" from here on.
        marker.unlink(missing_ok=True)
        self._logger.info(
            "log dir loaded", log_dir=str(log_dir), clean_shutdown=clean, logs=len(self.logs)
        )

    def shutdown(self, now_ms: int) -> None:
        """Flush everything, write checkpoints, close, then leave the clean-shutdown marker in
        each dir that is still online (an offline one is recovered at the next start)."""
        self._each_log(lambda log: log.flush(indexes=True))
        self.checkpoint(now_ms)
        self._each_log(Log.close)
        for log_dir in self.online_dirs():
            try:
                marker = log_dir / CLEAN_SHUTDOWN_FILE
                marker.write_bytes(b"")
                fsync_path(marker)
            except OSError as exc:
                self.fail_dir(log_dir, exc)
        for lock in self._locks:
            lock.close()
        self._locks.clear()
        self.logs.clear()

    def abandon(self) -> None:
        """Let go of the log dirs as a killed process does: no flush, no checkpoints, no
        clean-shutdown marker (the simulator's crash; the logs are closed by then)."""
        for lock in self._locks:
            lock.close()
        self._locks.clear()
        self.logs.clear()

    def _lock(self, log_dir: Path) -> None:
        lock = open(log_dir / LOCK_FILE, "a")  # noqa: SIM115 - held until shutdown
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            lock.close()
            raise LogStorageError(f"log dir {log_dir} is in use by another process") from exc
        self._locks.append(lock)

    # -- logs ------------------------------------------------------------------------------

    def get_log(self, tp: TopicPartition) -> Log | None:
        return self.logs.get(tp)

    def get_or_create_log(
        self, tp: TopicPartition, now_ms: int, config: LogConfig | None = None
    ) -> Log:
        log = self.logs.get(tp)
        if log is not None:
            return log
        if tp in self.offline_logs:
            raise LogStorageError(self.offline_logs[tp])
        topic, partition = tp
        if not _TOPIC_RE.fullmatch(topic) or partition < 0:
            raise ValueError(f"invalid topic-partition {tp!r}")
        online = self.online_dirs()
        if not online:
            raise LogStorageError(f"cannot create {topic}-{partition}: every log dir is offline")
        log_dir = min(online, key=lambda d: sum(1 for v in self._dir_of.values() if v == d))
        self._dir_of[tp] = log_dir
        try:
            log = self._log_class.open(
                log_dir / f"{topic}-{partition}", config or self.default_config, now_ms=now_ms
            )
        except OSError as exc:
            self.fail_dir(log_dir, exc)
            raise LogStorageError(self.offline_logs[tp]) from exc
        log.flush_timer = self.flush_timer
        self.logs[tp] = log
        return log

    def delete_log(self, tp: TopicPartition) -> bool:
        """Remove a partition's data. The dir is renamed first so that a crash mid-way still
        finishes the deletion at the next start. An offline log stays where it is (its
        dir may not be writable); the next start deletes it as a stray. A rename that fails
        raises OSError with the log still in the maps, so that the caller takes the right
        log dir offline (`dir_of`)."""
        log = self.logs.get(tp)
        if log is None:
            if tp not in self.offline_logs:
                self._dir_of.pop(tp, None)
            return False
        log.close()
        doomed = log.directory.with_name(f"{log.directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        os.replace(log.directory, doomed)
        del self.logs[tp]
        self._dir_of.pop(tp, None)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    def move_log_aside(self, tp: TopicPartition) -> Path:
        """Close a partition's log and rename its dir `<name>.<unique id>-stray` with every
        file in it (Kafka's LogManager renames a stray log so, KIP-858): it is no longer this
        partition's log, and the next start does not load it. Returns the new directory.
        OSError leaves the log in the maps, as `delete_log`."""
        log = self.logs[tp]
        log.close()
        stray = log.directory.with_name(f"{log.directory.name}.{uuid.uuid4().hex}{STRAY_SUFFIX}")
        os.replace(log.directory, stray)
        fsync_path(stray.parent)
        del self.logs[tp]
        self._dir_of.pop(tp, None)
        return stray

    # -- periodic work (the broker's scheduler calls these with the time) -----------------

    def cleanup(self, now_ms: int) -> int:
        """Retention: delete expired or excess segments. Returns segments deleted."""
        return sum(self._each_log(lambda log: log.delete_retention_breached_segments(now_ms)))

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget idle idempotent producers in every log; how many."""
        return sum(log.remove_expired_producers(now_ms) for log in self.logs.values())

    def flush_dirty(self, now_ms: int) -> int:
        """The flush.ms policy across all logs, `now_ms` on the monotonic clock (see
        Log.maybe_flush). Returns how many logs were flushed."""
        return sum(self._each_log(lambda log: log.maybe_flush(now_ms)))

    def checkpoint(self, now_ms: int) -> None:
        """Write recovery points and log start offsets of every online log dir."""
        for log_dir in self.online_dirs():
            mine = {tp: log for tp, log in self.logs.items() if self._dir_of[tp] == log_dir}
            try:
                OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT_FILE).write(
                    {tp: log.recovery_point for tp, log in mine.items()}
                )
                OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE).write(
                    {tp: log.log_start_offset for tp, log in mine.items()}
                )
            except OSError as exc:
                self.fail_dir(log_dir, exc)

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        for log_dir in self.online_dirs():
            try:
                OffsetCheckpointFile(log_dir / HIGH_WATERMARK_CHECKPOINT_FILE).write(
                    {
                        tp: hw
                        for tp, hw in high_watermarks.items()
                        if self._dir_of.get(tp) == log_dir and tp not in self.offline_logs
                    }
                )
            except OSError as exc:
                self.fail_dir(log_dir, exc)

    def checkpoint_cleaned(self, first_dirty_offsets: Mapping[TopicPartition, int]) -> None:
        """The cleaner-offset-checkpoint: how far each compacted log is clean."""
        for log_dir in self.online_dirs():
            try:
                OffsetCheckpointFile(log_dir / CLEANER_CHECKPOINT_FILE).write(
                    {
                        tp: o
                        for tp, o in first_dirty_offsets.items()
                        if self._dir_of.get(tp) == log_dir and tp not in self.offline_logs
                    }
                )
            except OSError as exc:
                self.fail_dir(log_dir, exc)

    def read_cleaned(self) -> dict[TopicPartition, int]:
        """The cleaner-offset-checkpoint of every log dir (corrupt: everything is dirty)."""
        out: dict[TopicPartition, int] = {}
        for log_dir in self.online_dirs():
            try:
                out.update(self._read_checkpoint(log_dir / CLEANER_CHECKPOINT_FILE) or {})
            except OSError as exc:
                self.fail_dir(log_dir, exc)
        return {tp: offset for tp, offset in out.items() if tp in self.logs}

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for log_dir in self.online_dirs():
            try:
                out.update(self._read_checkpoint(log_dir / HIGH_WATERMARK_CHECKPOINT_FILE) or {})
            except OSError as exc:
                self.fail_dir(log_dir, exc)
        return out

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int] | None:
        try:
            return OffsetCheckpointFile(path).read()
        except CorruptCheckpointError as exc:
            self._logger.warning("corrupt checkpoint, using the safe fallback", error=str(exc))
            return None

    # -- failures (Kafka's LogDirFailureChannel and handleLogDirFailure, KIP-112) -----------

    def online_dirs(self) -> list[Path]:
        return [d for d in self.log_dirs if d not in self.offline_dirs]

    def dir_of(self, tp: TopicPartition) -> Path | None:
        return self._dir_of.get(tp)

    def fail_dir(self, log_dir: Path, error: BaseException | str) -> list[TopicPartition]:
        """A write in `log_dir` failed: nothing more is written there. Its logs are closed
        and offline until the broker restarts (and recovers them). Returns the partitions
        that went offline with it. A transient error (out of descriptors) is raised again:
        no disk failed."""
        if is_transient(error):
            assert isinstance(error, BaseException)
            raise error
        if log_dir in self.offline_dirs:
            return []
        reason = f"log dir {log_dir} is offline: {error}"
        self.offline_dirs[log_dir] = reason
        self._logger.error("log dir failed; it is offline until a restart", reason=reason)
        gone = sorted(tp for tp, d in self._dir_of.items() if d == log_dir)
        return self._take_offline(gone, reason)

    def fail_log(self, tp: TopicPartition, error: BaseException | str) -> list[TopicPartition]:
        """Reading or opening this log failed: it alone is offline until the broker restarts
        (a transient error is raised again, as in `fail_dir`)."""
        if is_transient(error):
            assert isinstance(error, BaseException)
            raise error
        if tp in self.offline_logs:
            return []
        reason = f"the log of {tp[0]}-{tp[1]} is offline: {error}"
        self._logger.error("log failed; it is offline until a restart", reason=reason)
        return self._take_offline([tp], reason)

    def _take_offline(self, tps: list[TopicPartition], reason: str) -> list[TopicPartition]:
        newly = [tp for tp in tps if tp not in self.offline_logs]
        for tp in newly:
            self.offline_logs[tp] = reason
            log = self.logs.pop(tp, None)
            if log is not None:
                with contextlib.suppress(OSError):
                    log.close_files()
        if newly and self.on_offline is not None:
            self.on_offline(newly)
        return newly

    def _each_log(self, action: Callable[[Log], T]) -> list[T]:
        """`action` on every open log; one that fails with an OSError takes its dir offline
        (and the dir's other logs are skipped, being closed)."""
        results = []
        for tp, log in list(self.logs.items()):
            if tp not in self.logs:
                continue  # its dir went offline on the way
            try:
                results.append(action(log))
            except OSError as exc:
                self.fail_dir(self._dir_of[tp], exc)
        return results
