"""One assigned partition's position, fetch buffer and retry state (Kafka's
SubscriptionState.TopicPartitionState), and the small rules that move them."""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from operator import itemgetter
from typing import NamedTuple

from client.errors import HighwaterClientError
from protocol.messages.fetch import FetchPartition
from protocol.topic_partition import TopicPartition

__all__ = [
    "ConsumerRecord",
    "PartitionState",
    "advance_past_fetched",
    "back_off",
    "buffered_epoch",
    "clear_buffer",
    "epoch_or_none",
    "set_position",
]


class ConsumerRecord(NamedTuple):
    """One consumed record (immutable; a NamedTuple, as kafka-python's, so that building
    thousands per fetch stays cheap)."""

    topic: str
    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    timestamp_type: int = 0  # 0 create time, 1 log append time


@dataclass(slots=True)
class PartitionState:
    position: int | None = None  # next offset poll returns; None: a reset is pending
    reset: int | None = None  # pending reset: -2 earliest, -1 latest, >= 0 a timestamp
    # A group member's new partition: its position comes from the group's committed offset
    # (OffsetFetch), else from `reset`; a seek first makes that unnecessary.
    awaits_committed: bool = False
    # False while a group member lets go of the partition (revoked, lost): neither fetched nor
    # returned by poll (Kafka's pendingRevocation).
    fetchable: bool = True
    next_fetch_offset: int = 0
    # Fetched records not returned yet: buffer[buffer_pos:] (a list and an index, so poll
    # hands them out in slices rather than one popleft at a time).
    buffer: list[ConsumerRecord] = field(default_factory=list)
    buffer_pos: int = 0
    high_watermark: int = -1
    log_start_offset: int = -1
    fetch_bytes: int = 0  # raised above max_partition_fetch_bytes for an oversized batch
    retry_at: float = 0.0  # trio time before which this partition is not fetched
    failures: int = 0  # consecutive retriable errors: the backoff doubles with each
    # KIP-320. The leader epoch of the batch holding the record just before `position` (None:
    # nothing consumed since the last seek or reset, so nothing to validate) ...
    position_epoch: int | None = None
    # ... and the leader epoch (from the metadata) at which that position was last fetched or
    # validated; a different one in the metadata means a leader change: validate first.
    leader_epoch: int | None = None
    fetched_epoch: int | None = None  # the epoch of the last whole batch fetched
    # One (buffer index after the batch's last record, batch epoch) per buffered batch.
    buffer_epochs: list[tuple[int, int]] = field(default_factory=list)
    # A batch that could not be read after records that could: raised once those are polled
    # (as Kafka's fetcher returns what it read before the corrupt batch first).
    pending_error: HighwaterClientError | None = None
    # What the last Fetch asked for this partition (protocol.fetch_session.fetch_entry).
    fetch_entry: FetchPartition | None = None

    def awaits_validation(self, current_leader_epoch: int) -> bool:
        """Records were consumed under an earlier leader epoch than the metadata's."""
        return (
            current_leader_epoch >= 0
            and self.position_epoch is not None
            and self.leader_epoch is not None
            and self.leader_epoch != current_leader_epoch
        )


def clear_buffer(state: PartitionState) -> None:
    state.buffer = []
    state.buffer_pos = 0
    state.buffer_epochs = []


def set_position(state: PartitionState, offset: int, epoch: int | None = None) -> None:
    """A position from a seek or a reset (nothing consumed behind it, nothing to validate), or
    a group's committed offset with the epoch of the record before it (`epoch`): that one is
    validated (KIP-320) before the first fetch, as Kafka's consumer does."""
    state.position = offset
    state.next_fetch_offset = offset
    state.reset = None
    state.awaits_committed = False
    state.position_epoch = epoch
    state.leader_epoch = None if epoch is None else -1  # -1: never matches, so validate
    state.fetched_epoch = None
    state.pending_error = None
    clear_buffer(state)


def advance_past_fetched(state: PartitionState) -> None:
    """Everything fetched was returned: continue after the last whole batch (skipping records
    below a mid-batch fetch offset), which is then the batch the position's epoch comes from."""
    assert state.position is not None
    if state.next_fetch_offset > state.position:
        state.position = state.next_fetch_offset
        state.position_epoch = state.fetched_epoch


def buffered_epoch(state: PartitionState, index: int) -> int | None:
    """The leader epoch of the batch that buffer[index] came from."""
    marks = state.buffer_epochs
    at = bisect.bisect_right(marks, index, key=itemgetter(0))
    return epoch_or_none(marks[at][1]) if at < len(marks) else None


def epoch_or_none(epoch: int) -> int | None:
    return epoch if epoch >= 0 else None  # batches written without an epoch: nothing to check


def back_off(
    states: Mapping[TopicPartition, PartitionState],
    tps: Iterable[TopicPartition],
    now: float,
    backoff_ms: float,
    backoff_max_ms: float,
) -> None:
    """Retry these partitions after backoff_ms, doubled per consecutive failure up to
    backoff_max_ms (Kafka's exponential retry backoff)."""
    for tp in tps:
        state = states.get(tp)
        if state is not None:
            state.failures += 1
            wait_ms = min(backoff_max_ms, backoff_ms * (1 << min(state.failures - 1, 16)))
            state.retry_at = now + wait_ms / 1000
