"""Telling the caller that a partition's records wait for a retry (Kafka's Sender logs every
retry at WARN; here a callback, at most once per partition every RETRY_NOTICE_INTERVAL_MS)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final

from client.metadata import ClusterMetadata
from client.producer.answers import KNOWN_CODES
from client.producer.batch import ProducerBatch
from protocol.errors import ErrorCode

__all__ = ["RETRY_NOTICE_INTERVAL_MS", "RetryNotice", "RetryNotices", "leader_error"]

RETRY_NOTICE_INTERVAL_MS: Final = 5_000


@dataclass(frozen=True, slots=True)
class RetryNotice:
    """A partition's records wait for a retry: its leader refused them or is unknown
    (LEADER_NOT_AVAILABLE), or the request failed (NETWORK_EXCEPTION, REQUEST_TIMED_OUT). They
    are retried until delivery_timeout_ms after each was queued."""

    topic: str
    partition: int
    error: str  # Kafka's error name
    records_waiting: int  # the partition's records not yet acknowledged or failed
    waiting_ms: float  # since the oldest of them was queued


class RetryNotices:
    """Calls `on_retry` for a partition whose records wait, at most once per interval."""

    def __init__(self, on_retry: Callable[[RetryNotice], None] | None) -> None:
        self._on_retry = on_retry
        self._noticed_ms: dict[tuple[str, int], float] = {}  # the last notice's time

    def notice(
        self,
        topic: str,
        partition: int,
        error: str,
        now: float,
        incomplete: Iterable[ProducerBatch],
    ) -> None:
        on_retry = self._on_retry
        if on_retry is None:
            return
        tp = (topic, partition)
        last = self._noticed_ms.get(tp)
        if last is not None and now - last < RETRY_NOTICE_INTERVAL_MS:
            return
        waiting = [b for b in incomplete if b.partition == partition and b.topic == topic]
        if not waiting:
            return
        self._noticed_ms[tp] = now
        records = sum(b.record_count for b in waiting)
        oldest = min(b.created_ms for b in waiting)
        on_retry(RetryNotice(topic, partition, error, records, now - oldest))


def leader_error(metadata: ClusterMetadata, topic: str, partition: int) -> str:
    """Why a partition has no known leader, by Kafka's error name."""
    info = metadata.partition_info(topic, partition)
    if info is None:
        return ErrorCode.UNKNOWN_TOPIC_OR_PARTITION.name
    if info.error_code in KNOWN_CODES and info.error_code != ErrorCode.NONE:
        return ErrorCode(info.error_code).name
    return ErrorCode.LEADER_NOT_AVAILABLE.name
