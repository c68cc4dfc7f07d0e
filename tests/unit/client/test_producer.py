"""Producer against the fake cluster: batching, linger, retries, errors, acks, compression."""

from __future__ import annotations

import pytest
import trio

from client.errors import (
    ClientClosedError,
    HighwaterClientError,
    HighwaterTimeoutError,
    UnknownTopicError,
)
from client.partitioner import partition_for_key
from client.producer import Producer, RecordMetadata
from protocol.apis import ApiKey
from protocol.compression import CODECS, Compression
from protocol.errors import ErrorCode
from protocol.messages.metadata import MetadataRequest
from protocol.messages.produce import ProduceRequest
from protocol.records import Record, build_batch, build_batch_from_entries, read_header
from tests.unit.client.fake_broker import FakeCluster


def produce_requests(cluster: FakeCluster) -> list[ProduceRequest]:
    return [body for _, body in cluster.requests if isinstance(body, ProduceRequest)]


async def test_keyed_records_land_on_murmur2_partitions_with_consecutive_offsets(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t", 3)
    async with Producer(cluster.bootstrap, linger_ms=20) as producer:
        futures = [await producer.send("t", b"v%d" % i, key=b"k%d" % (i % 7)) for i in range(100)]
        metas = [await f for f in futures]
    next_offset = {0: 0, 1: 0, 2: 0}
    for i, meta in enumerate(metas):
        assert meta.topic == "t"
        assert meta.partition == partition_for_key(b"k%d" % (i % 7), 3)
        assert meta.offset == next_offset[meta.partition]
        next_offset[meta.partition] += 1
        stored = cluster.records("t", meta.partition)[meta.offset]
        assert stored.value == b"v%d" % i
        assert meta.timestamp == stored.timestamp_ms
    # linger gathered everything into very few requests, one batch per partition.
    assert len(produce_requests(cluster)) <= 2


async def test_one_request_per_leader_carries_all_its_partitions(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 6)  # leaders 1,2,3,1,2,3
    async with Producer(cluster3.bootstrap, linger_ms=50) as producer:
        futures = [await producer.send("t", b"x", partition=p % 6) for p in range(60)]
        await producer.flush()
    assert all(f.done() and f.exception() is None for f in futures)
    requests = [(b, body) for b, body in cluster3.requests if isinstance(body, ProduceRequest)]
    assert sorted(b for b, _ in requests) == [1, 2, 3]
    for broker, body in requests:
        partitions = {p.index for t in body.topic_data for p in t.partition_data}
        assert partitions == {p for p in range(6) if p % 3 == broker - 1}


async def test_linger_holds_a_small_batch_and_flush_releases_it(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, linger_ms=60_000) as producer:
        future = await producer.send("t", b"a")
        with trio.move_on_after(0.2):
            await future
        assert not future.done()
        assert produce_requests(cluster) == []
        await producer.flush(timeout_ms=5_000)
        assert (await future).offset == 0


async def test_linger_expiry_sends_without_flush(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, linger_ms=100) as producer:
        start = trio.current_time()
        future = await producer.send("t", b"a")
        with trio.fail_after(5):
            meta = await future
        assert trio.current_time() - start >= 0.09
        assert meta.offset == 0


async def test_full_batches_go_without_waiting_for_linger(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    # Not idempotent: a backlogged idempotent partition's batches may grow past batch_size
    # (test_producer_idempotence.py covers that).
    async with Producer(
        cluster.bootstrap, linger_ms=60_000, batch_size=1000, enable_idempotence=False
    ) as producer:
        futures = [await producer.send("t", bytes(100), partition=0) for _ in range(30)]
        with trio.fail_after(5):
            for f in futures[:20]:
                await f
        await producer.flush()
    offsets = [f.result().offset for f in futures]
    assert offsets == list(range(30))
    # batch_size 1000 holds ~8 records of ~116 bytes: several batches were built.
    stored = cluster.topics["t"][0].batches
    assert len(stored) >= 3
    assert all(read_header(data).record_count <= 9 for _, data in stored)


async def test_retry_after_not_leader_refreshes_metadata(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER)
    async with Producer(cluster.bootstrap, retry_backoff_ms=10) as producer:
        meta = await (await producer.send("t", b"a"))
    assert meta.offset == 0
    assert len(produce_requests(cluster)) == 2
    assert cluster.count(MetadataRequest) >= 2
    assert len(cluster.records("t", 0)) == 1


async def test_leader_move_is_followed(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 1, leaders=[1])
    async with Producer(cluster3.bootstrap, retry_backoff_ms=10) as producer:
        assert (await (await producer.send("t", b"a"))).offset == 0
        cluster3.move_leader("t", 0, 3)
        meta = await (await producer.send("t", b"b"))
    assert meta.offset == 1
    brokers = [b for b, body in cluster3.requests if isinstance(body, ProduceRequest)]
    # The retry goes to the old leader again when it is due before the metadata refresh has
    # answered (as in Kafka's Sender): a loaded machine shows [1, 1, 1, 3].
    assert brokers[:2] == [1, 1] and brokers[-1] == 3 and set(brokers[2:-1]) <= {1}


async def test_dropped_connection_is_retried(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.drop_next(ApiKey.PRODUCE)
    async with Producer(cluster.bootstrap, retry_backoff_ms=10) as producer:
        metas = [await f for f in [await producer.send("t", b"%d" % i) for i in range(5)]]
    assert [m.offset for m in metas] == [0, 1, 2, 3, 4]
    assert [r.value for r in cluster.records("t", 0)] == [b"0", b"1", b"2", b"3", b"4"]


async def test_non_retriable_error_fails_the_future_with_its_name(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.MESSAGE_TOO_LARGE)
    async with Producer(cluster.bootstrap) as producer:
        future = await producer.send("t", b"a")
        with pytest.raises(HighwaterClientError) as info:
            await future
        assert info.value.code is ErrorCode.MESSAGE_TOO_LARGE
        assert str(info.value).startswith("MESSAGE_TOO_LARGE")
        assert (await (await producer.send("t", b"b"))).offset == 0  # producer still works


async def test_retries_run_out(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=10)
    async with Producer(cluster.bootstrap, retries=2, retry_backoff_ms=1) as producer:
        future = await producer.send("t", b"a")
        with pytest.raises(HighwaterClientError) as info:
            await future
    assert info.value.code is ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert len(produce_requests(cluster)) == 3


async def test_delivery_timeout_expires_records(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_ENOUGH_REPLICAS, times=1000)
    async with Producer(
        cluster.bootstrap, retry_backoff_ms=20, delivery_timeout_ms=300, linger_ms=0
    ) as producer:
        future = await producer.send("t", b"a")
        with trio.fail_after(5), pytest.raises(HighwaterTimeoutError) as info:
            await future
    assert "NOT_ENOUGH_REPLICAS" in str(info.value)


async def test_acks_zero_gets_no_offsets(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, acks=0) as producer:
        metas = [await f for f in [await producer.send("t", b"%d" % i) for i in range(3)]]
    assert [m.offset for m in metas] == [-1, -1, -1]
    assert produce_requests(cluster)[0].acks == 0
    with trio.fail_after(5):
        while len(cluster.topics["t"][0].batches) == 0:
            await cluster._appended.wait()
    assert len(cluster.records("t", 0)) == 3


async def test_acks_all_is_sent_as_minus_one(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, acks="all") as producer:
        await (await producer.send("t", b"a"))
    assert produce_requests(cluster)[0].acks == -1


@pytest.mark.parametrize(("name", "codec"), list(CODECS.items()))
async def test_every_codec_of_the_protocol_round_trips(
    cluster: FakeCluster, name: str, codec: Compression
) -> None:
    """Each of protocol.compression's codecs, by Kafka's name (any case) or as the enum: every
    stored batch is compressed with it and decodes to the records sent, keys and headers too."""
    sent = [(b"k%d" % i, b"value %d " % i * 20) for i in range(100)]
    for topic, given in (("by-name", name.upper()), ("by-enum", codec)):
        cluster.create_topic(topic)
        async with Producer(cluster.bootstrap, compression=given, batch_size=2_000) as producer:
            assert producer.compression is codec
            futures = [
                await producer.send(topic, value, key=key, headers=[("h", key)])
                for key, value in sent
            ]
            await producer.flush()
        assert [f.result().offset for f in futures] == list(range(len(sent)))
        headers = cluster.batch_headers(topic, 0)
        assert len(headers) > 1
        assert {h.compression for h in headers} == {codec}
        stored = cluster.records(topic, 0)
        assert [(r.key, r.value, r.headers) for r in stored] == [
            (key, value, (("h", key),)) for key, value in sent
        ]


async def test_unknown_compression_is_refused_naming_the_known_ones(cluster: FakeCluster) -> None:
    with pytest.raises(ValueError, match="none, gzip, snappy, lz4, zstd"):
        Producer(cluster.bootstrap, compression="brotli")


async def test_headers_and_timestamps_are_kept(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    async with Producer(cluster.bootstrap) as producer:
        meta = await (
            await producer.send(
                "t", None, key=b"k", headers=[("h", b"1"), ("n", None)], timestamp_ms=1234
            )
        )
    assert meta == RecordMetadata("t", 0, 0, 1234)
    (record,) = cluster.records("t", 0)
    assert record.value is None
    assert record.headers == (("h", b"1"), ("n", None))
    assert record.timestamp_ms == 1234


async def test_unknown_topic_fails_after_max_block(cluster: FakeCluster) -> None:
    async with Producer(cluster.bootstrap, max_block_ms=200, retry_backoff_ms=20) as producer:
        with trio.fail_after(5), pytest.raises(UnknownTopicError):
            await producer.send("nope", b"a")


async def test_bad_partition_is_rejected(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 2)
    async with Producer(cluster.bootstrap) as producer:
        with pytest.raises(HighwaterClientError) as info:
            await producer.send("t", b"a", partition=2)
    assert info.value.code is ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


async def test_keyless_records_stick_to_one_partition(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 4)
    async with Producer(cluster.bootstrap) as producer:
        futures = [await producer.send("t", b"v") for _ in range(20)]
        await producer.flush()
    assert len({f.result().partition for f in futures}) == 1


async def test_max_in_flight_one_keeps_order_across_retries(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.fail_next(ApiKey.PRODUCE, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=2)
    async with Producer(
        cluster.bootstrap,
        max_in_flight_requests_per_connection=1,
        batch_size=200,
        linger_ms=0,
        retry_backoff_ms=5,
    ) as producer:
        futures = [await producer.send("t", b"%03d" % i) for i in range(50)]
        await producer.flush()
    assert [f.result().offset for f in futures] == list(range(50))
    assert [r.value for r in cluster.records("t", 0)] == [b"%03d" % i for i in range(50)]


@pytest.mark.parametrize("idempotence", [False, True])
async def test_pipelined_requests_leave_in_the_order_they_were_drained(
    cluster: FakeCluster, idempotence: bool
) -> None:
    """Up to 5 requests in flight, and a request's task sends what its answer let go (the
    follow-on send): without idempotence nothing would put a request that overtook an earlier
    one back in order, so every record must be stored in the order it was sent."""
    cluster.create_topic("t")
    async with Producer(
        cluster.bootstrap, batch_size=1_000, linger_ms=0, enable_idempotence=idempotence
    ) as producer:
        await producer.partitions_for("t")
        futures = []
        for i in range(5_000):
            futures.append(producer.send_nowait("t", b"%04d" % i + bytes(40), partition=0))
            if i % 50 == 0:
                await trio.lowlevel.checkpoint()  # let requests go while records arrive
        await producer.flush()
    assert [f.result().offset for f in futures] == list(range(5_000))
    assert [r.value[:4] for r in cluster.records("t", 0)] == [b"%04d" % i for i in range(5_000)]


async def test_an_answer_does_not_wake_the_sender_task_to_repeat_its_tasks_look(
    cluster: FakeCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After an answer the request's task looks at the accumulator itself (the follow-on
    send); it wakes the sender task only for something due before that task's own next look,
    so one record sent and awaited at a time costs two looks, not three."""
    from client.producer.sender import Sender

    looks = 0
    sweep = Sender._sweep

    def counted(self: Sender) -> object:
        nonlocal looks
        looks += 1
        return sweep(self)

    cluster.create_topic("t")
    async with Producer(cluster.bootstrap, linger_ms=0) as producer:
        await (await producer.send("t", b"first"))
        monkeypatch.setattr(Sender, "_sweep", counted)
        for i in range(50):
            assert (await (await producer.send("t", b"%d" % i))).offset == i + 1
        monkeypatch.undo()
    # One look by the sender task for the new batch, one by the request's task after it.
    assert looks <= 2 * 50 + 5, looks


async def test_buffer_memory_bounds_send(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.delay_ms[ApiKey.PRODUCE] = 300
    async with Producer(
        cluster.bootstrap, buffer_memory=2000, batch_size=500, max_block_ms=50, linger_ms=0
    ) as producer:
        with pytest.raises(HighwaterTimeoutError):
            for _ in range(100):
                await producer.send("t", bytes(100))


async def test_send_after_close_is_refused(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    producer = Producer(cluster.bootstrap)
    with pytest.raises(HighwaterClientError):
        await producer.send("t", b"a")  # never started
    async with producer:
        pass
    with pytest.raises(HighwaterClientError):
        await producer.send("t", b"a")


async def test_exit_closing_the_producer_absorbs_its_own_nursery_cancel(
    cluster: FakeCluster,
) -> None:
    """__aexit__ closes the producer itself (no explicit aclose): if its own nursery is
    cancelled while closing hits a checkpoint, that Cancelled must be absorbed by the nursery,
    not escape a block that succeeded."""
    cluster.create_topic("t")
    producer = Producer(cluster.bootstrap, linger_ms=0)
    try:
        async with producer:
            future = await producer.send("t", b"a")
            await producer.flush()
            own_nursery = trio.lowlevel.current_task().child_nurseries[-1]
            close_connections = producer.metadata.aclose

            async def cancel_own_nursery_then_close() -> None:
                own_nursery.cancel_scope.cancel()
                await close_connections()  # a checkpoint, under the cancelled nursery

            producer.metadata.aclose = cancel_own_nursery_then_close  # type: ignore[method-assign]
    except trio.Cancelled:
        pytest.fail("a trio.Cancelled escaped a successful `async with Producer(...)` block")
    assert (await future).offset == 0


async def test_exit_cancelled_from_outside_still_fails_pending_records(
    cluster: FakeCluster,
) -> None:
    """The caller's deadline expiring while __aexit__ waits for delivery closes the producer:
    the records left fail with ClientClosedError instead of staying pending forever."""
    cluster.create_topic("t")
    cluster.delay_ms[ApiKey.PRODUCE] = 60_000
    with trio.move_on_after(0.3) as scope:
        async with Producer(cluster.bootstrap, linger_ms=0) as producer:
            future = await producer.send("t", b"a")
    assert scope.cancelled_caught
    assert future.done()
    with pytest.raises(ClientClosedError):
        future.result()
    with pytest.raises(HighwaterClientError):
        await producer.send("t", b"b")


def test_incremental_entries_build_the_same_bytes_as_build_batch() -> None:
    records = [
        Record(b"v%d" % i, None if i % 2 else b"k", 1_000 + 3 * i - i % 4, (("h", b"x"),) * (i % 3))
        for i in range(40)
    ]
    base = records[0].timestamp_ms
    entries = [(r.timestamp_ms - base, i, r.key, r.value, r.headers) for i, r in enumerate(records)]
    for codec in Compression:
        assert build_batch_from_entries(
            entries,
            base_timestamp=base,
            max_timestamp=max(r.timestamp_ms for r in records),
            compression=codec,
        ) == build_batch(records, compression=codec)


async def test_send_nowait_queues_without_awaiting_and_runs_callbacks(cluster: FakeCluster) -> None:
    cluster.create_topic("t", 2)
    seen: list[RecordMetadata] = []
    async with Producer(cluster.bootstrap, linger_ms=0) as producer:
        with pytest.raises(trio.WouldBlock):
            producer.send_nowait("unknown-yet", b"x")  # would wait for metadata
        await producer.partitions_for("t")
        futures = [
            producer.send_nowait(
                "t", b"%d" % i, partition=i % 2, callback=lambda f: seen.append(f.result())
            )
            for i in range(10)
        ]
        await producer.flush()
    assert sorted((m.partition, m.offset) for m in seen) == [
        (p, o) for p in (0, 1) for o in range(5)
    ]
    assert [f.result().offset for f in futures] == [i // 2 for i in range(10)]
    assert [r.value for r in cluster.records("t", 1)] == [b"1", b"3", b"5", b"7", b"9"]


async def test_send_nowait_would_block_when_buffer_memory_is_full(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    cluster.delay_ms[ApiKey.PRODUCE] = 300
    async with Producer(cluster.bootstrap, buffer_memory=1000, linger_ms=0) as producer:
        await producer.partitions_for("t")
        with pytest.raises(trio.WouldBlock):
            for _ in range(100):
                producer.send_nowait("t", bytes(100))
        future = await producer.send("t", bytes(100))  # waits for memory instead
        assert (await future).offset >= 0
