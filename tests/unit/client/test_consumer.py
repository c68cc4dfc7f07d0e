"""Consumer against the fake cluster: ordering, seeks, resets, partial fetches, leader moves,
and position validation after a leader change (KIP-320)."""

from __future__ import annotations

import struct

import msgpack
import pytest
import trio

from client.consumer import Consumer, ConsumerRecord, TopicPartition, truncation_offset
from client.errors import (
    CorruptBatchError,
    HighwaterClientError,
    LogTruncationError,
    OffsetOutOfRangeError,
)
from protocol.apis import ApiKey
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchRequest
from protocol.messages.metadata import MetadataRequest
from protocol.messages.offset_for_leader_epoch import OffsetForLeaderEpochRequest
from protocol.records import Record, build_batch, build_batch_from_entries, crc32c, read_header
from tests.unit.client.fake_broker import FakeCluster

T0 = 1_700_000_000_000


def append(
    cluster: FakeCluster, topic: str, partition: int, values: list[bytes], ts: int = T0
) -> None:
    """Store one batch directly, as a produce would (broker-side stamping of offset and epoch)."""
    part = cluster.topics[topic][partition]
    records = [Record(v, key=b"k", timestamp_ms=ts + i) for i, v in enumerate(values)]
    data = build_batch(
        records,
        base_offset=part.log_end_offset,
        now_ms=ts,
        partition_leader_epoch=part.leader_epoch,
    )
    part.batches.append((part.log_end_offset, data))
    part.log_end_offset += len(values)


def fill(cluster: FakeCluster, topic: str, partition: int, batches: int, per_batch: int) -> None:
    for b in range(batches):
        start = b * per_batch
        append(cluster, topic, partition, [b"%d" % i for i in range(start, start + per_batch)])


async def poll_until(consumer: Consumer, count: int, timeout_s: float = 5) -> list[ConsumerRecord]:
    out: list[ConsumerRecord] = []
    with trio.fail_after(timeout_s):
        while len(out) < count:
            out.extend(await consumer.poll(timeout_ms=200))
    return out


