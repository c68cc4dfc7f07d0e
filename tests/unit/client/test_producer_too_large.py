"""Batches and requests a broker refuses as too large (KIP-126 and segment-sized requests).

A backlogged idempotent partition's batches grow past batch_size (up to 256 KiB), and one
request may carry several batches of a partition. A topic with a small max.message.bytes or
segment.bytes refuses those although every record fits: the producer then sends the
partition's batches one per request, splits a batch refused alone into pieces of at most
batch_size and half its size (its sequence numbers carry over, so order holds), and keeps the
partition's later batches within that size, for metadata_max_age_ms after the last refusal.
Each record of a split batch completes with its piece.
"""

from __future__ import annotations

import pytest
import trio
from trio.testing import wait_all_tasks_blocked

from client.errors import HighwaterClientError
from client.producer import (
    DeliveryFuture,
    Producer,
    ProducerBatch,
    RecordAccumulator,
    estimate_record_bytes,
)
from protocol.errors import ErrorCode
from protocol.records import BATCH_HEADER_BYTES
from tests.unit.client.fake_broker import FakeCluster

RECORDS = 5_000


def value(i: int) -> bytes:
    return b"v%04d" % i + bytes(45)


def refusals(cluster: FakeCluster, code: int) -> int:
    return sum(1 for *_, answer in cluster.produce_log if answer == code)


async def _produce(cluster: FakeCluster, *, idempotence: bool = True) -> list[DeliveryFuture]:
    done: list[DeliveryFuture] = []
    async with Producer(
        cluster.bootstrap, batch_size=1_000, linger_ms=1, enable_idempotence=idempotence
    ) as producer:
        await producer.partitions_for("t")
        futures = [
            producer.send_nowait("t", value(i), partition=0, callback=done.append)
            for i in range(RECORDS)
        ]
        await producer.flush()
    assert sorted(map(id, done)) == sorted(map(id, futures))  # each callback ran once
    return futures


@pytest.mark.parametrize("idempotence", [True, False])
async def test_requests_larger_than_a_segment_go_batch_by_batch(
    cluster: FakeCluster, idempotence: bool
) -> None:
    """RECORD_LIST_TOO_LARGE for a request holding several batches of the partition: each
    batch goes again alone, and is stored once, in order."""
    cluster.create_topic("t")
    cluster.segment_bytes = 2_500  # above batch_size, below two batches
    futures = await _produce(cluster, idempotence=idempotence)
    assert [f.result().offset for f in futures] == list(range(RECORDS))
    assert [r.value for r in cluster.records("t", 0)] == [value(i) for i in range(RECORDS)]
    assert refusals(cluster, ErrorCode.RECORD_LIST_TOO_LARGE) > 0


async def test_a_refused_backlog_batch_is_split_in_order(cluster: FakeCluster) -> None:
    """MESSAGE_TOO_LARGE for a batch that grew past batch_size: it goes again as batches of
    batch_size holding its sequence numbers; every future gets its own record's offset."""
    cluster.create_topic("t")
    cluster.max_message_bytes = 1_500
    futures = await _produce(cluster)
    assert [f.result().offset for f in futures] == list(range(RECORDS))
    assert [r.value for r in cluster.records("t", 0)] == [value(i) for i in range(RECORDS)]
    assert refusals(cluster, ErrorCode.MESSAGE_TOO_LARGE) > 0
    assert max(h.size for h in cluster.batch_headers("t", 0)) <= 1_500
    sequences = [h.base_sequence for h in cluster.batch_headers("t", 0)]
    offsets = [h.base_offset for h in cluster.batch_headers("t", 0)]
    assert sequences == offsets  # one producer from sequence 0: the numbers carried over


