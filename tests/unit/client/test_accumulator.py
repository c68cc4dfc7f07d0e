"""RecordAccumulator alone (pure: no clock, no I/O): when partitions are ready, what a drain
takes, and what it leaves behind."""

from __future__ import annotations

import math

from client.producer import RecordAccumulator
from protocol.records import Record


def test_accumulator_ready_and_drain_are_pure() -> None:
    acc = RecordAccumulator(batch_size=100, linger_ms=10, delivery_timeout_ms=1000, muting=False)
    record = Record(b"x" * 30, timestamp_ms=0)  # the accumulator has no clock
    acc.append("t", 0, record, 15, now_ms=0)
    leaders = {("t", 0): 1, ("t", 1): 2}

    def leader_for(topic: str, partition: int) -> int | None:
        return leaders.get((topic, partition))

    assert acc.ready(leader_for, 5) == (set(), 5, [])
    assert acc.ready(leader_for, 10)[0] == {1}
    acc.append("t", 1, record, 15, now_ms=0)
    acc.append("t", 1, record, 15, now_ms=0)
    acc.append("t", 1, record, 15, now_ms=0)  # second batch: the first is full
    nodes, _, _ = acc.ready(leader_for, 1)
    assert nodes == {2}
    drained = acc.drain(2, leader_for, 1_000_000, 1, lambda b: b"x" * len(b.records))
    assert [len(b.records) for b in drained] == [2]  # the still-filling batch stays
    assert [b.tp for b in acc.expire(2000)] == [("t", 0), ("t", 1)]


def test_a_drain_says_when_it_left_a_sendable_batch_behind() -> None:
    """`drain_cut_short`: the sender looks again at once instead of waiting to be woken."""
    acc = RecordAccumulator(batch_size=100, linger_ms=0, delivery_timeout_ms=1000, muting=False)
    record = Record(b"x" * 30, timestamp_ms=0)
    for _ in range(3):
        acc.append("t", 0, record, 60, now_ms=0)  # a batch each: 60 of 100 bytes

    def leader_for(topic: str, partition: int) -> int | None:
        return 1

    def encode(batch: object) -> bytes:
        return b"x" * 90

    assert len(acc.batches[("t", 0)]) == 3
    assert len(acc.drain(1, leader_for, 100, 0, encode)) == 1  # max_bytes: one of three
    assert acc.drain_cut_short
    retried = acc.drain(1, leader_for, 1_000_000, 0, encode)
    assert len(retried) == 2 and not acc.drain_cut_short  # the rest, nothing left
    for batch in retried:
        batch.attempts = 1  # the sender counts attempts as it builds the request
        acc.reenqueue(batch, now_ms=0, backoff_ms=0)
    assert acc.drain(1, leader_for, 1_000_000, 0, encode) == retried[:1]  # a retry goes alone
    assert acc.drain_cut_short
    assert acc.drain(1, leader_for, 1_000_000, 0, encode) == retried[1:]
    assert not acc.drain_cut_short  # the last retry, alone with nothing behind it


def test_a_filling_batch_waits_for_its_leaders_outstanding_request() -> None:
    acc = RecordAccumulator(batch_size=100, linger_ms=0, delivery_timeout_ms=1000, muting=False)
    record = Record(b"x" * 30, timestamp_ms=0)
    acc.append("t", 0, record, 15, now_ms=0)

    def leader_for(topic: str, partition: int) -> int | None:
        return 1

    assert acc.ready(leader_for, 0)[0] == {1}  # linger 0: nothing outstanding, it goes now
    assert acc.ready(leader_for, 50, busy={1}) == (set(), math.inf, [])  # held, however old
    assert acc.ready(leader_for, 50, busy={2})[0] == {1}  # another broker's request: no hold
    acc.append("t", 0, record, 15, now_ms=1)
    acc.append("t", 0, record, 15, now_ms=1)  # the first batch is full: it goes regardless
    assert acc.ready(leader_for, 1, busy={1})[0] == {1}
    acc2 = RecordAccumulator(batch_size=100, linger_ms=0, delivery_timeout_ms=1000, muting=False)
    acc2.append("t", 0, record, 15, now_ms=0)
    acc2.flushing += 1  # flush() sends what is queued without waiting
    assert acc2.ready(leader_for, 0, busy={1})[0] == {1}
