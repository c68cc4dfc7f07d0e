"""The idempotent producer (KIP-98, client side) against the fake cluster, whose leaders keep
producer state as Kafka's do: ids, sequences, dedupe of resends, order across retries, and the
fatal errors that stop the producer."""

from __future__ import annotations

import pytest
import trio

from client.errors import (
    HighwaterClientError,
    HighwaterTimeoutError,
    OutOfOrderSequenceError,
    ProducerFatalError,
    ProducerFencedError,
    UnknownProducerIdError,
)
from client.producer import (
    DeliveryFuture,
    IdempotenceState,
    PartitionSequences,
    Producer,
    ProducerBatch,
    RecordAccumulator,
    increment_sequence,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest
from protocol.messages.produce import ProduceRequest
from protocol.records import BatchHeader
from tests.unit.client.fake_broker import FakeCluster
from tests.unit.client.test_producer_close import wait_until

FIRST_PRODUCER_ID = 1000  # the fake's first id
MAX_SEQUENCE = 2**31 - 1
OOOS = ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER

# One record (of a 50-byte value) per batch, sent as soon as it is queued.
ONE_RECORD_BATCHES = {"linger_ms": 0, "batch_size": 100, "retry_backoff_ms": 20}


def stored_headers(cluster: FakeCluster, topic: str = "t", partition: int = 0) -> list[BatchHeader]:
    return cluster.batch_headers(topic, partition)


def stored_values(cluster: FakeCluster, topic: str = "t", partition: int = 0) -> list[bytes | None]:
    return [r.value for r in cluster.records(topic, partition)]


def value(i: int) -> bytes:
    return b"v%02d" % i + bytes(47)


def produce_answers(cluster: FakeCluster, start: int = 0) -> list[tuple[tuple[int, ...], int]]:
    """(base sequence of each batch, error code) of each produce answer for t-0, from the
    `start`th."""
    return [(seqs, code) for t, p, seqs, code in cluster.produce_log if (t, p) == ("t", 0)][start:]


async def send_one_request_each(producer: Producer, count: int) -> list[DeliveryFuture]:
    """`count` one-record batches to t-0, each drained into a request of its own."""
    futures = []
    for i in range(count):
        futures.append(producer.send_nowait("t", value(i)))
        # The next record must not join this one's batch: wait until the sender drained it
        # (a fixed sleep was too short on a loaded machine, and two shared a request).
        await wait_until(lambda: not producer._accumulator.has_queued())
    return futures


# ----- configuration --------------------------------------------------------------------------


async def test_default_producer_gets_an_id_and_numbers_each_partition_from_zero(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t", 2)
    async with Producer(cluster.bootstrap, linger_ms=60_000) as producer:
        assert producer.enable_idempotence and producer.acks == -1
        first = [await producer.send("t", b"a%d" % i, partition=0) for i in range(3)]
        await producer.flush()
        second = [await producer.send("t", b"b%d" % i, partition=0) for i in range(2)]
        other = await producer.send("t", b"c", partition=1)
        await producer.flush()
        assert (producer.producer_id, producer.producer_epoch) == (FIRST_PRODUCER_ID, 0)
    assert [f.result().offset for f in first + second] == [0, 1, 2, 3, 4]
    assert other.result().offset == 0
    assert cluster.count(InitProducerIdRequest) == 1
    p0, p1 = stored_headers(cluster, "t", 0), stored_headers(cluster, "t", 1)
    assert [(h.producer_id, h.producer_epoch) for h in p0 + p1] == [(FIRST_PRODUCER_ID, 0)] * 3
    assert [(h.base_sequence, h.record_count) for h in p0] == [(0, 3), (3, 2)]
    assert [(h.base_sequence, h.record_count) for h in p1] == [(0, 1)]


@pytest.mark.parametrize(
    "options", [{"enable_idempotence": False}, {"acks": 1}, {"acks": 0}, {"retries": 0}]
)
async def test_without_idempotence_batches_carry_no_producer_id(
    cluster: FakeCluster, options: dict[str, int | bool]
) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, linger_ms=0, **options) as producer:  # type: ignore[arg-type]
        assert not producer.enable_idempotence
        await producer.send("t", b"a")
        await producer.flush()
        assert producer.producer_id == -1
    with trio.fail_after(5):  # acks=0: nobody waits for the append
        while not cluster.topics["t"][0].batches:
            await cluster._appended.wait()
    (header,) = stored_headers(cluster)
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (-1, -1, -1)
    assert cluster.count(InitProducerIdRequest) == 0


@pytest.mark.parametrize(
    ("options", "conflict"),
    [
        ({"acks": 1}, "acks=1"),
        ({"acks": 0}, "acks=0"),
        ({"retries": 0}, "retries=0"),
        ({"max_in_flight_requests_per_connection": 6}, "max_in_flight_requests_per_connection=6"),
    ],
)
def test_explicit_idempotence_with_a_conflicting_setting_raises(
    options: dict[str, int], conflict: str
) -> None:
    with pytest.raises(ValueError, match=conflict):
        Producer("127.0.0.1:1", enable_idempotence=True, **options)  # type: ignore[arg-type]
    assert not Producer("127.0.0.1:1", **options).enable_idempotence  # type: ignore[arg-type]
    assert Producer("127.0.0.1:1", max_in_flight_requests_per_connection=5).enable_idempotence


# ----- producer id ----------------------------------------------------------------------------


async def test_init_producer_id_retries_retriable_errors_and_dropped_connections(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.INIT_PRODUCER_ID, ErrorCode.NOT_ENOUGH_REPLICAS, times=2)
    cluster.drop_next(ApiKey.INIT_PRODUCER_ID)
    async with Producer(cluster.bootstrap, retry_backoff_ms=10) as producer:
        assert (await (await producer.send("t", b"a"))).offset == 0
    assert cluster.count(InitProducerIdRequest) == 4
    assert stored_headers(cluster)[0].producer_id == FIRST_PRODUCER_ID


async def test_no_producer_id_within_max_block_fails_the_queued_records_only(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.INIT_PRODUCER_ID, ErrorCode.NOT_ENOUGH_REPLICAS, times=1_000_000)
    async with Producer(cluster.bootstrap, max_block_ms=300, retry_backoff_ms=20) as producer:
        future = await producer.send("t", b"a")
        with trio.fail_after(5), pytest.raises(HighwaterTimeoutError) as info:
            await future
        assert "InitProducerId" in str(info.value)
        assert "NOT_ENOUGH_REPLICAS" in str(info.value)
        cluster.clear_injected()
        assert (await (await producer.send("t", b"b"))).offset == 0  # a later send tries again
    assert stored_values(cluster) == [b"b"]


async def test_a_non_retriable_init_producer_id_error_stops_the_producer(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.INIT_PRODUCER_ID, ErrorCode.UNSUPPORTED_VERSION)
    async with Producer(cluster.bootstrap) as producer:
        future = await producer.send("t", b"a")
        with trio.fail_after(5), pytest.raises(ProducerFatalError) as info:
            await future
        assert info.value.code is ErrorCode.UNSUPPORTED_VERSION
        with pytest.raises(ProducerFatalError):
            await producer.send("t", b"b")
    assert cluster.count(ProduceRequest) == 0


# ----- deduplication and order ----------------------------------------------------------------


@pytest.mark.parametrize(("idempotent", "copies"), [(True, 1), (False, 2)])
async def test_a_lost_acknowledgement_is_resent_and_stored_once(
    cluster: FakeCluster, idempotent: bool, copies: int
) -> None:
    cluster.create_topic("t")
    cluster.drop_after_append()  # the first produce is appended, its answer never comes
    async with Producer(
        cluster.bootstrap, retry_backoff_ms=10, enable_idempotence=idempotent
    ) as producer:
        meta = await (await producer.send("t", b"once"))
    assert cluster.count(ProduceRequest) == 2
    assert stored_values(cluster) == [b"once"] * copies  # without idempotence: a duplicate
    if idempotent:
        assert meta.offset == 0  # the original offset, from the leader's producer state
        assert produce_answers(cluster) == [((0,), ErrorCode.NONE), ((0,), ErrorCode.NONE)]


async def test_five_in_flight_with_the_first_failing_arrive_in_order_once(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, **ONE_RECORD_BATCHES) as producer:  # type: ignore[arg-type]
        await (await producer.send("t", b"first"))  # the leader knows the producer now
        cluster.delay_ms[ApiKey.PRODUCE] = 50  # answers come after all five were sent
        cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS)
        futures = await send_one_request_each(producer, 5)
        with trio.fail_after(10):
            await producer.flush()
    assert [f.result().offset for f in futures] == [1, 2, 3, 4, 5]
    assert stored_values(cluster) == [b"first"] + [value(i) for i in range(5)]
    assert [h.base_sequence for h in stored_headers(cluster)] == [0, 1, 2, 3, 4, 5]
    # All five were in flight; the later four met the gap the first left and were retried
    # after it, one at a time, in sequence order.
    assert produce_answers(cluster, 1) == [
        ((1,), ErrorCode.NOT_ENOUGH_REPLICAS),
        ((2,), OOOS),
        ((3,), OOOS),
        ((4,), OOOS),
        ((5,), OOOS),
        ((1,), 0),
        ((2,), 0),
        ((3,), 0),
        ((4,), 0),
        ((5,), 0),
    ]