async def test_reads_everything_in_offset_order_per_partition(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 3)
    for p in range(3):
        fill(cluster3, "t", p, batches=5, per_batch=10)
    async with Consumer(cluster3.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", p) for p in range(3)])
        records = await poll_until(consumer, 150)
        assert await consumer.poll(timeout_ms=50) == []
        for p in range(3):
            offsets = [r.offset for r in records if r.partition == p]
            assert offsets == list(range(50))
            assert [r.value for r in records if r.partition == p] == [b"%d" % i for i in range(50)]
            assert await consumer.position(("t", p)) == 50
            assert consumer.highwater(("t", p)) == 50


async def test_a_cleaned_partition_reads_past_gaps_and_emptied_batches(
    cluster: FakeCluster,
) -> None:
    """A compacted partition as the log cleaner leaves it: a batch with gaps, and producers'
    last batches with no records left (Kafka's BatchRetention.RETAIN_EMPTY), one of them the
    last batch of the partition. The consumer reads the records there are and its position
    moves past the empty batches to the log end."""
    cluster.create_topic("t")
    part = cluster.topics["t"][0]
    gapped = [(0, 1, b"a", b"1", ()), (0, 3, b"b", b"2", ())]
    emptied = {"producer_id": 8, "producer_epoch": 0, "partition_leader_epoch": 0}
    stored = [
        build_batch_from_entries(
            gapped, base_timestamp=T0, max_timestamp=T0, base_offset=0, last_offset_delta=3
        ),
        build_batch_from_entries(
            (), base_timestamp=T0, max_timestamp=T0, base_offset=4, last_offset_delta=2,
            base_sequence=0, **emptied,
        ),
        build_batch([Record(b"3", key=b"c")], base_offset=7, now_ms=T0),
        build_batch_from_entries(
            (), base_timestamp=T0, max_timestamp=T0, base_offset=8, last_offset_delta=1,
            base_sequence=3, **emptied,
        ),
    ]  # fmt: skip
    for data in stored:
        part.batches.append((read_header(data).base_offset, data))
    part.log_end_offset = 10
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        records = await poll_until(consumer, 3)
        assert [(r.offset, r.value) for r in records] == [(1, b"1"), (3, b"2"), (7, b"3")]
        with trio.fail_after(5):
            while await consumer.position(("t", 0)) < 10:
                assert await consumer.poll(timeout_ms=100) == []
        consumer.seek(("t", 0), 5)  # inside an emptied batch
        assert [r.offset for r in await poll_until(consumer, 1)] == [7]


async def test_max_records_limits_a_poll(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    fill(cluster, "t", 0, 1, 30)
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        first = await consumer.poll(timeout_ms=2000, max_records=7)
        assert [r.offset for r in first] == list(range(7))
        rest = await poll_until(consumer, 23)
        assert [r.offset for r in rest] == list(range(7, 30))


async def test_seek_into_the_middle_of_a_batch(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    fill(cluster, "t", 0, 3, 10)
    async with Consumer(cluster.bootstrap) as consumer:
        consumer.assign([("t", 0)])
        consumer.seek(("t", 0), 15)
        records = await poll_until(consumer, 15)
        assert [r.offset for r in records] == list(range(15, 30))
        consumer.seek(("t", 0), 3)
        assert (await consumer.poll(timeout_ms=2000))[0].offset == 3


async def test_partial_trailing_batch_is_ignored(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    fill(cluster, "t", 0, 20, 5)
    cluster.truncate_fetch = True  # cut each fetch at exactly max_partition_fetch_bytes
    async with Consumer(
        cluster.bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=300
    ) as consumer:
        consumer.assign([("t", 0)])
        records = await poll_until(consumer, 100)
    assert [r.offset for r in records] == list(range(100))


async def test_batch_larger_than_partition_fetch_size_is_fetched_with_more(
    cluster: FakeCluster,
) -> None:
    cluster.create_topic("t")
    append(cluster, "t", 0, [bytes(500) for _ in range(10)])
    cluster.truncate_fetch = True
    async with Consumer(
        cluster.bootstrap, auto_offset_reset="earliest", max_partition_fetch_bytes=256
    ) as consumer:
        consumer.assign([("t", 0)])
        records = await poll_until(consumer, 10)
    assert [r.offset for r in records] == list(range(10))


async def test_default_reset_is_latest_and_earliest_reads_from_start(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    fill(cluster, "t", 0, 1, 5)
    async with Consumer(cluster.bootstrap) as latest:
        latest.assign([("t", 0)])
        assert await latest.position(("t", 0)) == 5
        assert await latest.poll(timeout_ms=50) == []
        append(cluster, "t", 0, [b"new"])
        records = await poll_until(latest, 1)
        assert [(r.offset, r.value) for r in records] == [(5, b"new")]
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as earliest:
        earliest.assign([("t", 0)])
        assert await earliest.position(("t", 0)) == 0


async def test_seek_to_beginning_end_and_timestamp(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    fill(cluster, "t", 0, 2, 10)  # record i has timestamp T0 + i % 10
    append(cluster, "t", 0, [b"late"], ts=T0 + 1000)
    async with Consumer(cluster.bootstrap) as consumer:
        tp = ("t", 0)
        consumer.assign([tp])
        consumer.seek_to_beginning()
        assert await consumer.position(tp) == 0
        consumer.seek_to_end([tp])
        assert await consumer.position(tp) == 21
        consumer.seek_to_timestamp(T0 + 500)
        assert (await poll_until(consumer, 1))[0].value == b"late"
        consumer.seek_to_timestamp(T0 + 5000)  # after everything: the end
        assert await consumer.position(tp) == 21
        assert await consumer.end_offsets([tp]) == {TopicPartition("t", 0): 21}
        assert await consumer.beginning_offsets([tp]) == {TopicPartition("t", 0): 0}
        assert await consumer.offsets_for_times({tp: T0 + 5}) == {TopicPartition("t", 0): (5, -1)}


async def test_out_of_range_resets_per_policy(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    fill(cluster, "t", 0, 1, 5)
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        consumer.seek(("t", 0), 100)
        records = await poll_until(consumer, 5)
        assert [r.offset for r in records] == list(range(5))
    async with Consumer(cluster.bootstrap, auto_offset_reset="none") as strict:
        strict.assign([("t", 0)])
        with pytest.raises(OffsetOutOfRangeError):
            await strict.poll(timeout_ms=100)  # no position at all
        strict.seek(("t", 0), 100)
        with pytest.raises(OffsetOutOfRangeError) as info:
            await strict.poll(timeout_ms=2000)
        assert info.value.positions == {("t", 0): 100}


async def test_follows_a_leader_move(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 1, leaders=[1])
    fill(cluster3, "t", 0, 1, 5)
    async with Consumer(
        cluster3.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
    ) as consumer:
        consumer.assign([("t", 0)])
        assert len(await poll_until(consumer, 5)) == 5
        cluster3.move_leader("t", 0, 2)
        append(cluster3, "t", 0, [b"after move"])
        records = await poll_until(consumer, 1)
    assert [(r.offset, r.value) for r in records] == [(5, b"after move")]
    fetch_brokers = [b for b, body in cluster3.requests if isinstance(body, FetchRequest)]
    assert fetch_brokers[0] == 1 and fetch_brokers[-1] == 2


@pytest.mark.parametrize(
    "code",
    [
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_LEADER_EPOCH,
        ErrorCode.FENCED_LEADER_EPOCH,
        ErrorCode.LEADER_NOT_AVAILABLE,
    ],
)
async def test_leader_errors_refresh_and_retry(cluster: FakeCluster, code: ErrorCode) -> None:
    cluster.create_topic("t")
    fill(cluster, "t", 0, 1, 3)
    cluster.fail_next(ApiKey.FETCH, code, times=2)
    async with Consumer(
        cluster.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
    ) as consumer:
        consumer.assign([("t", 0)])
        records = await poll_until(consumer, 3)
    assert [r.offset for r in records] == [0, 1, 2]


async def test_dropped_connection_is_survived(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    fill(cluster, "t", 0, 1, 3)
    cluster.drop_next(ApiKey.FETCH)
    async with Consumer(
        cluster.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
    ) as consumer:
        consumer.assign([("t", 0)])
        records = await poll_until(consumer, 3)
    assert [r.offset for r in records] == [0, 1, 2]


async def test_long_poll_returns_when_data_arrives(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 3)
    async with Consumer(cluster3.bootstrap, fetch_max_wait_ms=5000) as consumer:
        consumer.assign([("t", p) for p in range(3)])
        for p in range(3):
            await consumer.position(("t", p))
        start = trio.current_time()
        async with trio.open_nursery() as nursery:

            async def produce_later() -> None:
                await trio.sleep(0.1)
                append(cluster3, "t", 1, [b"hello"])
                cluster3._appended.set()

            nursery.start_soon(produce_later)
            records = await consumer.poll(timeout_ms=10_000)
        assert [(r.partition, r.value) for r in records] == [(1, b"hello")]
        assert trio.current_time() - start < 3  # not held by the idle leaders' long polls


async def test_poll_times_out_empty(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    async with Consumer(cluster.bootstrap) as consumer:
        consumer.assign([("t", 0)])
        start = trio.current_time()
        assert await consumer.poll(timeout_ms=150) == []
        assert 0.14 <= trio.current_time() - start < 2


async def test_subscribe_takes_every_partition(cluster: FakeCluster) -> None:
    cluster.create_topic("a", 2)
    cluster.create_topic("b", 1)
    append(cluster, "a", 1, [b"a1"])
    append(cluster, "b", 0, [b"b0"])
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.subscribe(["a", "b"])
        records = await poll_until(consumer, 2)
        assert {r.value for r in records} == {b"a1", b"b0"}
        assert consumer.assignment() == {("a", 0), ("a", 1), ("b", 0)}


async def test_headers_null_values_and_timestamps_come_through(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    part = cluster.topics["t"][0]
    records = [
        Record(b"a", key=None, timestamp_ms=T0, headers=(("h", b"1"), ("n", None))),
        Record(None, key=b"k", timestamp_ms=T0 + 5),
    ]
    part.batches.append((0, build_batch(records, base_offset=0)))
    part.log_end_offset = 2
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        got = await poll_until(consumer, 2)
    assert got == [
        ConsumerRecord("t", 0, 0, T0, None, b"a", (("h", b"1"), ("n", None))),
        ConsumerRecord("t", 0, 1, T0 + 5, b"k", None),
    ]


async def test_a_malformed_record_is_reported_as_corrupt(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    part = cluster.topics["t"][0]
    good = build_batch([Record(b"x", timestamp_ms=T0)], base_offset=0)
    # Same batch, its one record's value a msgpack str instead of bin (CRC recomputed).
    section = msgpack.packb([[0, 0, None, "x", []]], use_bin_type=True)
    tail = good[21:61] + section
    length = len(good[12:61]) + len(section)
    bad = (
        good[:8] + struct.pack(">i", length) + good[12:17] + struct.pack(">I", crc32c(tail)) + tail
    )
    part.batches.append((0, bad))
    part.log_end_offset = 1
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        with pytest.raises(HighwaterClientError, match=r"CORRUPT_MESSAGE.*key and value"):
            await poll_until(consumer, 1)


@pytest.mark.parametrize("damage", ["crc", "records"])
async def test_a_corrupt_batch_names_its_offset_and_can_be_skipped(
    cluster: FakeCluster, damage: str
) -> None:
    """Batches 0-1 and 5 are fine, 2-4 cannot be read (written by an older broker, or
    damaged on disk past the CRC): the records before it come, then an error naming topic,
    partition and offset, and seeking to the offset it names continues after it."""
    cluster.create_topic("t")
    part = cluster.topics["t"][0]
    append(cluster, "t", 0, [b"0", b"1"])
    middle = build_batch([Record(b"x", timestamp_ms=T0)] * 3, base_offset=2)
    if damage == "crc":
        middle = middle[:-1] + bytes([middle[-1] ^ 1])
    else:  # a str value: the CRC is right, the records section is not
        section = msgpack.packb([[0, i, None, "x", []] for i in range(3)], use_bin_type=True)
        tail = middle[21:61] + section
        length = len(middle[12:61]) + len(section)
        middle = (
            middle[:8]
            + struct.pack(">i", length)
            + middle[12:17]
            + struct.pack(">I", crc32c(tail))
            + tail
        )
    part.batches.append((2, middle))
    part.log_end_offset = 5
    append(cluster, "t", 0, [b"5"])
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", 0)])
        got: list[ConsumerRecord] = []
        with pytest.raises(CorruptBatchError) as info:
            with trio.fail_after(5):
                while True:
                    got += await consumer.poll(timeout_ms=200)
        assert [r.offset for r in got] == [0, 1]
        error = info.value
        assert (error.topic, error.partition, error.offset, error.next_offset) == ("t", 0, 2, 5)
        assert error.code == ErrorCode.CORRUPT_MESSAGE
        assert "t-0: the batch at offset 2 cannot be read" in str(error)
        assert "seek to offset 5 to skip it" in str(error)
        consumer.seek(("t", 0), error.next_offset)
        assert [r.value for r in await poll_until(consumer, 1)] == [b"5"]


# --- position validation after a leader change (KIP-320) ---------------------------------------


@pytest.mark.parametrize(
    ("position", "position_epoch", "leader_epoch", "end_offset", "divergent"),
    [
        (10, 0, 0, 10, None),  # the epoch ends exactly at the position: valid
        (10, 0, 0, 15, None),  # ... or after it
        (10, 0, 0, 6, 6),  # the leader's epoch 0 ends at 6: 6..9 were truncated away
        (10, 3, 1, 12, 9),  # the leader never had epoch 3: the last record consumed diverges
        (10, 3, 1, 4, 4),  # both: the end offset is the first known divergence
        (10, 3, 3, 10, None),
        (10, 0, -1, -1, None),  # UNDEFINED: the leader has no epoch information
        (10, 0, -1, 4, None),
    ],
)
def test_truncation_offset(
    position: int, position_epoch: int, leader_epoch: int, end_offset: int, divergent: int | None
) -> None:
    assert truncation_offset(position, position_epoch, leader_epoch, end_offset) == divergent


async def test_clean_leader_change_is_validated_then_followed(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 1, leaders=[1], replication_factor=3)
    fill(cluster3, "t", 0, batches=2, per_batch=5)
    async with Consumer(
        cluster3.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
    ) as consumer:
        consumer.assign([("t", 0)])
        assert len(await poll_until(consumer, 10)) == 10
        cluster3.move_leader("t", 0, 2)  # epoch 1; the new leader has all 10 records
        append(cluster3, "t", 0, [b"after move"])
        records = await poll_until(consumer, 1)
    assert [(r.offset, r.value) for r in records] == [(10, b"after move")]
    assert cluster3.validations() == [(2, 0, 1)]  # epoch 0 of the last record, asked at epoch 1
    # The validation came before the first fetch from the new leader, which carries epoch 1.
    kinds = [
        (b, type(body).__name__)
        for b, body in cluster3.requests
        if isinstance(body, OffsetForLeaderEpochRequest | FetchRequest) and b == 2
    ]
    assert kinds[0] == (2, "OffsetForLeaderEpochRequest")
    fetches = [body for b, body in cluster3.requests if isinstance(body, FetchRequest) and b == 2]
    assert {f.topics[0].partitions[0].current_leader_epoch for f in fetches} == {1}


async def test_truncated_log_after_a_leader_change_raises(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 1, leaders=[1], replication_factor=3)
    fill(cluster3, "t", 0, batches=2, per_batch=5)  # offsets 0..9, epoch 0
    async with Consumer(
        cluster3.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
    ) as consumer:
        consumer.assign([("t", 0)])
        assert len(await poll_until(consumer, 10)) == 10
        # An unclean election: the new leader only had offsets 0..4, then takes writes at 5.
        cluster3.truncate_to("t", 0, 5)
        cluster3.move_leader("t", 0, 2)
        append(cluster3, "t", 0, [b"new-5", b"new-6"])
        with pytest.raises(LogTruncationError) as info:
            await poll_until(consumer, 1)
        error = info.value
        assert (error.topic, error.partition, error.position, error.divergent_offset) == (
            "t",
            0,
            10,
            5,
        )
        assert "t-0" in str(error) and "10" in str(error) and "5" in str(error)
        assert await consumer.position(("t", 0)) == 10  # nothing skipped, nothing re-read
        with pytest.raises(LogTruncationError):  # still unresolved: raised again
            await consumer.poll(timeout_ms=500)
        consumer.seek(("t", 0), error.divergent_offset)
        records = await poll_until(consumer, 2)
    assert [(r.offset, r.value) for r in records] == [(5, b"new-5"), (6, b"new-6")]
    new_leader_fetch_offsets = {
        body.topics[0].partitions[0].fetch_offset
        for b, body in cluster3.requests
        if isinstance(body, FetchRequest) and b == 2
    }
    assert 10 not in new_leader_fetch_offsets  # never fetched past the divergence


async def test_fenced_fetch_refreshes_metadata_then_validates(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    fill(cluster, "t", 0, batches=1, per_batch=5)
    async with Consumer(
        cluster.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
    ) as consumer:
        consumer.assign([("t", 0)])
        assert len(await poll_until(consumer, 5)) == 5
        cluster.bump_leader_epoch("t", 0)  # the consumer's metadata still says epoch 0
        append(cluster, "t", 0, [b"epoch 1"])
        mark = len(cluster.requests)
        records = await poll_until(consumer, 1)
    assert [(r.offset, r.value) for r in records] == [(5, b"epoch 1")]
    story = []
    for _, body in cluster.requests[mark:]:
        if isinstance(body, FetchRequest):
            story.append(f"fetch@{body.topics[0].partitions[0].current_leader_epoch}")
        elif isinstance(body, MetadataRequest):
            story.append("metadata")
        elif isinstance(body, OffsetForLeaderEpochRequest):
            story.append("validate")
    first_fenced = story.index("fetch@0")
    assert story[first_fenced : first_fenced + 4] == ["fetch@0", "metadata", "validate", "fetch@1"]
    assert cluster.validations() == [(1, 0, 1)]


async def test_nothing_consumed_needs_no_validation(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 1, leaders=[1], replication_factor=2)
    async with Consumer(
        cluster3.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
    ) as consumer:
        consumer.assign([("t", 0)])
        assert await consumer.poll(timeout_ms=100) == []
        cluster3.move_leader("t", 0, 2)
        append(cluster3, "t", 0, [b"first"])
        records = await poll_until(consumer, 1)
        assert [r.value for r in records] == [b"first"]
        consumer.seek(("t", 0), 0)  # a seek: nothing consumed behind the position either
        cluster3.move_leader("t", 0, 1)
        assert [r.value for r in await poll_until(consumer, 1)] == [b"first"]
    assert cluster3.validations() == []


async def test_undefined_epoch_answer_skips_validation(cluster3: FakeCluster) -> None:
    cluster3.create_topic("t", 1, leaders=[1], replication_factor=2)
    fill(cluster3, "t", 0, batches=1, per_batch=5)
    async with Consumer(
        cluster3.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
    ) as consumer:
        consumer.assign([("t", 0)])
        assert len(await poll_until(consumer, 5)) == 5
        cluster3.move_leader("t", 0, 2)
        cluster3.topics["t"][0].epoch_end_override = (-1, -1)
        append(cluster3, "t", 0, [b"next"])
        records = await poll_until(consumer, 1)
    assert [(r.offset, r.value) for r in records] == [(5, b"next")]
    assert cluster3.validations() == [(2, 0, 1)]


@pytest.mark.parametrize("code", [ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.NOT_LEADER_OR_FOLLOWER])
async def test_validation_errors_are_retried(cluster3: FakeCluster, code: ErrorCode) -> None:
    cluster3.create_topic("t", 1, leaders=[1], replication_factor=2)
    fill(cluster3, "t", 0, batches=1, per_batch=5)
    async with Consumer(
        cluster3.bootstrap, auto_offset_reset="earliest", retry_backoff_ms=10
    ) as consumer:
        consumer.assign([("t", 0)])
        assert len(await poll_until(consumer, 5)) == 5
        cluster3.move_leader("t", 0, 2)
        cluster3.fail_next(ApiKey.OFFSET_FOR_LEADER_EPOCH, code, times=2)
        append(cluster3, "t", 0, [b"next"])
        records = await poll_until(consumer, 1)
    assert [r.offset for r in records] == [5]
    assert len(cluster3.validations()) == 3


async def test_leader_error_backoff_doubles_up_to_the_max(cluster: FakeCluster) -> None:
    cluster.create_topic("t")
    fill(cluster, "t", 0, batches=1, per_batch=1)
    cluster.fail_next(ApiKey.FETCH, ErrorCode.NOT_LEADER_OR_FOLLOWER, times=4)
    async with Consumer(
        cluster.bootstrap,
        auto_offset_reset="earliest",
        retry_backoff_ms=20,
        retry_backoff_max_ms=50,
    ) as consumer:
        consumer.assign([("t", 0)])
        start = trio.current_time()
        assert len(await poll_until(consumer, 1)) == 1
        elapsed = trio.current_time() - start
    assert 0.02 + 0.04 + 0.05 + 0.05 <= elapsed < 3  # 20, 40, then capped at 50 ms


async def test_fetch_sessions_name_only_what_changed_and_survive_a_lost_session(
    cluster: FakeCluster,
) -> None:
    """KIP-227 against the broker's own session core (in the fake): once data stops, fetches
    are incremental; when the broker forgets the session (FETCH_SESSION_ID_NOT_FOUND) the
    consumer opens a new one and misses nothing."""
    cluster.create_topic("t", 4)
    fill(cluster, "t", 0, 2, 10)
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([("t", p) for p in range(4)])
        first = await poll_until(consumer, 20)
        assert await consumer.poll(timeout_ms=300) == []  # idle: incremental long-polls
        assert cluster.incremental_fetches > 0
        cluster.fetch_sessions[1].sessions.clear()  # as after a broker restart
        fill(cluster, "t", 3, 1, 5)
        later = await poll_until(consumer, 5)
        assert [r.offset for r in first] == list(range(20))
        assert [(r.partition, r.offset) for r in later] == [(3, i) for i in range(5)]
        assert [await consumer.position(("t", p)) for p in range(4)] == [20, 0, 0, 5]