async def test_batches_shrink_until_they_fit_and_stay_that_small(
    cluster: FakeCluster,
) -> None:
    """A limit below batch_size: a refused batch is halved until its pieces fit, so records
    that fit alone all get through (Kafka would fail those batches); batches made after that
    are within the size learned, and none of them is refused."""
    cluster.create_topic("t")
    cluster.max_message_bytes = 400  # below batch_size (1,000), above a few records
    futures = await _produce(cluster)
    assert [f.result().offset for f in futures] == list(range(RECORDS))
    assert refusals(cluster, ErrorCode.MESSAGE_TOO_LARGE) > 0
    cluster.produce_log.clear()
    async with Producer(cluster.bootstrap, batch_size=1_000, linger_ms=1) as producer:
        first = await producer.send("t", value(0), partition=0)
        await producer.flush()  # one record fits: nothing learned yet
        assert first.result().offset == RECORDS
        await producer.partitions_for("t")
        learn = [producer.send_nowait("t", value(i), partition=0) for i in range(1, 100)]
        await producer.flush()
        assert refusals(cluster, ErrorCode.MESSAGE_TOO_LARGE) > 0
        cluster.produce_log.clear()
        later = [producer.send_nowait("t", value(i), partition=0) for i in range(100, 1_000)]
        await producer.flush()
    assert refusals(cluster, ErrorCode.MESSAGE_TOO_LARGE) == 0
    offsets = [f.result().offset for f in [first, *learn, *later]]
    assert offsets == list(range(RECORDS, RECORDS + 1_000))
    assert [r.value for r in cluster.records("t", 0)][RECORDS:] == [value(i) for i in range(1_000)]
    assert max(h.size for h in cluster.batch_headers("t", 0)) <= 400


async def test_a_record_too_large_alone_fails_and_the_others_go(cluster: FakeCluster) -> None:
    """A batch of one record refused as too large cannot be cut: that record fails with the
    broker's error, as in Kafka; the records around it are delivered, in order."""
    cluster.create_topic("t")
    cluster.max_message_bytes = 300
    async with Producer(cluster.bootstrap, batch_size=1_000, linger_ms=1) as producer:
        before = [await producer.send("t", value(i), partition=0) for i in range(10)]
        too_big = await producer.send("t", bytes(400), partition=0)
        after = [await producer.send("t", value(i), partition=0) for i in range(10, 20)]
        await producer.flush()
    with pytest.raises(HighwaterClientError, match="MESSAGE_TOO_LARGE"):
        too_big.result()
    assert [f.result().offset for f in before + after] == list(range(20))
    assert [r.value for r in cluster.records("t", 0)] == [value(i) for i in range(20)]


async def test_each_record_of_a_split_batch_completes_with_its_piece() -> None:
    """As in Kafka, a split batch's records complete piece by piece: futures, waiters and
    callbacks (both from before the split) of a piece's records are done when that piece is,
    through splits of splits; the batch itself is done when every piece is."""
    batch = ProducerBatch("t", 0, created_ms=0, capacity=100_000)
    size = estimate_record_bytes(None, value(0), ())
    futures = [batch.add(i, None, value(i), (), size) for i in range(12)]
    called: list[DeliveryFuture] = []
    for future in futures:
        future.add_done_callback(called.append)
    woke: list[int] = []

    async def waiter(future: DeliveryFuture) -> None:
        try:
            woke.append((await future).offset)
        except HighwaterClientError:
            woke.append(-1)

    async with trio.open_nursery() as nursery:
        for index in (0, 5, 11):  # waiting before the split
            nursery.start_soon(waiter, futures[index])
        await wait_all_tasks_blocked()
        pieces = batch.split(BATCH_HEADER_BYTES + 4 * size)  # 4 records each
        assert [p.record_count for p in pieces] == [4, 4, 4]
        await wait_all_tasks_blocked()
        assert woke == []
        pieces[0].complete(100, -1)
        await wait_all_tasks_blocked()
        assert [f.done() for f in futures] == [True] * 4 + [False] * 8
        assert called == futures[:4]
        assert woke == [100]
        assert [f.result().offset for f in futures[:4]] == [100, 101, 102, 103]
        with pytest.raises(RuntimeError, match="not complete"):
            futures[4].result()

        halves = pieces[1].split(BATCH_HEADER_BYTES + 2 * size)  # a piece split again
        assert [h.record_count for h in halves] == [2, 2]
        halves[1].complete(106, -1)
        pieces[2].fail(HighwaterClientError("refused"))
        await wait_all_tasks_blocked()
        assert [f.done() for f in futures] == [True] * 4 + [False] * 2 + [True] * 6
        assert not batch.result.done
        assert woke == [100, -1]  # record 11 failed; record 5 is in the half not done yet
        halves[0].complete(104, -1)
    assert batch.result.event.is_set()  # the whole batch: what flush waits for
    assert woke == [100, -1, 105]
    assert sorted(map(id, called)) == sorted(map(id, futures))  # each callback ran once
    assert [f.result().offset for f in futures[:8]] == list(range(100, 108))
    for future in futures[8:]:
        with pytest.raises(HighwaterClientError, match="refused"):
            future.result()
    assert [f.exception() for f in futures[:8]] == [None] * 8  # each asks its own piece
    assert all(str(f.exception()) == "refused" for f in futures[8:])