async def test_a_dropped_connection_with_five_in_flight_keeps_order_without_duplicates(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, **ONE_RECORD_BATCHES) as producer:  # type: ignore[arg-type]
        await (await producer.send("t", b"first"))
        cluster.delay_ms[ApiKey.PRODUCE] = 50
        cluster.drop_after_append()  # batch 1 appended, then the connection (and 2-5) lost
        futures = await send_one_request_each(producer, 5)
        with trio.fail_after(10):
            await producer.flush()
    assert [f.result().offset for f in futures] == [1, 2, 3, 4, 5]
    assert stored_values(cluster) == [b"first"] + [value(i) for i in range(5)]
    # Resent one at a time, in order; the leader answered the resend of batch 1 from its state.
    assert produce_answers(cluster, 1) == [((s,), 0) for s in (1, 1, 2, 3, 4, 5)]


async def test_a_resend_goes_alone_even_with_new_batches_queued_behind_it(
    cluster: FakeCluster,
) -> None:
    """A leader answers a request holding a resend with the resent batch's offset and appends
    nothing else of it: a new batch riding along would be acknowledged but never stored."""
    cluster.create_topic("t")
    options = {**ONE_RECORD_BATCHES, "retry_backoff_ms": 300}
    async with Producer(cluster.bootstrap, **options) as producer:  # type: ignore[arg-type]
        await (await producer.send("t", b"first"))
        cluster.delay_ms[ApiKey.PRODUCE] = 20
        cluster.drop_after_append()
        resent = producer.send_nowait("t", value(0))
        await trio.sleep(0.1)  # its answer is lost; it waits out the backoff
        fresh = producer.send_nowait("t", value(1))  # a full batch, queued behind it
        with trio.fail_after(10):
            await producer.flush()
    assert (resent.result().offset, fresh.result().offset) == (1, 2)
    assert stored_values(cluster) == [b"first", value(0), value(1)]
    assert produce_answers(cluster, 1) == [((1,), 0), ((1,), 0), ((2,), 0)]


