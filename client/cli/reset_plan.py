"""`groups reset-offsets`: where each partition's committed offset goes (pure; kafka-consumer-
groups' ResetOffsets). --to-earliest, --to-latest, --to-offset N, --shift-by N (from the
committed offset), --to-datetime T and --by-duration D (the first offset at or after the time;
none: the latest). A new offset outside [log start, high watermark] is clamped into it, with a
warning, as Kafka does.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from protocol.topic_partition import TopicPartition

__all__ = [
    "PlannedReset",
    "ResetSpec",
    "parse_duration_ms",
    "parse_topic_partitions",
    "plan_resets",
]

ResetKind = Literal["earliest", "latest", "offset", "shift", "datetime", "duration"]

_DURATION = re.compile(
    r"^(?P<sign>[-+]?)P(?:(?P<days>\d+)D)?"
    r"(?:T(?:(?P<hours>\d+)H)?(?:(?P<minutes>\d+)M)?(?:(?P<seconds>\d+(?:\.\d{1,3})?)S)?)?$",
    re.IGNORECASE,
)


@dataclass(frozen=True, slots=True)
class ResetSpec:
    kind: ResetKind
    value: int = 0  # the offset, the shift, or the time (ms since the epoch)


@dataclass(frozen=True, slots=True)
class PlannedReset:
    tp: TopicPartition
    current: int | None  # the committed offset now (None: none)
    new: int
    warning: str | None = None  # clamped into the partition's range


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMn.nS), in ms; e.g.
    PT1H, P1DT12H, PT30M, PT0.5S. A negative duration is refused."""
    match = _DURATION.match(text.strip())
    if match is None or text.strip().upper() in ("P", "PT") or text.strip().upper().endswith("T"):
        raise ValueError(f"{text!r} is not an ISO-8601 duration such as PT1H, P1DT12H or PT30M")
    if match["sign"] == "-":
        raise ValueError(f"{text!r}: the duration must not be negative")
    seconds = float(match["seconds"] or 0)
    return (
        int(match["days"] or 0) * 86_400_000
        + int(match["hours"] or 0) * 3_600_000
        + int(match["minutes"] or 0) * 60_000
        + round(seconds * 1000)
    )


def parse_topic_partitions(text: str) -> tuple[str, tuple[int, ...] | None]:
    """`topic` (every partition) or `topic:0,1,2` (kafka-consumer-groups' --topic)."""
    topic, sep, rest = text.partition(":")
    if not topic:
        raise ValueError(f"{text!r}: no topic name")
    if not sep:
        return topic, None
    try:
        partitions = tuple(sorted({int(p) for p in rest.split(",")}))
    except ValueError:
        raise ValueError(f"{text!r}: expected TOPIC or TOPIC:0,1,2") from None
    if not partitions or partitions[0] < 0:
        raise ValueError(f"{text!r}: partitions must be numbers >= 0")
    return topic, partitions


def plan_resets(
    spec: ResetSpec,
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int | None],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
    by_time: Mapping[TopicPartition, int | None] | None = None,
) -> list[PlannedReset]:
    """The new offset of each partition. `by_time` (for datetime and duration): the first
    offset at or after the time, None where there is none. ValueError for --shift-by on a
    partition with nothing committed (as Kafka)."""
    plan = []
    for tp in sorted(partitions):
        current = committed.get(tp)
        low, high = earliest[tp], latest[tp]
        match spec.kind:
            case "earliest":
                wanted = low
            case "latest":
                wanted = high
            case "offset":
                wanted = spec.value
            case "shift":
                if current is None:
                    raise ValueError(
                        f"cannot shift {tp.topic}-{tp.partition}: the group has no committed "
                        "offset for it"
                    )
                wanted = current + spec.value
            case "datetime" | "duration":
                found = (by_time or {}).get(tp)
                wanted = high if found is None else found
        warning = None
        if wanted < low:
            warning = (
                f"{tp.topic}-{tp.partition}: new offset {wanted} is below the log start "
                f"offset {low}; {low} instead"
            )
            wanted = low
        elif wanted > high:
            warning = (
                f"{tp.topic}-{tp.partition}: new offset {wanted} is beyond the high watermark "
                f"{high}; {high} instead"
            )
            wanted = high
        plan.append(PlannedReset(tp, current, wanted, warning))
    return plan
