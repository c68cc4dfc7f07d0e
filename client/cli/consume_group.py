"""`consume --group G`: read as a member of consumer group G (docs/groups.md).

The group's coordinator assigns the partitions; each starts at the group's committed offset
(else auto.offset.reset). What is committed is exactly what was printed: per partition its
position (every record poll() returns is printed, --max-messages limits the poll itself), cut
at its -e / e@ stop; every auto.commit.interval.ms, when a partition moves to another member,
and at the end (Ctrl-C, --max-messages, -e), so a second run continues where the first
stopped. -X enable.auto.commit=false reads without committing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

import trio

from client.cli.format import RecordView
from client.cli.offsets import stop_offsets
from client.consumer import Consumer, ConsumerRecord, RebalanceListener, TopicPartition
from client.errors import HighwaterClientError
from client.settings import MAX_POLL_RECORDS

__all__ = ["GroupProgress", "consume_in_group"]

POLL_TIMEOUT_MS = 500
COMMIT_TIMEOUT_MS = 15_000  # one commit, also the last one at Ctrl-C


@dataclass
class GroupProgress:
    """What the group holds of this run's partitions, and where -e / e@ stop them."""

    group: str
    commit: bool  # False: -X enable.auto.commit=false
    committed: dict[TopicPartition, int] = field(default_factory=dict)
    stops: dict[TopicPartition, int] = field(default_factory=dict)
    commit_error: str | None = None

    def forget(self, partitions: Collection[TopicPartition]) -> None:
        for tp in partitions:
            self.stops.pop(tp, None)

    async def printed(
        self, consumer: Consumer, only: Collection[TopicPartition] | None
    ) -> dict[TopicPartition, int]:
        """Per owned partition (of `only`) the offset after the last printed record, where
        that differs from what is committed."""
        owned = consumer.assignment()
        out = {}
        for tp in sorted(owned if only is None else owned & set(only)):
            try:
                position = await consumer.position(tp)
            except HighwaterClientError:
                continue  # not placed yet: nothing printed
            stop = self.stops.get(tp)
            offset = position if stop is None else min(position, stop)
            if self.committed.get(tp) != offset:
                out[tp] = offset
        return out

    async def commit_printed(
        self, consumer: Consumer, only: Collection[TopicPartition] | None = None
    ) -> None:
        """Commit what was printed (of `only`); a failure is kept for the summary."""
        if not self.commit:
            return
        offsets = await self.printed(consumer, only)
        if not offsets:
            return
        try:
            await consumer.commit(
                {(tp.topic, tp.partition): o for tp, o in offsets.items()},
                timeout_ms=COMMIT_TIMEOUT_MS,
            )
        except HighwaterClientError as exc:
            self.commit_error = str(exc)
            return
        self.committed.update(offsets)
        self.commit_error = None


class _Listener(RebalanceListener):
    def __init__(
        self,
        consumer: Consumer,
        progress: GroupProgress,
        stop_ms: int | None,
        exit_at_end: bool,
    ) -> None:
        self.consumer = consumer
        self.progress = progress
        self.stop_ms = stop_ms
        self.exit_at_end = exit_at_end

    async def on_partitions_assigned(self, partitions: set[TopicPartition]) -> None:
        stops = await stop_offsets(
            self.consumer, sorted(partitions), self.stop_ms, self.exit_at_end
        )
        if stops is not None:
            self.progress.stops.update(stops)

    async def on_partitions_revoked(self, partitions: set[TopicPartition]) -> None:
        await self.progress.commit_printed(self.consumer, partitions)
        self.progress.forget(partitions)

    async def on_partitions_lost(self, partitions: set[TopicPartition]) -> None:
        self.progress.forget(partitions)  # another member may have them: nothing to commit


async def _all_stopped(consumer: Consumer, progress: GroupProgress) -> bool:
    """-e / e@: every partition this member owns reached its stop, and the group settled."""
    member = consumer.group_metadata()
    if member is None or member.state != "stable":
        return False
    for tp in consumer.assignment():
        stop = progress.stops.get(tp)
        if stop is None or await consumer.position(tp) < stop:
            return False
    return True


async def consume_in_group(
    consumer: Consumer,
    topics: Sequence[str],
    pattern: str | None,
    stop_ms: int | None,
    exit_at_end: bool,
    max_messages: int | None,
    render: Callable[[RecordView], bytes],
    out: BinaryIO,
    progress: GroupProgress,
    count: Callable[[int], int],
) -> None:
    """Join, then print until --max-messages, the stops, or cancellation (Ctrl-C). The caller
    commits what was printed at the end (commit_printed), outside any cancelled scope."""
    listener = _Listener(consumer, progress, stop_ms, exit_at_end)
    consumer.subscribe(list(topics) if pattern is None else re.compile(pattern), listener=listener)
    stopping = stop_ms is not None or exit_at_end
    interval_s = consumer.auto_commit_interval_ms / 1000
    next_commit = trio.current_time() + interval_s
    printed = 0
    while max_messages is None or printed < max_messages:
        limit = MAX_POLL_RECORDS
        if max_messages is not None:
            limit = min(limit, max_messages - printed)
        records: Sequence[ConsumerRecord] = await consumer.poll(
            timeout_ms=POLL_TIMEOUT_MS, max_records=limit
        )
        if stopping:
            stops = progress.stops
            records = [
                r for r in records if r.offset < stops.get(TopicPartition(r.topic, r.partition), 0)
            ]
        if records:
            out.write(b"".join(render(r) for r in records))
            out.flush()
            printed = count(len(records))
        if trio.current_time() >= next_commit:
            await progress.commit_printed(consumer)
            next_commit = trio.current_time() + interval_s
        if stopping and await _all_stopped(consumer, progress):
            return