async def test_fresh_batches_share_a_request_and_are_resent_one_by_one(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, **ONE_RECORD_BATCHES) as producer:  # type: ignore[arg-type]
        await (await producer.send("t", b"first"))
        cluster.delay_ms[ApiKey.PRODUCE] = 50
        cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER)
        futures = [producer.send_nowait("t", value(i)) for i in range(3)]  # drained together
        with trio.fail_after(10):
            await producer.flush()
    assert [f.result().offset for f in futures] == [1, 2, 3]
    assert produce_answers(cluster, 1) == [
        ((1, 2, 3), ErrorCode.NOT_LEADER_OR_FOLLOWER),
        ((1,), 0),
        ((2,), 0),
        ((3,), 0),
    ]


async def test_only_one_batch_per_partition_goes_before_the_first_acknowledgement(
    cluster: FakeCluster,
) -> None:
    """A leader takes a producer id it does not know at any sequence: were batch 2 in flight
    while batch 1 failed, it could be stored first."""
    cluster.create_topic("t")
    cluster.delay_ms[ApiKey.PRODUCE] = 20
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS)
    async with Producer(cluster.bootstrap, **ONE_RECORD_BATCHES) as producer:  # type: ignore[arg-type]
        await producer.partitions_for("t")
        futures = [producer.send_nowait("t", value(i)) for i in range(3)]
        with trio.fail_after(10):
            await producer.flush()
    assert [f.result().offset for f in futures] == [0, 1, 2]
    assert produce_answers(cluster) == [
        ((0,), ErrorCode.NOT_ENOUGH_REPLICAS),
        ((0,), 0),
        ((1, 2), 0),  # acknowledged once: the next batches go together
    ]


