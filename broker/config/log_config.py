"""Per-log settings, named after Kafka's (`log.segment.bytes` -> segment_bytes, ...).

These defaults and minimums are the only copy: settings.py takes its `log.*` defaults and
bounds from here. It imports nothing else of the broker, so the log engine (broker.log) can.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

__all__ = [
    "CLEANUP_POLICIES",
    "MIN_SEGMENT_BYTES",
    "MIN_SEGMENT_INDEX_BYTES",
    "NEVER_MS",
    "NO_LIMIT",
    "LogConfig",
]

NO_LIMIT: Final = -1
MIN_SEGMENT_BYTES: Final = 128
MIN_SEGMENT_INDEX_BYTES: Final = 64
_DAY_MS: Final = 24 * 60 * 60 * 1000
# Kafka's "never" for flush.messages / flush.ms (Long.MAX_VALUE): rely on replication.
_NEVER: Final = (1 << 63) - 1
NEVER_MS: Final = _NEVER
CLEANUP_POLICIES: Final = ("compact", "delete")


@dataclass(frozen=True, slots=True)
class LogConfig:
    segment_bytes: int = 1024 * 1024 * 1024  # log.segment.bytes
    segment_ms: int = 7 * _DAY_MS  # log.roll.ms (log.roll.hours=168)
    segment_index_bytes: int = 10 * 1024 * 1024  # log.index.size.max.bytes
    index_interval_bytes: int = 4096  # log.index.interval.bytes
    retention_ms: int = 7 * _DAY_MS  # retention.ms; -1: keep forever
    retention_bytes: int = NO_LIMIT  # retention.bytes; -1: no size limit
    flush_messages: int = _NEVER  # flush.messages (log.flush.interval.messages)
    flush_ms: int = _NEVER  # flush.ms (log.flush.interval.ms)
    max_message_bytes: int = 1024 * 1024 + 12  # message.max.bytes: the largest batch accepted
    producer_id_expiration_ms: int = _DAY_MS  # producer.id.expiration.ms (broker-wide)
    # cleanup.policy: "delete" (retention deletes old segments), "compact" (the log cleaner
    # keeps the latest record per key), or both.
    cleanup_policy: tuple[str, ...] = ("delete",)
    min_cleanable_dirty_ratio: float = 0.5  # min.cleanable.dirty.ratio
    min_compaction_lag_ms: int = 0  # min.compaction.lag.ms: records younger are not cleaned
    max_compaction_lag_ms: int = _NEVER  # max.compaction.lag.ms: dirtier logs are cleaned anyway
    delete_retention_ms: int = _DAY_MS  # delete.retention.ms: how long tombstones are kept

    @property
    def compact(self) -> bool:
        return "compact" in self.cleanup_policy

    @property
    def delete(self) -> bool:
        return "delete" in self.cleanup_policy

    def __post_init__(self) -> None:
        if self.segment_bytes < MIN_SEGMENT_BYTES:
            raise ValueError(
                f"segment_bytes {self.segment_bytes} is too small (min {MIN_SEGMENT_BYTES})"
            )
        if self.index_interval_bytes < 0:
            raise ValueError("index_interval_bytes must be >= 0")
        if self.segment_index_bytes < MIN_SEGMENT_INDEX_BYTES:
            raise ValueError(f"segment_index_bytes must be >= {MIN_SEGMENT_INDEX_BYTES}")
        if self.segment_ms <= 0 or self.flush_messages <= 0 or self.flush_ms < 0:
            raise ValueError("segment_ms and flush_messages must be > 0, flush_ms >= 0")
        if self.max_message_bytes <= 0:
            raise ValueError("max_message_bytes must be > 0")
        if not self.cleanup_policy or set(self.cleanup_policy) - {"compact", "delete"}:
            raise ValueError(f"cleanup_policy {self.cleanup_policy} is not compact and/or delete")
        if self.min_compaction_lag_ms < 0 or self.max_compaction_lag_ms < 1:
            raise ValueError("min_compaction_lag_ms must be >= 0, max_compaction_lag_ms >= 1")
