"""All partition logs of a broker across its log dirs (Kafka's LogManager), with the per-dir
files: recovery-point-offset-checkpoint, log-start-offset-checkpoint,
replication-offset-checkpoint (the HWs, for the replica layer), `.highwater_cleanshutdown`
(between a clean shutdown and the next start) and `.lock`. A corrupt checkpoint never loses
data silently: it falls back to recovering everything, to each log's first segment, or to a
HW of 0, and is logged.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import Final, TextIO

import structlog

from broker.log.checkpoints import CorruptCheckpointError, OffsetCheckpointFile, fsync_path
from broker.log.config import LogConfig
from broker.log.errors import LogStorageError
from broker.log.log import Log
from broker.stats import Timings
from protocol.topic_partition import TopicPartition

__all__ = [
    "CLEANER_CHECKPOINT_FILE",
    "CLEAN_SHUTDOWN_FILE",
    "HIGH_WATERMARK_CHECKPOINT_FILE",
    "LOG_START_OFFSET_CHECKPOINT_FILE",
    "RECOVERY_POINT_CHECKPOINT_FILE",
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
_TOPIC_RE: Final = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


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
        self.flush_timer = Timings()  # every log's flushes (the metrics read it)
        self._logger = structlog.get_logger("highwater.log_manager")

    # -- start and stop --------------------------------------------------------------------

    def startup(
        self, now_ms: int, configs: Mapping[TopicPartition, LogConfig] | None = None
    ) -> None:
        """Lock every log dir and open every log in it, recovering after an unclean stop."""
        configs = configs or {}
        for log_dir in self.log_dirs:
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
                tp = parse_log_dir_name(child.name) if child.is_dir() else None
                if tp is None:
                    continue
                if tp in self.logs:
                    raise LogStorageError(
                        f"{tp[0]}-{tp[1]} is in both {self._dir_of[tp]} and {log_dir}"
                    )
                self.logs[tp] = self._log_class.open(
                    child,
                    configs.get(tp, self.default_config),
                    now_ms=now_ms,
                    recovery_point=recovery_points.get(tp, 0),
                    log_start_offset=start_offsets.get(tp, 0),
                    clean_shutdown=clean,
                )
                self.logs[tp].flush_timer = self.flush_timer
                self._dir_of[tp] = log_dir
            # Only now, with every log recovered, is a crash "unclean" from here on.
            marker.unlink(missing_ok=True)
            self._logger.info(
                "log dir loaded", log_dir=str(log_dir), clean_shutdown=clean, logs=len(self.logs)
            )
        self.checkpoint(now_ms)

    def shutdown(self, now_ms: int) -> None:
        """Flush everything, write checkpoints, close, then leave the clean-shutdown marker."""
        for log in self.logs.values():
            log.flush(now_ms, indexes=True)
        self.checkpoint(now_ms)
        for log in self.logs.values():
            log.close()
        for log_dir in self.log_dirs:
            marker = log_dir / CLEAN_SHUTDOWN_FILE
            marker.write_bytes(b"")
            fsync_path(marker)
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
        topic, partition = tp
        if not _TOPIC_RE.fullmatch(topic) or partition < 0:
            raise ValueError(f"invalid topic-partition {tp!r}")
        log_dir = min(self.log_dirs, key=lambda d: sum(1 for v in self._dir_of.values() if v == d))
        log = self._log_class.open(
            log_dir / f"{topic}-{partition}", config or self.default_config, now_ms=now_ms
        )
        log.flush_timer = self.flush_timer
        self.logs[tp] = log
        self._dir_of[tp] = log_dir
        return log

    def delete_log(self, tp: TopicPartition) -> bool:
        """Remove a partition's data. The dir is renamed first so that a crash mid-way still
        finishes the deletion at the next start."""
        log = self.logs.pop(tp, None)
        self._dir_of.pop(tp, None)
        if log is None:
            return False
        log.close()
        doomed = log.directory.with_name(f"{log.directory.name}.{uuid.uuid4().hex}{DELETE_SUFFIX}")
        os.replace(log.directory, doomed)
        shutil.rmtree(doomed, ignore_errors=True)
        return True

    # -- periodic work (the broker's scheduler calls these with the time) -----------------

    def cleanup(self, now_ms: int) -> int:
        """Retention: delete expired or excess segments. Returns segments deleted."""
        return sum(log.delete_retention_breached_segments(now_ms) for log in self.logs.values())

    def remove_expired_producers(self, now_ms: int) -> int:
        """Forget idle idempotent producers in every log; how many."""
        return sum(log.remove_expired_producers(now_ms) for log in self.logs.values())

    def flush_dirty(self, now_ms: int) -> int:
        """The flush.ms policy across all logs. Returns how many logs were flushed."""
        return sum(1 for log in self.logs.values() if log.maybe_flush(now_ms))

    def checkpoint(self, now_ms: int) -> None:
        """Write recovery points and log start offsets of every log dir."""
        for log_dir in self.log_dirs:
            mine = {tp: log for tp, log in self.logs.items() if self._dir_of[tp] == log_dir}
            OffsetCheckpointFile(log_dir / RECOVERY_POINT_CHECKPOINT_FILE).write(
                {tp: log.recovery_point for tp, log in mine.items()}
            )
            OffsetCheckpointFile(log_dir / LOG_START_OFFSET_CHECKPOINT_FILE).write(
                {tp: log.log_start_offset for tp, log in mine.items()}
            )

    def checkpoint_high_watermarks(self, high_watermarks: Mapping[TopicPartition, int]) -> None:
        for log_dir in self.log_dirs:
            OffsetCheckpointFile(log_dir / HIGH_WATERMARK_CHECKPOINT_FILE).write(
                {tp: hw for tp, hw in high_watermarks.items() if self._dir_of.get(tp) == log_dir}
            )

    def checkpoint_cleaned(self, first_dirty_offsets: Mapping[TopicPartition, int]) -> None:
        """The cleaner-offset-checkpoint: how far each compacted log is clean."""
        for log_dir in self.log_dirs:
            OffsetCheckpointFile(log_dir / CLEANER_CHECKPOINT_FILE).write(
                {tp: o for tp, o in first_dirty_offsets.items() if self._dir_of.get(tp) == log_dir}
            )

    def read_cleaned(self) -> dict[TopicPartition, int]:
        """The cleaner-offset-checkpoint of every log dir (corrupt: everything is dirty)."""
        out: dict[TopicPartition, int] = {}
        for log_dir in self.log_dirs:
            out.update(self._read_checkpoint(log_dir / CLEANER_CHECKPOINT_FILE) or {})
        return {tp: offset for tp, offset in out.items() if tp in self.logs}

    def read_high_watermarks(self) -> dict[TopicPartition, int]:
        out: dict[TopicPartition, int] = {}
        for log_dir in self.log_dirs:
            out.update(self._read_checkpoint(log_dir / HIGH_WATERMARK_CHECKPOINT_FILE) or {})
        return out

    def _read_checkpoint(self, path: Path) -> dict[TopicPartition, int] | None:
        try:
            return OffsetCheckpointFile(path).read()
        except CorruptCheckpointError as exc:
            self._logger.warning("corrupt checkpoint, using the safe fallback", error=str(exc))
            return None