async def test_sequences_wrap_from_max_to_zero(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, linger_ms=60_000) as producer:
        state = producer._idempotence
        assert state is not None
        state.partitions[("t", 0)] = entry = PartitionSequences()
        entry.next_sequence = MAX_SEQUENCE - 1
        for i in range(3):
            await producer.send("t", b"%d" % i)
        await producer.flush()
        await producer.send("t", b"next")
        await producer.flush()
    (wrapping, after) = stored_headers(cluster)
    assert (wrapping.base_sequence, wrapping.last_sequence) == (MAX_SEQUENCE - 1, 0)
    assert after.base_sequence == 1


async def test_duplicate_sequence_number_counts_as_delivered(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.DUPLICATE_SEQUENCE_NUMBER)
    async with Producer(cluster.bootstrap) as producer:
        assert (await (await producer.send("t", b"a"))).offset == -1  # in the log; offset unknown
        assert (await (await producer.send("t", b"b"))).offset == 0
    assert [h.base_sequence for h in stored_headers(cluster)] == [1]


# ----- refused batches give their sequence numbers back ---------------------------------------


async def test_a_refused_batch_fails_alone_and_later_batches_are_renumbered(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, **ONE_RECORD_BATCHES) as producer:  # type: ignore[arg-type]
        await (await producer.send("t", b"first"))
        cluster.delay_ms[ApiKey.PRODUCE] = 50
        cluster.fail_next(ApiKey.PRODUCE, ErrorCode.MESSAGE_TOO_LARGE)
        futures = await send_one_request_each(producer, 3)
        with trio.fail_after(10):
            await producer.flush()
        assert futures[0].exception() is not None
        assert futures[0].exception().code is ErrorCode.MESSAGE_TOO_LARGE  # type: ignore[union-attr]
        assert [f.result().offset for f in futures[1:]] == [1, 2]
        assert (await (await producer.send("t", b"last"))).offset == 3
    assert stored_values(cluster) == [b"first", value(1), value(2), b"last"]
    assert [h.base_sequence for h in stored_headers(cluster)] == [0, 1, 2, 3]


async def test_a_batch_refused_until_it_expires_fails_alone(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS, times=1_000_000)
    async with Producer(
        cluster.bootstrap, retry_backoff_ms=20, delivery_timeout_ms=300, linger_ms=0
    ) as producer:
        future = await producer.send("t", b"a")
        with trio.fail_after(5), pytest.raises(HighwaterTimeoutError):
            await future
        cluster.clear_injected()
        assert (await (await producer.send("t", b"b"))).offset == 0
    assert [h.base_sequence for h in stored_headers(cluster)] == [0]  # "a" gave its 0 back


# ----- fatal errors ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("code", "error_type"),
    [
        (ErrorCode.INVALID_PRODUCER_EPOCH, ProducerFencedError),
        (ErrorCode.UNKNOWN_PRODUCER_ID, UnknownProducerIdError),
    ],
)
async def test_a_fatal_sequence_error_fails_every_pending_record_and_later_sends(
    cluster: FakeCluster, code: ErrorCode, error_type: type[ProducerFatalError]
) -> None:
    cluster.create_topic("t", 2)
    async with Producer(cluster.bootstrap, **ONE_RECORD_BATCHES) as producer:  # type: ignore[arg-type]
        await (await producer.send("t", b"first", partition=0))
        cluster.delay_ms[ApiKey.PRODUCE] = 30
        cluster.fail_next(ApiKey.PRODUCE, code, "t", 0)  # for the batch next in sequence
        futures = [producer.send_nowait("t", value(i), partition=0) for i in range(3)]
        with trio.fail_after(10):
            await producer.flush()
        for future in futures:
            assert isinstance(future.exception(), error_type)
            assert future.exception().code is code  # type: ignore[union-attr]
        assert str(futures[0].exception()).startswith(code.name)
        with pytest.raises(error_type) as info:
            await producer.send("t", b"after", partition=1)
        assert "create a new Producer" in str(info.value)
        with pytest.raises(error_type):
            producer.send_nowait("t", b"after", partition=0)
    assert stored_values(cluster, "t", 0) == [b"first"]
    assert stored_values(cluster, "t", 1) == []


