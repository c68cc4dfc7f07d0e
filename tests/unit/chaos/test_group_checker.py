"""The group checker names each anomaly it is shown, and passes a clean history."""

from __future__ import annotations

import pytest

from tests.chaos.group_checker import (
    GROUP_ANOMALIES,
    CommittedSample,
    Ownership,
    OwnershipChange,
    Processed,
    check_group,
)

A, R, L, C = (
    OwnershipChange.ASSIGNED,
    OwnershipChange.REVOKED,
    OwnershipChange.LOST,
    OwnershipChange.CLOSED,
)
FINAL: dict[int, list[bytes | None]] = {0: [b"a", b"b", b"c"]}


def history() -> tuple[list[Ownership], list[Processed], list[CommittedSample]]:
    """Member 1 owns partition 0, processes 0-1, commits 2, hands over; member 2 processes
    1 again (at-least-once) and 2, commits 3."""
    ownership = [Ownership(1, 0, A, 1.0), Ownership(1, 0, R, 3.0), Ownership(2, 0, A, 3.5)]
    processed = [Processed(1, 0, 0, 1.5), Processed(1, 0, 1, 2.0), Processed(2, 0, 1, 4.0)]
    processed.append(Processed(2, 0, 2, 4.0))
    committed = [CommittedSample(0, 1, 1.6), CommittedSample(0, 2, 2.5), CommittedSample(0, 3, 5)]
    return ownership, processed, committed


def test_a_clean_history_passes() -> None:
    ownership, processed, committed = history()
    report = check_group(ownership, processed, committed, FINAL, end_s=6.0)
    assert report.ok, report.table()
    assert (report.processed, report.handovers, report.lost) == (4, 1, 0)


def test_a_fenced_owner_may_overlap_its_successor() -> None:
    """Member 1 learns it was fenced (lost) after member 2 got the partition: allowed."""
    ownership, processed, committed = history()
    ownership[1] = Ownership(1, 0, L, 4.5)
    report = check_group(ownership, processed, committed, FINAL, end_s=6.0)
    assert report.ok, report.table()
    assert report.lost == 1


@pytest.mark.parametrize(
    ("damage", "anomaly"),
    [
        ("overlap", "double-ownership"),
        ("closed-late", "double-ownership"),
        ("never-ended", "double-ownership"),
        ("unowned", "unowned-record"),
        ("skip", "unprocessed"),
        ("regress", "committed-regression"),
        ("short", "committed-short"),
    ],
)
def test_each_anomaly_is_found(damage: str, anomaly: str) -> None:
    ownership, processed, committed = history()
    match damage:
        case "overlap":  # revoked after the successor was assigned
            ownership[1] = Ownership(1, 0, R, 4.0)
        case "closed-late":
            ownership[1] = Ownership(1, 0, C, 4.0)
        case "never-ended":
            del ownership[1]
        case "unowned":
            processed.append(Processed(1, 0, 2, 3.2))
        case "skip":
            del processed[0]
        case "regress":
            committed.insert(2, CommittedSample(0, 1, 2.8))
        case "short":
            del committed[2]
    report = check_group(ownership, processed, committed, FINAL, end_s=6.0)
    assert report.counts[anomaly] >= 1, report.table()
    others = {a: n for a, n in report.counts.items() if a != anomaly and n}
    assert not others, report.table()
    assert set(report.counts) == set(GROUP_ANOMALIES)
