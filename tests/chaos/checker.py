"""The checker: Jepsen's anomalies for a Kafka-like log, from a recorded history.

Pure: it takes what the workload recorded (every send's outcome, every record each consumer
polled, in order) and what a final read of every partition returned after the cluster healed,
and names what went wrong. Values are unique per send, so a value identifies a write.

- lost-write: acknowledged, but not in the final read of its partition.
- unseen: acknowledged and in the final read, but never polled by a consumer that ran to the end.
- duplicate: one value at more than one (partition, offset).
- inconsistent-offsets: one (partition, offset) holding different values (across consumers and
  the final read), or an acknowledged offset that holds another value.
- nonmonotonic-poll: within one consumer and partition, an offset not above the one before.
- poll-skip: within one consumer and partition, offsets jumped over records that exist
  (consumers start at offset 0, so a first poll past 0 skipped too).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import ClassVar

__all__ = [
    "ANOMALIES",
    "AnomalyReport",
    "CheckReport",
    "Poll",
    "SendOutcome",
    "SendStatus",
    "check",
    "interim_check",
]

ANOMALIES = (
    "lost-write",
    "unseen",
    "duplicate",
    "inconsistent-offsets",
    "nonmonotonic-poll",
    "poll-skip",
)
_EXAMPLES_KEPT = 5


class SendStatus(Enum):
    ACKED = "acked"
    FAILED = "failed"  # the broker said it was not written
    UNKNOWN = "unknown"  # timed out, connection lost, or the producer stopped: maybe written


@dataclass(frozen=True, slots=True)
class SendOutcome:
    value: bytes
    status: SendStatus
    partition: int = -1
    offset: int = -1  # acked only


@dataclass(frozen=True, slots=True)
class Poll:
    """One record as a consumer received it."""

    consumer: int
    partition: int
    offset: int
    value: bytes | None


@dataclass
class AnomalyReport:
    """Counts and a few examples per anomaly; subclasses name their anomalies."""

    NAMES: ClassVar[tuple[str, ...]] = ()
    TITLE: ClassVar[str] = "anomaly"
    counts: dict[str, int] = field(default_factory=dict)
    examples: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def __post_init__(self) -> None:
        for name in self.NAMES:
            self.counts.setdefault(name, 0)

    @property
    def ok(self) -> bool:
        return not any(self.counts.values())

    def add(self, anomaly: str, example: str) -> None:
        self.counts[anomaly] += 1
        if len(self.examples[anomaly]) < _EXAMPLES_KEPT:
            self.examples[anomaly].append(example)

    def table(self) -> str:
        width = max(len(a) for a in (self.TITLE, *self.NAMES))
        lines = [f"{self.TITLE:<{width}}  count  examples"]
        for anomaly in self.NAMES:
            shown = "; ".join(self.examples.get(anomaly, []))
            lines.append(f"{anomaly:<{width}}  {self.counts[anomaly]:>5}  {shown}")
        return "\n".join(lines)


@dataclass
class CheckReport(AnomalyReport):
    NAMES: ClassVar[tuple[str, ...]] = ANOMALIES
    acked: int = 0
    failed: int = 0
    unknown: int = 0
    polled: int = 0
    final_records: int = 0


def check(
    sends: Iterable[SendOutcome],
    polls: Sequence[Poll],
    final: Mapping[int, Sequence[bytes | None]],
    *,
    consumers_ran_to_end: Iterable[int] = (),
) -> CheckReport:
    """`final[p]` is partition p read from offset 0 to its HW after healing (index = offset)."""
    report = CheckReport()
    sends = list(sends)
    report.acked = sum(s.status is SendStatus.ACKED for s in sends)
    report.failed = sum(s.status is SendStatus.FAILED for s in sends)
    report.unknown = sum(s.status is SendStatus.UNKNOWN for s in sends)
    report.polled = len(polls)
    report.final_records = sum(len(v) for v in final.values())

    where: dict[bytes, list[tuple[int, int]]] = defaultdict(list)
    for partition, values in final.items():
        for offset, value in enumerate(values):
            if value is not None:
                where[value].append((partition, offset))
    _duplicates(report, where, polls)
    _offsets(report, sends, polls, final)
    _lost_and_unseen(report, sends, polls, where, set(consumers_ran_to_end))
    _poll_order(report, polls, final)
    return report


def _duplicates(
    report: CheckReport, where: Mapping[bytes, list[tuple[int, int]]], polls: Sequence[Poll]
) -> None:
    seen: dict[bytes, set[tuple[int, int]]] = defaultdict(set)
    for value, places in where.items():
        seen[value].update(places)
    for poll in polls:
        if poll.value is not None:
            seen[poll.value].add((poll.partition, poll.offset))
    for value, found in seen.items():
        if len(found) > 1:
            report.add("duplicate", f"{value!r} at {sorted(found)}")


def _offsets(
    report: CheckReport,
    sends: Sequence[SendOutcome],
    polls: Sequence[Poll],
    final: Mapping[int, Sequence[bytes | None]],
) -> None:
    values_at: dict[tuple[int, int], set[bytes | None]] = defaultdict(set)
    for partition, values in final.items():
        for offset, value in enumerate(values):
            values_at[(partition, offset)].add(value)
    for poll in polls:
        values_at[(poll.partition, poll.offset)].add(poll.value)
    for place, held in sorted(values_at.items()):
        if len(held) > 1:
            report.add("inconsistent-offsets", f"{place}: {sorted(map(repr, held))}")
    for send in sends:
        if send.status is not SendStatus.ACKED:
            continue
        stored = final.get(send.partition, ())
        if send.offset < len(stored) and stored[send.offset] != send.value:
            report.add(
                "inconsistent-offsets",
                f"acked {send.value!r} at {send.partition}/{send.offset}, "
                f"which holds {stored[send.offset]!r}",
            )


def _lost_and_unseen(
    report: CheckReport,
    sends: Sequence[SendOutcome],
    polls: Sequence[Poll],
    where: Mapping[bytes, list[tuple[int, int]]],
    to_end: set[int],
) -> None:
    polled_by: dict[int, set[bytes]] = defaultdict(set)
    for poll in polls:
        if poll.value is not None:
            polled_by[poll.consumer].add(poll.value)
    for send in sends:
        if send.status is not SendStatus.ACKED:
            continue
        if send.value not in where:
            report.add("lost-write", f"{send.value!r} acked at {send.partition}/{send.offset}")
            continue
        for consumer in sorted(to_end):
            if send.value not in polled_by[consumer]:
                report.add("unseen", f"{send.value!r} never polled by consumer {consumer}")


def _poll_order(
    report: CheckReport, polls: Sequence[Poll], final: Mapping[int, Sequence[bytes | None]]
) -> None:
    last: dict[tuple[int, int], int] = {}
    for poll in polls:
        key = (poll.consumer, poll.partition)
        before = last.get(key, -1)  # consumers read every partition from offset 0
        where = f"consumer {poll.consumer} partition {poll.partition}: {before} then {poll.offset}"
        if poll.offset <= before:
            report.add("nonmonotonic-poll", where)
        elif poll.offset > before + 1:
            # Offsets are dense in a log without compaction or transactions: a jump skipped
            # records, unless the log really has none there.
            stored = final.get(poll.partition, ())
            if before + 1 < len(stored):
                report.add("poll-skip", where)
        last[key] = poll.offset


def interim_check(sends: Sequence[SendOutcome], polls: Sequence[Poll]) -> CheckReport:
    """What can be named while the run goes on, before any final read: an acked offset a
    consumer polled holding another value, one offset polled with different values, one value
    polled at several places, polls out of order, and a consumer jumping over an acked offset.
    (lost-write and unseen need the final read: the consumers may just be behind.)"""
    report = CheckReport()
    report.acked = sum(s.status is SendStatus.ACKED for s in sends)
    report.polled = len(polls)
    _duplicates(report, {}, polls)
    _offsets(report, (), polls, {})
    polled_at: dict[tuple[int, int], set[bytes | None]] = defaultdict(set)
    for poll in polls:
        polled_at[(poll.partition, poll.offset)].add(poll.value)
    acked_end: dict[int, int] = defaultdict(int)  # per partition, past the highest acked offset
    for send in sends:
        if send.status is not SendStatus.ACKED:
            continue
        acked_end[send.partition] = max(acked_end[send.partition], send.offset + 1)
        held = polled_at.get((send.partition, send.offset), set())
        if held - {send.value}:
            report.add(
                "inconsistent-offsets",
                f"acked {send.value!r} at {send.partition}/{send.offset}, "
                f"polled as {sorted(map(repr, held))}",
            )
    # An acked offset is known to exist: jumping over it is a skip.
    known: dict[int, Sequence[bytes | None]] = {p: [None] * n for p, n in acked_end.items()}
    _poll_order(report, polls, known)
    return report