async def test_a_sequence_gap_before_anything_was_acknowledged_stops_the_producer(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t", 1)
    async with Producer(cluster.bootstrap, **ONE_RECORD_BATCHES) as producer:  # type: ignore[arg-type]
        cluster.fail_next(ApiKey.PRODUCE, OOOS, "t", 0)
        first = await producer.send("t", b"first", partition=0)
        with trio.fail_after(10), pytest.raises(OutOfOrderSequenceError) as info:
            await first
        assert str(info.value).startswith("OUT_OF_ORDER_SEQUENCE_NUMBER")
        with pytest.raises(OutOfOrderSequenceError):
            producer.send_nowait("t", b"after", partition=0)
    assert stored_values(cluster) == []


async def test_a_sequence_gap_after_an_acknowledged_batch_is_a_deposed_leaders_and_retried(
    cluster: FakeCluster,
) -> None:
    """acks=all: an acknowledged batch is on every replica that may lead, so a broker that
    lacks it no longer leads (it has not heard yet): ask the metadata again and retry."""
    cluster.create_topic("t", 1)
    async with Producer(cluster.bootstrap, **ONE_RECORD_BATCHES) as producer:  # type: ignore[arg-type]
        await (await producer.send("t", b"first", partition=0))
        cluster.fail_next(ApiKey.PRODUCE, OOOS, "t", 0, times=2)
        futures = [producer.send_nowait("t", value(i), partition=0) for i in range(3)]
        with trio.fail_after(10):
            await producer.flush()
        assert [f.exception() for f in futures] == [None, None, None]
    assert stored_values(cluster) == [b"first", value(0), value(1), value(2)]
    assert [code for _, code in produce_answers(cluster)].count(OOOS) == 2


async def test_a_fatal_error_also_fails_records_queued_for_other_partitions(
    cluster3: FakeCluster,
) -> None:
    cluster = cluster3
    cluster.create_topic("t", 2)  # partition 1 on another broker: it does not ride along
    async with Producer(cluster.bootstrap, linger_ms=60_000, batch_size=100) as producer:
        await producer.send("t", b"first", partition=0)
        await producer.flush()
        cluster.fail_next(ApiKey.PRODUCE, ErrorCode.INVALID_PRODUCER_EPOCH, "t", 0)
        lingering = await producer.send("t", b"b", partition=1)  # waits for linger: queued
        doomed = await producer.send("t", value(0), partition=0)  # a full batch: goes now
        with trio.fail_after(5), pytest.raises(ProducerFencedError):
            await doomed
        assert lingering.done()
        assert isinstance(lingering.exception(), ProducerFencedError)
        assert "producer stopped" in str(lingering.exception())


async def test_a_batch_whose_outcome_is_unknown_stops_the_producer_when_it_expires(
    cluster: FakeCluster,
) -> None:
    """REQUEST_TIMED_OUT may come after an append: once the batch gives up, nobody knows
    whether its sequence numbers are used, so no later batch can be numbered."""
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.REQUEST_TIMED_OUT, times=1_000_000)
    async with Producer(
        cluster.bootstrap, retry_backoff_ms=20, delivery_timeout_ms=300, linger_ms=0
    ) as producer:
        future = await producer.send("t", b"a")
        with trio.fail_after(5), pytest.raises(HighwaterTimeoutError):
            await future
        with pytest.raises(ProducerFatalError) as info:
            await producer.send("t", b"b")
        assert "unknown" in str(info.value)
        assert not isinstance(info.value, HighwaterTimeoutError)
        assert not info.value.retriable


async def test_closing_after_a_fatal_error_is_clean(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.INVALID_PRODUCER_EPOCH)
    async with Producer(cluster.bootstrap) as producer:
        future = await producer.send("t", b"a")
        with trio.fail_after(5), pytest.raises(ProducerFencedError):
            await future
        await producer.flush()  # nothing pending: returns at once
    with pytest.raises(HighwaterClientError):
        await producer.send("t", b"b")


