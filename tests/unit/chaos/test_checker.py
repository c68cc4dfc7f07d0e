"""The chaos checker names each anomaly it is shown, and passes a clean history."""

from __future__ import annotations

import pytest

from tests.chaos.checker import (
    ANOMALIES,
    Poll,
    SendOutcome,
    SendStatus,
    check,
    interim_check,
)

ACK = SendStatus.ACKED


def acked(value: bytes, partition: int, offset: int) -> SendOutcome:
    return SendOutcome(value, ACK, partition, offset)


def clean() -> tuple[list[SendOutcome], list[Poll], dict[int, list[bytes | None]]]:
    sends = [acked(b"a", 0, 0), acked(b"b", 0, 1), acked(b"c", 1, 0)]
    sends.append(SendOutcome(b"d", SendStatus.UNKNOWN))  # maybe written: never an anomaly
    final: dict[int, list[bytes | None]] = {0: [b"a", b"b", b"d"], 1: [b"c"]}
    polls = [Poll(1, 0, 0, b"a"), Poll(1, 1, 0, b"c"), Poll(1, 0, 1, b"b"), Poll(1, 0, 2, b"d")]
    return sends, polls, final


def test_a_clean_history_passes() -> None:
    sends, polls, final = clean()
    report = check(sends, polls, final, consumers_ran_to_end=[1])
    assert report.ok, report.table()
    assert (report.acked, report.unknown, report.polled, report.final_records) == (3, 1, 4, 4)


@pytest.mark.parametrize(
    ("damage", "anomaly"),
    [
        ("lose", "lost-write"),
        ("hide", "unseen"),
        ("duplicate", "duplicate"),
        ("disagree", "inconsistent-offsets"),
        ("move", "inconsistent-offsets"),
        ("back", "nonmonotonic-poll"),
        ("skip", "poll-skip"),
        ("late-start", "poll-skip"),
    ],
)
def test_each_anomaly_is_named(damage: str, anomaly: str) -> None:
    sends, polls, final = clean()
    if damage == "lose":
        final[1] = []
        polls = [p for p in polls if p.partition != 1]
    elif damage == "hide":
        polls = [p for p in polls if p.value != b"b"]
        polls = [p if p.value != b"d" else Poll(1, 0, 1, b"d") for p in polls]
        final[0] = [b"a", b"d", b"b"]
        sends[1] = acked(b"b", 0, 2)
    elif damage == "duplicate":
        final[0].append(b"a")
    elif damage == "disagree":
        polls.append(Poll(2, 0, 0, b"zzz"))
    elif damage == "move":
        sends[0] = acked(b"a", 0, 1)
    elif damage == "back":
        polls.append(Poll(1, 0, 1, b"b"))
    elif damage == "skip":
        polls = [p for p in polls if p.value != b"b"]
    elif damage == "late-start":
        polls = [p for p in polls if p.value != b"a"]
    report = check(sends, polls, final, consumers_ran_to_end=[1])
    assert report.counts[anomaly] >= 1, report.table()
    assert not report.ok
    assert anomaly in report.table()


def test_the_table_lists_every_anomaly() -> None:
    table = check(*clean()).table()
    assert all(name in table for name in ANOMALIES)


def test_the_interim_check_passes_a_clean_history_whose_consumers_are_behind() -> None:
    sends, polls, _ = clean()
    sends.append(acked(b"e", 0, 3))  # acked, not polled yet: not an anomaly before the end
    report = interim_check(sends, polls[:2])
    assert report.ok, report.table()
    assert (report.acked, report.polled) == (4, 2)


@pytest.mark.parametrize(
    ("polls", "anomaly"),
    [
        ([Poll(1, 0, 0, b"a"), Poll(1, 0, 1, b"x")], "inconsistent-offsets"),  # acked b there
        ([Poll(1, 0, 0, b"a"), Poll(2, 0, 0, b"z")], "inconsistent-offsets"),
        ([Poll(1, 0, 0, b"a"), Poll(1, 2, 0, b"a")], "duplicate"),
        ([Poll(1, 0, 0, b"a"), Poll(1, 0, 0, b"a")], "nonmonotonic-poll"),
        ([Poll(1, 0, 0, b"a"), Poll(1, 0, 2, b"d")], "poll-skip"),  # over acked offset 1
    ],
)
def test_the_interim_check_names_what_it_can_see_before_the_end(
    polls: list[Poll], anomaly: str
) -> None:
    sends, _, _ = clean()
    report = interim_check(sends, polls)
    assert report.counts[anomaly] >= 1, report.table()
    assert sum(report.counts.values()) == report.counts[anomaly], report.table()
