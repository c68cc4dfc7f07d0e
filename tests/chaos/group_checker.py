"""The group checker: what must hold of a consumer group under faults, from a recorded history.

Pure, like checker.py. Members log what they own (assigned, revoked, lost, closed, with the
time), every record they process, and the runner samples the group's committed offsets.

- double-ownership: two members owning one partition at once, unless the earlier owner's
  ownership ended in `lost` (it was fenced: the coordinator may give a fenced member's
  partitions away, and the member learns of it only at its next heartbeat; KIP-848).
- unowned-record: a member processed a record of a partition it did not own then.
- unprocessed: a record of the final read that no member processed (at-least-once; the
  members run until the group's committed offsets reach the end of every partition).
- committed-regression: a partition's committed offset went down between two samples.
- committed-short: the last committed offset sampled is not the partition's end.
"""

from __future__ import annotations

import itertools
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import ClassVar

from tests.chaos.checker import AnomalyReport

__all__ = [
    "GROUP_ANOMALIES",
    "CommittedSample",
    "GroupReport",
    "Ownership",
    "OwnershipChange",
    "Processed",
    "check_group",
]

GROUP_ANOMALIES = (
    "double-ownership",
    "unowned-record",
    "unprocessed",
    "committed-regression",
    "committed-short",
)


class OwnershipChange(Enum):
    ASSIGNED = "assigned"
    REVOKED = "revoked"
    LOST = "lost"
    CLOSED = "closed"  # the member stopped (it leaves the group)


@dataclass(frozen=True, slots=True)
class Ownership:
    member: int
    partition: int
    change: OwnershipChange
    time_s: float


@dataclass(frozen=True, slots=True)
class Processed:
    member: int
    partition: int
    offset: int
    time_s: float


@dataclass(frozen=True, slots=True)
class CommittedSample:
    partition: int
    offset: int
    time_s: float


@dataclass
class GroupReport(AnomalyReport):
    NAMES: ClassVar[tuple[str, ...]] = GROUP_ANOMALIES
    TITLE: ClassVar[str] = "group anomaly"
    processed: int = 0
    handovers: int = 0  # assignments of a partition to a member after another owned it
    lost: int = 0


@dataclass(frozen=True, slots=True)
class _Interval:
    member: int
    start_s: float
    end_s: float
    ended_by: OwnershipChange | None  # None: still owned at the end of the history


def _intervals(ownership: Sequence[Ownership], end_s: float) -> dict[int, list[_Interval]]:
    """Per partition, each member's spells of ownership in time order."""
    since: dict[tuple[int, int], float] = {}
    spells: dict[int, list[_Interval]] = defaultdict(list)
    for change in sorted(ownership, key=lambda o: o.time_s):
        key = (change.member, change.partition)
        if change.change is OwnershipChange.ASSIGNED:
            since.setdefault(key, change.time_s)
        elif key in since:
            start = since.pop(key)
            spells[change.partition].append(
                _Interval(change.member, start, change.time_s, change.change)
            )
    for (member, partition), start in since.items():
        spells[partition].append(_Interval(member, start, end_s, None))
    for partition in spells:
        spells[partition].sort(key=lambda i: i.start_s)
    return spells


def check_group(
    ownership: Sequence[Ownership],
    processed: Sequence[Processed],
    committed: Sequence[CommittedSample],
    final: Mapping[int, Sequence[bytes | None]],
    *,
    end_s: float,
) -> GroupReport:
    """`final[p]`: partition p read from offset 0 to its HW after healing (index = offset);
    `end_s`: when the history ends (spells still open end there)."""
    report = GroupReport(processed=len(processed))
    spells = _intervals(ownership, end_s)
    report.lost = sum(o.change is OwnershipChange.LOST for o in ownership)
    for partition, ordered in spells.items():
        report.handovers += sum(1 for a, b in itertools.pairwise(ordered) if a.member != b.member)
        for i, a in enumerate(ordered):
            for b in ordered[i + 1 :]:
                if b.start_s >= a.end_s:
                    continue  # sorted by start: later ones may still overlap a
                if a.member != b.member and a.ended_by is not OwnershipChange.LOST:
                    report.add(
                        "double-ownership",
                        f"partition {partition}: member {a.member} "
                        f"[{a.start_s:.3f}, {a.end_s:.3f} {a.ended_by}] and member "
                        f"{b.member} from {b.start_s:.3f}",
                    )
    for record in processed:
        owned = any(
            s.member == record.member and s.start_s <= record.time_s <= s.end_s
            for s in spells.get(record.partition, ())
        )
        if not owned:
            report.add(
                "unowned-record",
                f"member {record.member} processed {record.partition}/{record.offset} "
                f"at {record.time_s:.3f}",
            )
    last_committed: dict[int, CommittedSample] = {}
    for sample in sorted(committed, key=lambda c: c.time_s):
        before = last_committed.get(sample.partition)
        if before is not None and sample.offset < before.offset:
            report.add(
                "committed-regression",
                f"partition {sample.partition}: {before.offset} at {before.time_s:.3f}, "
                f"then {sample.offset} at {sample.time_s:.3f}",
            )
        last_committed[sample.partition] = sample
    done = {(r.partition, r.offset) for r in processed}
    for partition, values in final.items():
        for offset, value in enumerate(values):
            if value is not None and (partition, offset) not in done:
                report.add("unprocessed", f"{partition}/{offset}")
        last = last_committed[partition].offset if partition in last_committed else None
        if last != len(values):
            report.add("committed-short", f"partition {partition}: {last} of {len(values)}")
    return report