# ----- the pure rules -------------------------------------------------------------------------


def test_increment_sequence_wraps_both_ways() -> None:
    assert increment_sequence(MAX_SEQUENCE, 1) == 0
    assert increment_sequence(MAX_SEQUENCE - 1, 3) == 1
    assert increment_sequence(0, -1) == MAX_SEQUENCE
    assert increment_sequence(5, 10) == 15


def _batch(records: int, partition: int = 0) -> ProducerBatch:
    batch = ProducerBatch("t", partition, 0)
    for _ in range(records):
        batch.add(0, None, b"x", (), 17)
    return batch


def test_drain_rules_one_batch_alone_then_five_then_retries_in_order() -> None:
    state = IdempotenceState()
    batches = [_batch(2) for _ in range(7)]
    assert state.sendable(batches[0], 1)
    state.assign(batches[0])
    assert not state.sendable(batches[1], 1)  # nothing acknowledged yet: one at a time
    batches[0].attempts = 1
    state.acknowledge(batches[0])
    for batch in batches[1:6]:
        assert state.sendable(batch, 1)
        state.assign(batch)
        batch.attempts = 1
    assert [b.base_sequence for b in batches[:6]] == [0, 2, 4, 6, 8, 10]
    assert not state.sendable(batches[6], 1)  # five unacknowledged
    # Batches 2 and 4 come back for a retry: only the lowest unacknowledged one may go.
    assert state.is_next(batches[1]) and not state.is_next(batches[3])
    assert state.sendable(batches[1], 1) and not state.sendable(batches[3], 1)
    goes_before = state.retry_goes_before(batches[2])
    assert goes_before(batches[3]) and not goes_before(batches[1])
    assert goes_before(batches[6])  # unsequenced batches come after every retry
    # Batch 3 (sequence 4) is refused: 4..5 are given back, later batches move down.
    state.release(batches[2])
    assert [b.base_sequence for b in batches[3:6]] == [4, 6, 8]
    assert all(b.encoded is None for b in batches[3:6])
    assert state.partitions[("t", 0)].next_sequence == 10
    state.assign(batches[6])
    assert batches[6].base_sequence == 10


def test_no_new_batch_goes_to_a_new_leader_while_an_earlier_one_is_at_the_old() -> None:
    """A batch in flight to the old leader may be in the new leader's log already (replicated,
    its answer not back): later batches sent to the new leader would be taken, and once more
    than 5 were, the old batch's retry could only be refused as out of order (a soak met it)."""
    state = IdempotenceState()
    first, second, third = _batch(1), _batch(1), _batch(1)
    state.assign(first)
    first.attempts = 1
    state.acknowledge(first)
    state.assign(second)
    second.attempts, second.in_flight_to = 1, 1
    assert state.sendable(third, 1)  # pipelined behind it, to the same broker
    assert not state.sendable(third, 2)  # the leader moved: wait for its answer
    second.in_flight_to = None  # answered: a retry (leading, to the new leader) or done
    assert state.sendable(third, 2)


def test_accumulator_with_idempotence_keeps_the_window_and_sends_retries_alone() -> None:
    state = IdempotenceState()
    acc = RecordAccumulator(
        batch_size=100,
        linger_ms=0,
        delivery_timeout_ms=10_000,
        muting=False,
        sendable=state.sendable,
    )
    for _ in range(6):
        acc.append_fields("t", 0, 0, None, b"x" * 60, (), 80, 0)
    leader = lambda topic, partition: 1  # noqa: E731

    def encode(batch: ProducerBatch) -> bytes:
        state.assign(batch)
        return b"x"

    first = acc.drain(1, leader, 1_000_000, 0, encode)
    assert [b.base_sequence for b in first] == [0]
    assert acc.drain(1, leader, 1_000_000, 0, encode) == []  # not acknowledged yet
    first[0].attempts = 1
    state.acknowledge(first[0])
    in_flight = acc.drain(1, leader, 1_000_000, 0, encode)
    assert [b.base_sequence for b in in_flight] == [1, 2, 3, 4, 5]  # fresh: together
    assert acc.drain(1, leader, 1_000_000, 0, encode) == []  # five unacknowledged
    for batch in in_flight:
        batch.attempts = 1
    # 3 then 1 come back for a retry: requeued in sequence order, 1 goes first, alone.
    for batch in (in_flight[2], in_flight[0]):
        acc.reenqueue(batch, 0, 0, state.retry_goes_before(batch))
    assert [b.base_sequence for b in acc.batches[("t", 0)]] == [1, 3]
    assert [b.base_sequence for b in acc.drain(1, leader, 1_000_000, 0, encode)] == [1]  # alone
    assert acc.drain(1, leader, 1_000_000, 0, encode) == []  # 3 waits for 1 and 2
    assert acc.ready(leader, 0)[0] == set()
    state.acknowledge(in_flight[0])
    state.acknowledge(in_flight[1])
    assert acc.ready(leader, 0)[0] == {1}
    assert [b.base_sequence for b in acc.drain(1, leader, 1_000_000, 0, encode)] == [3]


