"""`consume -o`: kcat's offset forms, and where they put each partition.

`beginning`, `end`, `stored`, `N` (absolute), `-N` (N before the end), `s@T` (the first record
at or after time T), `e@T` (stop before the first record at or after T); `-o` may be given
twice, a start and an `e@` stop. T is ms since the epoch or ISO-8601 (no zone: local time, as
Kafka's tools). An absolute offset outside [log start, high watermark] is an error naming the
range, unless auto.offset.reset says what to do instead.
"""

from __future__ import annotations

import datetime
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from client.errors import HighwaterClientError
from protocol.errors import ErrorCode
from protocol.topic_partition import TopicPartition

__all__ = [
    "OffsetSpec",
    "SeekingConsumer",
    "Start",
    "parse_offsets",
    "parse_timestamp",
    "seek_start",
    "stop_offsets",
]

_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
StartKind = Literal["beginning", "end", "stored", "absolute", "from_end", "timestamp"]


@dataclass(frozen=True, slots=True)
class Start:
    kind: StartKind
    value: int = 0  # the offset, the count before the end, or the time (ms)


@dataclass(frozen=True, slots=True)
class OffsetSpec:
    start: Start = Start("end")
    stop_ms: int | None = None  # e@T


def parse_timestamp(text: str) -> int:
    """Milliseconds since the epoch, or an ISO-8601 date/time (no zone: local time)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = datetime.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(
            f"{text!r} is neither ms since the epoch nor ISO-8601 (e.g. 2024-05-01T12:00:00Z)"
        ) from None
    if moment.tzinfo is None:
        moment = moment.astimezone()  # local time, as Kafka's tools read a zoneless time
    return (moment - _EPOCH) // datetime.timedelta(milliseconds=1)


_WORDS: dict[str, StartKind] = {"beginning": "beginning", "end": "end", "stored": "stored"}


def _start(text: str) -> Start:
    if text in _WORDS:
        return Start(_WORDS[text])
    if text.startswith("s@"):
        return Start("timestamp", parse_timestamp(text[2:]))
    if text.startswith("-") and text[1:].isdigit():
        return Start("from_end", int(text[1:]))
    if text.isdigit():
        return Start("absolute", int(text))
    raise ValueError(f"{text!r} is not an offset (beginning, end, stored, N, -N, s@TIME, e@TIME)")


def parse_offsets(values: Sequence[str]) -> OffsetSpec:
    """The -o values: at most one start form and at most one e@ stop."""
    start: Start | None = None
    stop_ms: int | None = None
    for value in (v.strip() for v in values):
        if value.startswith("e@"):
            if stop_ms is not None:
                raise ValueError("e@ given twice")
            stop_ms = parse_timestamp(value[2:])
        elif start is not None:
            raise ValueError(f"two start offsets: {start.kind} and {value!r}")
        else:
            start = _start(value)
    return OffsetSpec(start or Start("end"), stop_ms)


class SeekingConsumer(Protocol):
    """What placing partitions needs of client.consumer.Consumer."""

    def seek(self, partition: tuple[str, int], offset: int) -> None: ...
    def seek_to_beginning(self, partitions: Sequence[tuple[str, int]]) -> None: ...
    def seek_to_end(self, partitions: Sequence[tuple[str, int]]) -> None: ...
    def seek_to_timestamp(
        self, timestamp_ms: int, partitions: Sequence[tuple[str, int]]
    ) -> None: ...
    async def beginning_offsets(
        self, partitions: Sequence[tuple[str, int]]
    ) -> Mapping[TopicPartition, int]: ...
    async def end_offsets(
        self, partitions: Sequence[tuple[str, int]]
    ) -> Mapping[TopicPartition, int]: ...
    async def offsets_for_times(
        self, timestamps: dict[tuple[str, int], int]
    ) -> Mapping[TopicPartition, tuple[int, int] | None]: ...


async def seek_start(
    consumer: SeekingConsumer, tps: Sequence[TopicPartition], start: Start, reset: str | None
) -> None:
    """Place every partition at `start`. An absolute offset outside a partition's [log start,
    high watermark] is OFFSET_OUT_OF_RANGE, unless `reset` (auto.offset.reset) is earliest or
    latest: then that partition starts there instead."""
    match start.kind:
        case "beginning":
            consumer.seek_to_beginning(tps)
        case "end":
            consumer.seek_to_end(tps)
        case "timestamp":
            consumer.seek_to_timestamp(start.value, tps)
        case "from_end":
            firsts, ends = await consumer.beginning_offsets(tps), await consumer.end_offsets(tps)
            for tp in tps:
                consumer.seek(tp, max(firsts[tp], ends[tp] - start.value))
        case "absolute":
            firsts, ends = await consumer.beginning_offsets(tps), await consumer.end_offsets(tps)
            for tp in tps:
                if firsts[tp] <= start.value <= ends[tp]:
                    consumer.seek(tp, start.value)
                elif reset == "earliest":
                    consumer.seek_to_beginning([tp])
                elif reset == "latest":
                    consumer.seek_to_end([tp])
                else:
                    raise HighwaterClientError(
                        f"OFFSET_OUT_OF_RANGE: offset {start.value} is not in "
                        f"{tp.topic}-{tp.partition}: valid are {firsts[tp]} (the log start "
                        f"offset) to {ends[tp]} (the high watermark); -o end or -o -N "
                        f"count from the end, -X auto.offset.reset=earliest|latest resets",
                        ErrorCode.OFFSET_OUT_OF_RANGE,
                    )
        case "stored":
            raise HighwaterClientError(
                "-o stored (the group's committed offsets) needs a consumer group (--group)"
            )


async def stop_offsets(
    consumer: SeekingConsumer,
    tps: Sequence[TopicPartition],
    stop_ms: int | None,
    exit_at_end: bool,
) -> dict[TopicPartition, int] | None:
    """Where each partition stops (exclusive): the first offset at or after e@T (none yet: the
    high watermark now), and with -e at most the high watermark now. None: never stop."""
    if stop_ms is None and not exit_at_end:
        return None
    ends = dict(await consumer.end_offsets(tps))
    if stop_ms is None:
        return ends
    found = await consumer.offsets_for_times({(tp.topic, tp.partition): stop_ms for tp in tps})
    stops = {}
    for tp in tps:
        at = found.get(tp)
        stops[tp] = ends[tp] if at is None else min(at[0], ends[tp])
    return stops