def test_learned_size_limits_are_forgotten_after_their_age() -> None:
    """What a refusal taught holds for max_age_ms after the partition's last refusal, then is
    forgotten: new batches are batch_size again and go several to a request."""
    accumulator = RecordAccumulator(
        batch_size=1_000, linger_ms=0, delivery_timeout_ms=120_000, muting=False
    )
    tp, other = ("t", 0), ("t", 1)
    accumulator.learn_size_limit(tp, 1_000.0)  # refused together: one batch per request
    accumulator.learn_size_limit(tp, 2_000.0, 500)  # refused alone: split, at most 500 bytes
    accumulator.learn_size_limit(other, 1_500.0, 300)

    def new_batch_capacity(now_ms: float) -> int:
        # A record estimated larger than any batch always starts a new one.
        accumulator.append_fields("t", 0, 0, None, b"x", (), 10_000, now_ms)
        return accumulator.batches[tp][-1].capacity

    def learned() -> set[tuple[str, int]]:
        return set(accumulator.one_per_request) | set(accumulator.max_batch_bytes)

    accumulator.forget_size_limits(6_499.0, max_age_ms=5_000)
    assert learned() == {tp, other}
    assert new_batch_capacity(6_499.0) == 500
    accumulator.forget_size_limits(6_500.0, max_age_ms=5_000)
    assert learned() == {tp}  # its age counts from its last refusal, at 2,000
    accumulator.forget_size_limits(7_000.0, max_age_ms=5_000)
    assert learned() == set()
    assert new_batch_capacity(7_000.0) == 1_000


async def test_a_topic_whose_limit_was_raised_gets_full_batches_again(
    cluster: FakeCluster,
) -> None:
    """Real producer, metadata_max_age_ms short: after the topic's max.message.bytes is raised,
    the producer stops keeping batches within the size it learned; records stay in order."""
    cluster.create_topic("t")
    cluster.max_message_bytes = 400
    sent: list[bytes] = []
    async with Producer(
        cluster.bootstrap, batch_size=1_000, linger_ms=1, metadata_max_age_ms=300
    ) as producer:
        await producer.partitions_for("t")

        async def burst() -> None:
            for _ in range(200):
                sent.append(value(len(sent)))
                producer.send_nowait("t", sent[-1], partition=0)
            await producer.flush()

        await burst()
        assert refusals(cluster, ErrorCode.MESSAGE_TOO_LARGE) > 0
        cluster.max_message_bytes = 1_000_000
        with trio.fail_after(10):
            while max(h.size for h in cluster.batch_headers("t", 0)) <= 400:
                await burst()
    assert [r.value for r in cluster.records("t", 0)] == sent
