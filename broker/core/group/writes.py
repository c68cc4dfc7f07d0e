"""What both shells of the group coordinator (broker/group_coordinator.py and the simulator's)
do the same way: records to batches, a failed write's error for the client (Kafka's
GroupCoordinatorService.normalizeException), replaying fetched batches while loading, and
which broker coordinates a group."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from broker.core.actions import Actions
from broker.core.group.coordinator import GroupCoordinatorCore, PartitionLoad, partition_for
from broker.core.group.records import CoordinatorRecord
from broker.core.metadata_cache import MetadataCache
from broker.core.state import BrokerState
from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.records import Record, build_batch, decode_batches
from protocol.topic_partition import OFFSETS_TOPIC, TopicPartition

__all__ = [
    "Leadership",
    "Load",
    "coordinator_batches",
    "coordinator_of",
    "follow_leadership",
    "replay_batches",
    "write_error",
]

_BATCH_BYTES: Final = 512 * 1024  # records per batch up to about this (message.max.bytes: 1 MB)
_WRITE_ERRORS: Final = {
    ErrorCode.NOT_ENOUGH_REPLICAS: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.REQUEST_TIMED_OUT: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: ErrorCode.COORDINATOR_NOT_AVAILABLE,
    ErrorCode.NOT_LEADER_OR_FOLLOWER: ErrorCode.NOT_COORDINATOR,
    ErrorCode.KAFKA_STORAGE_ERROR: ErrorCode.NOT_COORDINATOR,
}


def write_error(code: int) -> ErrorCode:
    """What a client is told when appending a decision's records failed with `code`."""
    return _WRITE_ERRORS.get(ErrorCode(code), ErrorCode.UNKNOWN_SERVER_ERROR)


def coordinator_batches(records: Sequence[CoordinatorRecord], wall_ms: int) -> bytes:
    """The records as batches of up to about 512 KiB each, ready to append, stamped with the
    wall clock `wall_ms`."""
    out: list[bytes] = []
    chunk: list[Record] = []
    size = 0
    for key, value in records:
        chunk.append(Record(value, key=key, timestamp_ms=wall_ms))
        size += len(key) + len(value or b"") + 16
        if size >= _BATCH_BYTES:
            out.append(build_batch(chunk, now_ms=wall_ms))
            chunk, size = [], 0
    if chunk:
        out.append(build_batch(chunk, now_ms=wall_ms))
    return b"".join(out)


def replay_batches(core: GroupCoordinatorCore, data: bytes) -> tuple[int, int, int]:
    """Replay the records of the whole batches in `data` (a read of an offsets partition);
    returns (the offset after the last batch or -1, records replayed, malformed ones)."""
    next_offset, replayed, malformed = -1, 0, 0
    for batch in decode_batches(data):
        for record in batch.records:
            if record.key is None:
                continue
            try:
                core.replay(record.key, record.value)
                replayed += 1
            except ValueError:
                malformed += 1
        next_offset = batch.header.next_offset
    return next_offset, replayed, malformed


def coordinator_of(metadata: MetadataCache, group_id: str) -> BrokerEndpoint | None:
    """The live broker leading the group's offsets partition, if any (the partition counted
    over the topic's actual partitions, as Kafka does)."""
    partitions = metadata.topics.get(OFFSETS_TOPIC)
    if not partitions:
        return None
    info = partitions.get(partition_for(group_id, len(partitions)))
    return metadata.brokers.get(info.leader) if info is not None else None


class Load(NamedTuple):
    """A load for the shell to run: replay `partition`, led at `leader_epoch`, as long as
    `load_id` is its current load (GroupCoordinatorCore.begin_load)."""

    partition: int
    leader_epoch: int
    load_id: int


class Leadership(NamedTuple):
    """What following leadership asks of the shell: the `loads` to start, and `actions` to
    apply first: waking the offsets partitions whose load was abandoned, so that a load
    parked for its HW (runtime.DelayedLoad) completes, not loaded, at once."""

    loads: list[Load]
    actions: Actions


def follow_leadership(core: GroupCoordinatorCore, state: BrokerState) -> Leadership:
    """After a controller request: forget the offsets partitions this broker no longer leads
    (or leads in a new epoch), and begin loading the ones it now leads. Groups map over the
    topic's actual partition count once it exists; a new count reloads every partition, each
    at the leader epoch it already had, as a new load."""
    loading = {
        p: load_id
        for p, load_id in core.load_ids.items()
        if core.partitions.get(p) is PartitionLoad.LOADING
    }
    existing = state.metadata.topics.get(OFFSETS_TOPIC)
    if existing and len(existing) != core.num_partitions:
        core.leader_epochs.clear()
        core.use_partition_count(len(existing))
    led = {
        tp.partition: partition.leader_epoch
        for tp, partition in state.replica_manager.partitions.items()
        if tp.topic == OFFSETS_TOPIC and partition.is_leader
    }
    for p in [p for p, epoch in core.leader_epochs.items() if led.get(p) != epoch]:
        del core.leader_epochs[p]
        core.unload(p)
    loads: list[Load] = []
    for p, epoch in sorted(led.items()):
        if p not in core.leader_epochs:
            core.leader_epochs[p] = epoch
            loads.append(Load(p, epoch, core.begin_load(p)))
    abandoned = [
        TopicPartition(OFFSETS_TOPIC, p)
        for p, load_id in sorted(loading.items())
        if not core.is_current_load(p, load_id)
    ]
    return Leadership(loads, Actions(complete_keys=abandoned))
