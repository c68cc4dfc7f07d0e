"""Committed offsets (Kafka's CommitRequestManager): OffsetCommit and OffsetFetch to the
group's coordinator, with the retries docs/groups.md asks for. A member commits with its id
and epoch; an admin (and a consumer outside the group) with member id "" and epoch -1, which
the coordinator accepts only while the group has no members. Used by the consumer and admin.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

import trio

from client.consumer.coordinator import COORDINATOR_ERRORS, Coordinator
from client.errors import CommitFailedError, HighwaterTimeoutError, error_for_code
from protocol.errors import ErrorCode
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
)
from protocol.messages.offset_fetch import (
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopicRequest,
)
from protocol.topic_partition import TopicPartition

__all__ = [
    "ADMIN_MEMBER",
    "OffsetAndMetadata",
    "Offsets",
    "commit_offsets",
    "fetch_committed",
    "to_offsets",
]

ADMIN_MEMBER = ("", -1)
_RETRIED_COMMIT_ERRORS = frozenset(
    {ErrorCode.STALE_MEMBER_EPOCH, ErrorCode.REQUEST_TIMED_OUT, ErrorCode.NETWORK_EXCEPTION}
)  # (member id, member epoch) of a commit from outside the group


class OffsetAndMetadata(NamedTuple):
    """A committed position (Kafka's OffsetAndMetadata): the next offset to consume, an
    optional note, and the leader epoch of the record before it (KIP-320)."""

    offset: int
    metadata: str | None = None
    leader_epoch: int | None = None


# Offsets to commit, per (topic, partition): the next offset to read, or an OffsetAndMetadata.
Offsets = (
    Mapping[TopicPartition, int | OffsetAndMetadata]
    | Mapping[tuple[str, int], int | OffsetAndMetadata]
)


def to_offsets(offsets: Offsets) -> dict[TopicPartition, OffsetAndMetadata]:
    out = {}
    for (topic, partition), value in offsets.items():
        committed = value if isinstance(value, OffsetAndMetadata) else OffsetAndMetadata(value)
        if committed.offset < 0:
            raise ValueError(f"{topic}-{partition}: a committed offset must be >= 0")
        out[TopicPartition(topic, partition)] = committed
    return out


def _commit_request(
    group_id: str,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    member: tuple[str, int],
    instance_id: str | None,
) -> OffsetCommitRequest:
    topics: dict[str, list[OffsetCommitPartition]] = {}
    for tp, committed in sorted(offsets.items()):
        epoch = -1 if committed.leader_epoch is None else committed.leader_epoch
        topics.setdefault(tp.topic, []).append(
            OffsetCommitPartition(tp.partition, committed.offset, epoch, committed.metadata)
        )
    return OffsetCommitRequest(
        group_id,
        tuple(OffsetCommitTopic(t, tuple(ps)) for t, ps in topics.items()),
        member_epoch=member[1],
        member_id=member[0],
        group_instance_id=instance_id,
    )


def _first_commit_error(response: OffsetCommitResponse) -> int:
    for topic in response.topics:
        for partition in topic.partitions:
            if partition.error_code:
                return partition.error_code
    return 0


async def commit_offsets(
    coordinator: Coordinator,
    offsets: Mapping[TopicPartition, OffsetAndMetadata],
    member: Callable[[], tuple[str, int]],
    timeout_ms: float,
    *,
    instance_id: str | None = None,
) -> None:
    """Commit `offsets` for the coordinator's group, as `member()` (id, epoch) at each try.

    Retried until timeout_ms: coordinator errors (looked up again), retriable partition errors
    and STALE_MEMBER_EPOCH (the member's epoch moved on; the next try carries the new one).
    UNKNOWN_MEMBER_ID is CommitFailedError (the member was removed, or, for a commit from
    outside the group, the group has members); other errors raise with their Kafka name.
    """
    group = coordinator.group_id
    deadline = trio.current_time() + timeout_ms / 1000
    pending = dict(offsets)
    problem = ""
    sent_as = ADMIN_MEMBER  # the identity of the request last sent: what an answer is about

    def build() -> OffsetCommitRequest:
        nonlocal sent_as
        sent_as = member()
        return _commit_request(group, pending, sent_as, instance_id)

    while pending:
        remaining_ms = (deadline - trio.current_time()) * 1000
        response: OffsetCommitResponse = await coordinator.call(
            build, _first_commit_error, max(remaining_ms, 1.0), "commit offsets"
        )
        answered = set()
        for topic in response.topics:
            for result in topic.partitions:
                tp = TopicPartition(topic.name, result.partition_index)
                if tp not in pending:
                    continue
                answered.add(tp)
                code = result.error_code
                if code == ErrorCode.NONE:
                    del pending[tp]
                elif code == ErrorCode.UNKNOWN_MEMBER_ID:
                    raise CommitFailedError(
                        f"UNKNOWN_MEMBER_ID: commit offsets for group {group!r}: "
                        + (
                            "the group has active members (offsets can be changed from "
                            "outside a group only while it is empty)"
                            if sent_as == ADMIN_MEMBER
                            else "this member is no longer in the group"
                        )
                    )
                elif _retriable_commit_error(code):
                    problem = ErrorCode(code).name
                else:
                    raise error_for_code(
                        code, f"commit offset {pending[tp].offset} of {tp} for group {group!r}"
                    )
        if not pending:
            return
        if not answered:
            problem = "the coordinator answered for none of the partitions"
        remaining = deadline - trio.current_time()
        if remaining <= 0:
            raise HighwaterTimeoutError(
                f"commit offsets for group {group!r} not done within {timeout_ms:.0f} ms "
                f"({problem}): {', '.join(map(str, sorted(pending)))}"
            )
        await trio.sleep(min(remaining, coordinator.retry_backoff_ms / 1000))


async def fetch_committed(
    coordinator: Coordinator,
    partitions: Iterable[TopicPartition] | None,
    timeout_ms: float,
) -> dict[TopicPartition, OffsetAndMetadata | None]:
    """The group's committed offset of each partition (None: none committed); every committed
    partition when `partitions` is None."""
    group = coordinator.group_id
    wanted = None if partitions is None else sorted(set(partitions))
    by_topic: dict[str, list[int]] = {}
    for tp in wanted or ():
        by_topic.setdefault(tp.topic, []).append(tp.partition)
    request = OffsetFetchRequest(
        group,
        None
        if wanted is None
        else tuple(OffsetFetchTopicRequest(t, tuple(ps)) for t, ps in by_topic.items()),
    )
    deadline = trio.current_time() + timeout_ms / 1000
    while True:
        remaining_ms = (deadline - trio.current_time()) * 1000
        response: OffsetFetchResponse = await coordinator.call(
            lambda: request, _first_fetch_error, max(remaining_ms, 1.0), "fetch committed offsets"
        )
        retriable = _first_fetch_error(response)
        if not retriable:
            break
        if not (retriable in ErrorCode._value2member_map_ and ErrorCode(retriable).retriable):
            raise error_for_code(retriable, f"fetch committed offsets of group {group!r}")
        remaining = deadline - trio.current_time()
        if remaining <= 0:
            raise HighwaterTimeoutError(
                f"{ErrorCode(retriable).name}: fetch committed offsets of group {group!r}: "
                f"not done within {timeout_ms:.0f} ms"
            )
        await trio.sleep(min(remaining, coordinator.retry_backoff_ms / 1000))
    found: dict[TopicPartition, OffsetAndMetadata | None] = dict.fromkeys(wanted or ())
    for topic in response.topics:
        for p in topic.partitions:
            tp = TopicPartition(topic.name, p.partition_index)
            if wanted is not None and tp not in found:
                continue
            if p.committed_offset < 0:
                if wanted is not None:
                    found[tp] = None
                continue
            epoch = p.committed_leader_epoch if p.committed_leader_epoch >= 0 else None
            found[tp] = OffsetAndMetadata(p.committed_offset, p.metadata, epoch)
    return found


def _retriable_commit_error(code: int) -> bool:
    """Kafka's CommitRequestManager: the coordinator's errors and a stale epoch are retried;
    UNKNOWN_TOPIC_OR_PARTITION (no such topic) and the rest are final."""
    return code in COORDINATOR_ERRORS or code in _RETRIED_COMMIT_ERRORS


def _first_fetch_error(response: OffsetFetchResponse) -> int:
    if response.error_code:
        return response.error_code
    for topic in response.topics:
        for partition in topic.partitions:
            if (
                partition.error_code
                and partition.error_code != ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
            ):
                return partition.error_code
    return 0