def test_a_backlogged_partition_fills_bigger_batches_up_to_the_cap() -> None:
    """Only 5 batches of a partition may be unacknowledged, so when two full batches already
    wait, the next one fills to backlog_batch_size instead of batch_size; never beyond it."""
    header = 61  # estimated_bytes counts the batch header

    def counts(backlog: int | None) -> list[int]:
        acc = RecordAccumulator(
            batch_size=header + 2 * 50,
            linger_ms=0,
            delivery_timeout_ms=10_000,
            muting=False,
            backlog_batch_size=backlog,
        )
        for _ in range(40):
            acc.append_fields("t", 0, 0, None, b"x" * 10, (), 50, 0)
        return [b.record_count for b in acc.batches[("t", 0)]]

    assert counts(header + 8 * 50) == [2, 2, 8, 8, 8, 8, 4]
    assert counts(None) == [2] * 20


async def test_the_idempotent_producer_grows_backlogged_batches_and_keeps_order(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, batch_size=1_000, linger_ms=1) as producer:
        await producer.partitions_for("t")
        futures = [producer.send_nowait("t", value(i), partition=0) for i in range(5_000)]
        await producer.flush()
    assert [f.result().offset for f in futures] == list(range(5_000))
    assert stored_values(cluster) == [value(i) for i in range(5_000)]
    assert max(h.size for h in stored_headers(cluster)) > 1_000  # some batches grew


async def test_a_gap_reported_for_a_batch_sent_behind_an_unacked_one_is_retried() -> None:
    """Answers to pipelined requests may be handled in any order: batch 1 went while batch 0
    was unacknowledged, the leader answered it OUT_OF_ORDER (batch 0 not there yet), and
    batch 0's acknowledgement was handled first. Batch 1 is next in sequence by then, but
    the gap was batch 0's: retry, do not stop the producer."""
    producer = Producer("127.0.0.1:1", linger_ms=0)
    state = producer._idempotence
    assert state is not None
    accumulator = producer._accumulator
    now_ms = trio.current_time() * 1000
    first, _ = accumulator.append_fields("t", 0, 0, None, b"a", (), 10, now_ms)
    (a,) = accumulator.batches[("t", 0)]
    a.capacity = 0  # full: the next record opens batch b
    accumulator.append_fields("t", 0, 0, None, b"b", (), 10, now_ms)
    b = accumulator.batches[("t", 0)][1]
    b.capacity = 0
    leader = lambda topic, partition: 1  # noqa: E731

    def encode(batch: ProducerBatch) -> bytes:
        state.assign(batch)
        return b"x"

    state.partitions.setdefault(("t", 0), PartitionSequences()).acknowledged = True
    drained = accumulator.drain(1, leader, 1_000_000, now_ms, encode)
    assert drained == [a, b]
    sender = producer._sender
    sender.produce_request(drained)  # both sent: b behind a
    assert b.sent_behind and not a.sent_behind
    sender.outcomes.acknowledged(a, 0, -1)
    sender.outcomes.retry_or_fail(b, ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "t-0")
    assert producer._fatal_error is None
    assert list(accumulator.batches[("t", 0)]) == [b]  # queued for its retry
    assert first.done() and first.result().offset == 0
