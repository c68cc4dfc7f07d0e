"""What the Spark driver asks the cluster: a subscription's partitions and their offsets.

Each question is one short `trio.run` with a fresh metadata client, so nothing (no thread, no
socket) outlives the call inside Spark's long-lived Python worker.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

import trio

from client.errors import HighwaterClientError
from client.metadata import ClusterMetadata, list_offsets
from client.spark.offsets import EARLIEST, LATEST, PartitionOffsets, TopicPartition
from client.spark.options import SourceOptions

__all__ = ["OffsetSnapshot", "commit_for_lag", "offsets_for_timestamp", "snapshot"]

REQUEST_TIMEOUT_MS = 30_000
LAG_COMMIT_TIMEOUT_MS = 10_000  # a lag report never holds a micro-batch up for long


@dataclass(frozen=True)
class OffsetSnapshot:
    """The subscription's partitions now, with their high watermarks (the end of committed
    records) and, when asked for, their log start offsets."""

    latest: PartitionOffsets
    earliest: PartitionOffsets = field(default_factory=dict)


def snapshot(
    options: SourceOptions,
    *,
    earliest_for: Iterable[TopicPartition] | None = (),
) -> OffsetSnapshot:
    """The HW of every partition of the subscription, and the log start offset of
    `earliest_for` (None: of every partition)."""
    wanted = None if earliest_for is None else set(earliest_for)
    return trio.run(_snapshot, options, wanted)


def offsets_for_timestamp(
    options: SourceOptions, timestamp_ms: int
) -> tuple[PartitionOffsets, PartitionOffsets]:
    """Per partition, the first offset whose record timestamp is at or after `timestamp_ms`
    (-1 when there is none), and the partitions' HWs."""
    return trio.run(_for_timestamp, options, timestamp_ms)


async def _snapshot(
    options: SourceOptions, earliest_for: set[TopicPartition] | None
) -> OffsetSnapshot:
    metadata = _metadata(options)
    try:
        partitions = await _partitions(metadata, options)
        latest = await _offsets(metadata, partitions, LATEST)
        chosen = (
            partitions if earliest_for is None else [p for p in partitions if p in earliest_for]
        )
        earliest = await _offsets(metadata, chosen, EARLIEST) if chosen else {}
        return OffsetSnapshot(latest, earliest)
    finally:
        await metadata.aclose()


async def _for_timestamp(
    options: SourceOptions, timestamp_ms: int
) -> tuple[PartitionOffsets, PartitionOffsets]:
    metadata = _metadata(options)
    try:
        partitions = await _partitions(metadata, options)
        latest = await _offsets(metadata, partitions, LATEST)
        return await _offsets(metadata, partitions, timestamp_ms), latest
    finally:
        await metadata.aclose()


def _metadata(options: SourceOptions) -> ClusterMetadata:
    return ClusterMetadata(
        options.bootstrap_servers,
        client_id="highwater-spark",
        request_timeout_ms=REQUEST_TIMEOUT_MS,
        security=dict(options.security),
    )


async def _partitions(metadata: ClusterMetadata, options: SourceOptions) -> list[TopicPartition]:
    """The partitions the subscription covers now (a subscribed topic that does not exist yet
    has none; a pattern takes every matching topic, so new ones join)."""
    if options.assign is not None:
        return list(options.assign)
    if options.subscribe is not None:
        await metadata.refresh(options.subscribe)
    else:
        await metadata.refresh(all_topics=True)
    found: list[TopicPartition] = []
    for topic in metadata.topics:
        if options.matches(topic):
            found.extend(TopicPartition(topic, p) for p in metadata.partitions_for(topic) or ())
    return sorted(found)


async def _offsets(
    metadata: ClusterMetadata, partitions: Iterable[TopicPartition], timestamp: int
) -> PartitionOffsets:
    wanted = {(tp.topic, tp.partition): timestamp for tp in partitions}
    if not wanted:
        return {}
    found = await list_offsets(metadata, wanted, timeout_ms=REQUEST_TIMEOUT_MS)
    return {TopicPartition(*tp): offset for tp, (offset, _) in found.items()}


def commit_for_lag(options: SourceOptions, offsets: PartitionOffsets) -> str | None:
    """Commit `offsets` to the option groupIdForLag's group from outside the group (as
    `groups reset-offsets` does): only for `groups describe`'s lag. None, or why it failed."""
    assert options.group_id_for_lag is not None
    return trio.run(_commit_for_lag, options, options.group_id_for_lag, offsets)


async def _commit_for_lag(
    options: SourceOptions, group_id: str, offsets: PartitionOffsets
) -> str | None:
    from client.admin import Admin  # only for queries with groupIdForLag (import time)

    try:
        with trio.fail_after(LAG_COMMIT_TIMEOUT_MS / 1000):
            async with Admin(
                options.bootstrap_servers,
                client_id="highwater-spark",
                security=dict(options.security),
                request_timeout_ms=LAG_COMMIT_TIMEOUT_MS,
            ) as admin:
                await admin.alter_group_offsets(
                    group_id, {(tp.topic, tp.partition): o for tp, o in offsets.items()}
                )
    except (HighwaterClientError, trio.TooSlowError, OSError) as exc:
        return str(exc) or type(exc).__name__
    return None
