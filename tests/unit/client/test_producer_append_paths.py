"""Producer.send_nowait's inlined add (a record into a batch that has room) behaves exactly as
the plain path, RecordAccumulator.append_fields -> ProducerBatch.add.

The same random sequence of records (keys, values, headers, partitions, timestamps,
callbacks), drains that close the open batches, and learned size limits is applied to a real
Producer and to a bare accumulator; then the batches (records, sizes, capacities), their
bytes, the sender wake-ups, and the futures' offsets, timestamps and callbacks must match.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import trio
import trio.testing
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from client.producer import (
    DeliveryFuture,
    Producer,
    ProducerBatch,
    RecordAccumulator,
    estimate_record_bytes,
)
from protocol.compression import Compression
from protocol.messages.common import BrokerEndpoint
from protocol.messages.metadata import MetadataPartition, MetadataResponse, MetadataTopic
from protocol.records import BATCH_HEADER_BYTES

PARTITIONS = 3
RECORD_BYTES = 50  # estimated, with no key nor headers
BATCH_SIZES = st.integers(80, 1_500) | st.integers(1, 12).map(
    lambda n: BATCH_HEADER_BYTES + n * RECORD_BYTES
)


@dataclass(frozen=True)
class Send:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    partition: int | None
    timestamp_ms: int | None
    callback: bool


@dataclass(frozen=True)
class Drain:  # the sender takes batches up to max_bytes: those open close
    max_bytes: int


@dataclass(frozen=True)
class SizeLimit:  # a leader refused a batch of the partition as too large
    partition: int
    max_batch_bytes: int | None


def operation(kind: int, a: int, b: int, c: int, timestamp_ms: int) -> Send | Drain | SizeLimit:
    """An operation from a few drawn numbers (flat draws keep hypothesis fast on long runs)."""
    if kind == 20:
        return Drain(1 + a * c % 4_000)
    if kind == 21:
        return SizeLimit(a % PARTITIONS, None if b % 3 == 0 else 100 + a * c % 900)
    noise = bytes(range(c % 200, c % 200 + 56)) * 8
    # Mostly records of one size, in batches of a whole number of them: exact fits happen.
    value = bytes(RECORD_BYTES - 16) if b % 7 < 4 else noise[: c % 401]
    return Send(
        key=noise[: a % 25] if a % 4 == 3 else None,
        value=None if b % 7 == 6 else value,
        headers=tuple(
            (f"h{i}", None if c & (1 << i) else noise[: i * 5])
            for i in range(a % 3 if b % 5 == 4 else 0)
        ),
        partition=kind % PARTITIONS if kind % 4 < 2 else None,
        timestamp_ms=timestamp_ms if timestamp_ms >= 0 else None,
        callback=bool(kind & 1) != bool(c & 1),
    )


OPERATION = st.builds(
    operation,
    st.integers(0, 21),
    st.integers(0, 99),
    st.integers(0, 99),
    st.integers(0, 999),
    st.integers(-(2**41), 2**41),
)
# Long runs (st.lists alone mostly draws a few items): batches fill, roll over and grow.
OPERATIONS = st.integers(1, 200).flatmap(lambda n: st.lists(OPERATION, min_size=n, max_size=n))


def shape(batch: ProducerBatch) -> tuple[Any, ...]:
    return (
        batch.tp,
        batch.created_ms,
        batch.capacity,
        list(batch.entries),
        batch.record_count,
        batch.base_timestamp,
        batch.max_timestamp,
        batch.estimated_bytes,
        batch.encode(Compression.NONE, 7, 0),
    )


def metadata_for(topic: str) -> MetadataResponse:
    partitions = tuple(MetadataPartition(0, p, 1, 0, (1,), (1,)) for p in range(PARTITIONS))
    return MetadataResponse(
        brokers=(BrokerEndpoint(1, "127.0.0.1", 1),),
        cluster_id="test",
        controller_id=1,
        topics=(MetadataTopic(0, topic, partitions),),
    )


def open_positions(
    accumulator: RecordAccumulator, batches: list[ProducerBatch]
) -> dict[tuple[str, int], int]:
    """Which of `batches` is open for new records, per partition."""
    index = {id(batch): i for i, batch in enumerate(batches)}
    return {tp: index[id(batch)] for tp, batch in accumulator.open_batches.items()}


def leader(topic: str, partition: int) -> int:
    return 1


async def check_paths(
    operations: list[Send | Drain | SizeLimit], batch_size: int, idem: bool
) -> None:
    producer = Producer(
        "127.0.0.1:1", batch_size=batch_size, linger_ms=60_000, enable_idempotence=idem
    )
    producer.metadata._merge(metadata_for("t"), None)
    producer._accepting = True  # as if entered, but with no sender task: batches stay put
    fast = producer._accumulator  # filled through send_nowait (its inlined add)
    plain = RecordAccumulator(  # filled through append_fields (ProducerBatch.add)
        batch_size=fast.batch_size,
        linger_ms=fast.linger_ms,
        delivery_timeout_ms=fast.delivery_timeout_ms,
        muting=fast.muting,
        backlog_batch_size=fast.backlog_batch_size,
    )
    called: dict[str, list[tuple[int, int]]] = {"fast": [], "plain": []}
    fast_futures: list[DeliveryFuture] = []
    plain_futures: list[DeliveryFuture] = []
    fast_drained: list[ProducerBatch] = []
    plain_drained: list[ProducerBatch] = []
    for number, op in enumerate(operations):
        if isinstance(op, Drain):
            now = trio.current_time() * 1000
            for acc, drained in ((fast, fast_drained), (plain, plain_drained)):
                drained += acc.drain(1, leader, op.max_bytes, now, lambda b: b"x" * 100)
            continue
        if isinstance(op, SizeLimit):
            fast.learn_size_limit(("t", op.partition), 0, op.max_batch_bytes)
            plain.learn_size_limit(("t", op.partition), 0, op.max_batch_bytes)
            continue
        producer._yield_due = False
        future = producer.send_nowait(
            "t",
            op.value,
            op.key,
            op.partition,
            op.headers,
            op.timestamp_ms,
            callback=(lambda f, n=number: called["fast"].append((n, f.result().offset)))
            if op.callback
            else None,
        )
        fast_futures.append(future)
        assert op.timestamp_ms is None or future.timestamp_ms == op.timestamp_ms
        plain_future, wake = plain.append_fields(
            "t",
            future.partition,  # as the producer's partitioner chose
            future.timestamp_ms,  # as the producer stamped it
            op.key,
            op.value,
            op.headers,
            estimate_record_bytes(op.key, op.value, op.headers),
            trio.current_time() * 1000,
            (lambda f, n=number: called["plain"].append((n, f.result().offset)))
            if op.callback
            else None,
        )
        plain_futures.append(plain_future)
        assert producer._yield_due == wake  # the sender is woken for the same records
    # Same batches, in the same queues, with the same bytes.
    fast_batches = fast_drained + [b for q in fast.batches.values() for b in q]
    plain_batches = plain_drained + [b for q in plain.batches.values() for b in q]
    assert list(map(shape, fast_batches)) == list(map(shape, plain_batches))
    assert open_positions(fast, fast_batches) == open_positions(plain, plain_batches)
    # Same outcomes: each batch completes at the same offsets.
    next_offset = [0] * PARTITIONS
    for index, (mine, theirs) in enumerate(zip(fast_batches, plain_batches, strict=True)):
        append_time = -1 if index % 2 else 1_000 + index
        for batch in (mine, theirs):
            batch.complete(next_offset[batch.partition], append_time)
        next_offset[mine.partition] += mine.record_count
    assert [f.result() for f in fast_futures] == [f.result() for f in plain_futures]
    assert called["fast"] == called["plain"]


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations=OPERATIONS, batch_size=BATCH_SIZES, idem=st.booleans())
def test_the_inlined_add_matches_the_plain_path(
    operations: list[Send | Drain | SizeLimit], batch_size: int, idem: bool
) -> None:
    trio.run(check_paths, operations, batch_size, idem, clock=trio.testing.MockClock())
