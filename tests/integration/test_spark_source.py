"""`spark.read` / `spark.readStream` `.format("highwater")` against real brokers, a real
ZooKeeper and a real local SparkSession.

One 3-broker cluster for the module. Brokers 2 and 3 get a long ZooKeeper session (they are
the followers paused in the committed-only test: a pause must not expire their sessions, or the
controller would shrink the ISR and move the high watermark); broker 1 keeps the short one, as
the leader killed in the failover test. A long replica.lag.time.max.ms keeps the ISR whole
while followers are paused, so the HW stays where the test knows it is.
"""

from __future__ import annotations

import json
import math
import time
from collections import Counter
from collections.abc import Iterator, Sequence
from functools import partial
from pathlib import Path
from typing import Any

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.metadata import ClusterMetadata, list_offsets
from client.producer import Producer
from client.spark.partition_reader import FIRST_FETCH_BYTES
from protocol.compression import Compression
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    high_watermark,
    log_end_offset,
    running_cluster,
    wait_isr,
    whole_cluster_around,
    zk_view,
)
from tests.integration.spark_session import (
    blocking,
    memory_rows,
    spark,
    start_memory_stream,
    stopping,
)

__all__ = ["spark"]  # the session fixture, imported for this module's tests

pytestmark = [pytest.mark.integration]

OVERRIDES = {
    **FAST_REPLICATION,
    "replica.lag.time.max.ms": "120000",
    "log.retention.check.interval.ms": "200",
}
LONG_SESSION = {"zookeeper.session.timeout.ms": "30000"}
EARLIEST, LATEST = -2, -1
QUERY_TIMEOUT_S = 90


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("spark-source")
    broker_overrides = {2: LONG_SESSION, 3: LONG_SESSION}
    with running_cluster(zookeeper.port, directory, OVERRIDES, broker_overrides) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


# -- helpers ---------------------------------------------------------------------------------


def address(broker: BrokerProcess) -> str:
    return f"{broker.host}:{broker.port}"


async def send(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    *,
    partition: int = 0,
    acks: int | str = "all",
    small_batches: bool = False,
) -> list[int]:
    """Produce `values` to one partition, wait for every acknowledgement; the offsets.
    `small_batches`: requests under 1 KiB (a topic with a tiny segment.bytes refuses larger
    ones; the producer grows batches of a backlog up to max_request_size)."""
    async with Producer(
        bootstrap,
        acks=acks,
        linger_ms=1,
        batch_size=300 if small_batches else 16_384,
        max_request_size=1000 if small_batches else 1_048_576,
    ) as producer:
        futures = [await producer.send(topic, v, partition=partition) for v in values]
        return [(await f).offset for f in futures]


def send_now(
    bootstrap: str,
    topic: str,
    values: Sequence[bytes],
    *,
    partition: int = 0,
    small_batches: bool = False,
) -> list[int]:
    """`send` (acks=all) from a sync test."""
    return trio.run(
        partial(send, bootstrap, topic, values, partition=partition, small_batches=small_batches)
    )


async def offsets_now(bootstrap: str, topic: str, partitions: int, which: int) -> list[int]:
    """Each partition's log start offset (EARLIEST) or high watermark (LATEST)."""
    metadata = ClusterMetadata(bootstrap)
    try:
        found = await list_offsets(
            metadata, {(topic, p): which for p in range(partitions)}, timeout_ms=20_000
        )
    finally:
        await metadata.aclose()
    return [found[(topic, p)][0] for p in range(partitions)]


def source_options(bootstrap: str, topic: str, **more: str) -> dict[str, str]:
    return {"bootstrap.servers": bootstrap, "subscribe": topic, **more}


def assert_exactly(
    rows: Sequence[tuple[int, int, bytes]], expected: dict[int, list[bytes]]
) -> None:
    """`rows` hold each partition's records exactly once, in offset order: every offset
    0..len-1 of `expected[partition]` with its value, nothing else."""
    seen = Counter((p, o) for p, o, _ in rows)
    duplicates = sorted(k for k, n in seen.items() if n > 1)
    assert not duplicates, f"read more than once: {duplicates[:10]}"
    got = {(p, o): v for p, o, v in rows}
    want = {(p, o): v for p, values in expected.items() for o, v in enumerate(values)}
    missing = sorted(set(want) - set(got))
    extra = sorted(set(got) - set(want))
    assert not missing and not extra, f"missing {missing[:10]}, unexpected {extra[:10]}"
    wrong = sorted(k for k in want if got[k] != want[k])
    assert not wrong, f"wrong values at {wrong[:10]}"


async def emitted(spark: Any, name: str) -> list[tuple[int, int, bytes]]:
    """memory_rows from an async test (a Spark job: in a thread)."""
    return await blocking(partial(memory_rows, spark, name), QUERY_TIMEOUT_S, f"rows of {name}")


def planned_ends(query: Any, topic: str, partition: int) -> list[int]:
    """The end (and latest) offsets of `topic`-`partition` the query's progress reports: what
    the source planned its micro-batches up to."""
    ends = []
    for progress in query.recentProgress:
        for source in progress["sources"]:
            for key in ("endOffset", "latestOffset"):
                value = source[key]
                offsets = json.loads(value) if isinstance(value, str) else value
                if offsets and topic in offsets:
                    ends.append(int(offsets[topic][str(partition)]))
    return ends


# -- 1. committed records only ---------------------------------------------------------------


@pytest.mark.timeout(240)
async def test_stream_reads_only_below_the_high_watermark(
    cluster: Cluster, spark: Any, tmp_path: Path
) -> None:
    """With both followers paused (SIGSTOP), acks=1 records go past the HW on the leader; a
    running stream never emits them while they are uncommitted, and once the followers resume
    it emits them, and every record, exactly once. min.insync.replicas=2 does not block acks=1
    produce (it gates acks=all only); acks=all sets up the committed part first."""
    topic = "committed-only"
    leader, followers = cluster.brokers[1], [cluster.brokers[2], cluster.brokers[3]]
    await create_topic(cluster, topic, [[1, 2, 3]], {"min.insync.replicas": "2"})
    async with zk_view(cluster) as zk:
        before = await wait_isr(cluster, zk, topic, 0, [1, 2, 3], leader=1)
    committed = [b"c-%d" % i for i in range(200)]
    uncommitted = [b"u-%d" % i for i in range(150)]
    assert await send(cluster.bootstrap, topic, committed) == list(range(200))
    hw = len(committed)
    assert await high_watermark(leader, topic, 0) == hw

    # Only the leader answers while the followers are paused: the stream and the producer
    # bootstrap from it (a paused broker accepts connections and never answers).
    bootstrap = address(leader)
    name = "committed_only"
    for broker in followers:
        broker.pause()
    try:
        await send(bootstrap, topic, uncommitted[:100], acks=1)
        assert await log_end_offset(leader, topic, 0) == hw + 100
        assert await high_watermark(leader, topic, 0) == hw, "the HW waits for the followers"
        start = partial(
            start_memory_stream,
            spark,
            name,
            source_options(bootstrap, topic, startingOffsets="earliest"),
            tmp_path / "checkpoint",
            processing_time="200 milliseconds",
        )
        query = await blocking(start, QUERY_TIMEOUT_S, "the query to start")
        with stopping(query):
            await blocking(query.processAllAvailable, QUERY_TIMEOUT_S, "the committed records")
            assert_exactly(await emitted(spark, name), {0: committed})
            planned = planned_ends(query, topic, 0)
            assert planned and max(planned) == hw, f"planned past the HW {hw}: {planned}"
            # More uncommitted records while the stream keeps polling: still nothing past HW.
            await send(bootstrap, topic, uncommitted[100:], acks=1)
            await blocking(query.processAllAvailable, QUERY_TIMEOUT_S, "a poll while paused")
            assert_exactly(await emitted(spark, name), {0: committed})
            assert max(planned_ends(query, topic, 0)) == hw
            assert await high_watermark(leader, topic, 0) == hw, "premise: HW stuck throughout"
            async with zk_view(cluster) as zk:
                state = await zk.partition_state(topic, 0)
            assert state is not None and (state.leader_epoch, sorted(state.isr)) == (
                before.leader_epoch,
                [1, 2, 3],
            ), f"premise: no election or ISR change while paused ({state})"
            for broker in followers:
                broker.resume()

            async def all_committed() -> bool:
                return await high_watermark(leader, topic, 0) == hw + len(uncommitted)

            await eventually(all_committed, 30, "the HW to cover the acks=1 records")
            await blocking(query.processAllAvailable, QUERY_TIMEOUT_S, "the rest once committed")
            assert_exactly(await emitted(spark, name), {0: committed + uncommitted})
            assert query.exception() is None
    finally:
        for broker in followers:
            broker.resume()


# -- 2. leader failover mid-stream -----------------------------------------------------------


@pytest.mark.timeout(240)
async def test_stream_survives_leader_failover(
    cluster: Cluster, spark: Any, tmp_path: Path
) -> None:
    """acks=all records produced before, during and after the leader is killed (SIGKILL) while
    a stream runs: the stream's output holds every acked record exactly once."""
    topic = "failover-stream"
    old_leader = cluster.brokers[1]
    await create_topic(cluster, topic, [[1, 2, 3]], {"min.insync.replicas": "2"})
    async with zk_view(cluster) as zk:
        before = await wait_isr(cluster, zk, topic, 0, [1, 2, 3], leader=1)
    first = [b"a-%d" % i for i in range(200)]
    await send(cluster.bootstrap, topic, first)
    name = "failover_stream"
    start = partial(
        start_memory_stream,
        spark,
        name,
        source_options(cluster.bootstrap, topic, startingOffsets="earliest"),
        tmp_path / "checkpoint",
        processing_time="300 milliseconds",
    )
    query = await blocking(start, QUERY_TIMEOUT_S, "the query to start")
    acked: list[bytes] = list(first)
    try:
        with stopping(query):
            await blocking(query.processAllAvailable, QUERY_TIMEOUT_S, "the first records")
            assert len(await emitted(spark, name)) == len(first)

            async def produce_through_failover() -> None:
                async with Producer(cluster.bootstrap, acks="all", linger_ms=1) as producer:
                    for step in range(30):
                        group = [b"b-%d-%d" % (step, i) for i in range(10)]
                        futures = [await producer.send(topic, v, partition=0) for v in group]
                        for future in futures:
                            await future
                        acked.extend(group)

            async def acked_at_least(count: int) -> bool:
                return len(acked) >= count

            with trio.fail_after(120):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(produce_through_failover)
                    await eventually(lambda: acked_at_least(len(first) + 100), 60, "acks")
                    old_leader.kill()
            assert len(acked) == len(first) + 300
            async with zk_view(cluster) as zk:
                state = await zk.partition_state(topic, 0)
            assert state is not None and state.leader in (2, 3)
            assert state.leader_epoch > before.leader_epoch
            await blocking(query.processAllAvailable, QUERY_TIMEOUT_S, "every acked record")
            rows = await emitted(spark, name)
            assert query.exception() is None
        offsets = Counter(o for _, o, _ in rows)
        assert sorted(offsets) == list(range(len(rows))), "each offset once, no gap"
        values = Counter(v for _, _, v in rows)
        assert not [v for v, n in values.items() if n > 1], "a record emitted twice"
        assert set(values) == set(acked), f"lost {sorted(set(acked) - set(values))[:10]}"
    finally:
        old_leader.start()
        async with zk_view(cluster) as zk:
            await wait_isr(cluster, zk, topic, 0, [1, 2, 3], timeout_s=60)


# -- 3. restart from a checkpoint --------------------------------------------------------------


Rows = list[tuple[int, int, bytes]]


def run_available_now(
    spark: Any, options: dict[str, str], checkpoint: Path
) -> tuple[Rows, Exception | None]:
    """One availableNow run of the source with `checkpoint`, each micro-batch's rows collected
    (foreachBatch: unlike the memory sink, it may restart from a checkpoint). Returns the rows
    and the query's exception (None: it finished cleanly)."""
    rows: Rows = []

    def keep(batch: Any, batch_id: int) -> None:
        for r in batch.select("partition", "offset", "value").collect():
            rows.append((r["partition"], r["offset"], bytes(r["value"])))

    query = (
        spark.readStream.format("highwater")
        .options(**options)
        .load()
        .writeStream.foreachBatch(keep)
        .option("checkpointLocation", str(checkpoint))
        .trigger(availableNow=True)
        .start()
    )
    with stopping(query):
        try:
            finished = query.awaitTermination(QUERY_TIMEOUT_S)
        except Exception as exc:  # StreamingQueryException wrapping the source's error
            return rows, exc
    assert finished, f"the availableNow run did not finish in {QUERY_TIMEOUT_S}s"
    return rows, None


def run_cleanly(spark: Any, options: dict[str, str], checkpoint: Path) -> Rows:
    rows, error = run_available_now(spark, options, checkpoint)
    assert error is None, str(error)[:3000]
    return rows


@pytest.mark.timeout(180)
def test_restart_from_checkpoint_has_no_gap_and_no_duplicate(
    cluster: Cluster, spark: Any, tmp_path: Path
) -> None:
    """Two availableNow runs with one checkpoint, records produced in between: the first
    emits what was there at its start, the second exactly the rest."""
    topic = "restart-checkpoint"
    trio.run(create_topic, cluster, topic, [[1, 2, 3], [2, 3, 1]])
    first = {p: [b"p%d-first-%d" % (p, i) for i in range(150)] for p in range(2)}
    second = {p: [b"p%d-second-%d" % (p, i) for i in range(120)] for p in range(2)}
    for p in range(2):
        send_now(cluster.bootstrap, topic, first[p], partition=p)
    options = source_options(cluster.bootstrap, topic, startingOffsets="earliest")
    checkpoint = tmp_path / "checkpoint"
    run1 = run_cleanly(spark, options, checkpoint)
    for p in range(2):
        send_now(cluster.bootstrap, topic, second[p], partition=p)
    run2 = run_cleanly(spark, options, checkpoint)
    assert_exactly(run1, first)
    assert_exactly(run1 + run2, {p: first[p] + second[p] for p in range(2)})
    assert min(o for _, o, _ in run2) == 150, "the second run starts where the first ended"


@pytest.mark.timeout(240)
def test_group_id_for_lag_shows_the_query_s_lag(
    cluster: Cluster, spark: Any, tmp_path: Path
) -> None:
    """groupIdForLag: after an availableNow run in several micro-batches the group's committed
    offsets are the ends the query reached (lag 0); new records show as lag; the checkpoint,
    not the group, says where the next run starts."""
    topic, group = "lag-report", "lag-report-job"
    trio.run(create_topic, cluster, topic, [[1, 2, 3], [2, 3, 1]])
    for p in range(2):
        send_now(cluster.bootstrap, topic, [b"p%d-%d" % (p, i) for i in range(150)], partition=p)
    options = source_options(
        cluster.bootstrap,
        topic,
        startingOffsets="earliest",
        maxOffsetsPerTrigger="100",
        groupIdForLag=group,
    )
    checkpoint = tmp_path / "checkpoint"
    assert len(run_cleanly(spark, options, checkpoint)) == 300

    async def lag() -> dict[int, tuple[int | None, int | None]]:
        async with Admin(cluster.bootstrap) as admin:
            found = await admin.list_group_offsets(group)
        return {o.partition: (o.committed_offset, o.lag) for o in found if o.topic == topic}

    assert trio.run(lag) == {0: (150, 0), 1: (150, 0)}
    send_now(cluster.bootstrap, topic, [b"late"] * 40, partition=0)
    assert trio.run(lag) == {0: (150, 40), 1: (150, 0)}

    async def reset_group() -> None:  # the query never reads the group back
        async with Admin(cluster.bootstrap) as admin:
            await admin.alter_group_offsets(group, {(topic, 0): 0, (topic, 1): 0})

    trio.run(reset_group)
    rows = run_cleanly(spark, options, checkpoint)
    assert sorted((p, o) for p, o, _ in rows) == [(0, 150 + i) for i in range(40)]
    assert trio.run(lag) == {0: (190, 0), 1: (150, 0)}


# -- 4. maxOffsetsPerTrigger --------------------------------------------------------------------


@pytest.mark.timeout(180)
def test_max_offsets_per_trigger_bounds_every_batch(
    cluster: Cluster, spark: Any, tmp_path: Path
) -> None:
    """availableNow with maxOffsetsPerTrigger=120 over 700 records in three partitions of
    unequal backlog: no micro-batch reads more than 120, there are at least 6, and the output
    has every record once."""
    topic = "rate-limited"
    limit = 120
    trio.run(create_topic, cluster, topic, [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    expected = {p: [b"p%d-%d" % (p, i) for i in range(n)] for p, n in enumerate((400, 200, 100))}
    for p, values in expected.items():
        send_now(cluster.bootstrap, topic, values, partition=p)
    name = "rate_limited"
    query = start_memory_stream(
        spark,
        name,
        source_options(
            cluster.bootstrap, topic, startingOffsets="earliest", maxOffsetsPerTrigger=str(limit)
        ),
        tmp_path / "checkpoint",
    )
    with stopping(query):
        assert query.awaitTermination(QUERY_TIMEOUT_S), "availableNow run did not finish"
        progress = query.recentProgress
    sizes = [p["numInputRows"] for p in progress if p["numInputRows"] > 0]
    assert sum(sizes) == 700, sizes
    assert max(sizes) <= limit, f"a micro-batch read more than {limit}: {sizes}"
    assert len(sizes) >= math.ceil(700 / limit), sizes
    assert_exactly(memory_rows(spark, name), expected)


# -- 5. failOnDataLoss after retention -----------------------------------------------------------


@pytest.mark.timeout(240)
def test_fail_on_data_loss_after_retention(cluster: Cluster, spark: Any, tmp_path: Path) -> None:
    """A query's checkpoint points at offset 10; retention then deletes it (small segments,
    small retention.bytes). Restarted with failOnDataLoss=true the query fails naming the
    option; with false it goes on from the log start to the end, without failing."""
    topic = "retention-loss"
    config = {"segment.bytes": "1024", "retention.bytes": "3072"}
    trio.run(create_topic, cluster, topic, [[1, 2, 3]], config)
    values = [b"r-%04d-" % i + b"x" * 60 for i in range(400)]
    send_now(cluster.bootstrap, topic, values[:10])
    options = source_options(cluster.bootstrap, topic, startingOffsets="earliest")
    checkpoint = tmp_path / "checkpoint"
    assert_exactly(run_cleanly(spark, options, checkpoint), {0: values[:10]})

    # Small batches, so the log rolls many small segments and retention deletes the old ones.
    send_now(cluster.bootstrap, topic, values[10:], small_batches=True)

    async def past_checkpoint() -> int | None:
        (start,) = await offsets_now(cluster.bootstrap, topic, 1, EARLIEST)
        return start if start > 10 else None

    log_start = trio.run(eventually, past_checkpoint, 30, "retention past offset 10")
    (hw,) = trio.run(offsets_now, cluster.bootstrap, topic, 1, LATEST)
    assert hw == len(values)

    strict, error = run_available_now(spark, options, checkpoint)
    assert error is not None, "failOnDataLoss=true must fail the query"
    assert not strict, "nothing is emitted from a batch that lost records"
    assert "failOnDataLoss" in str(error), str(error)[:2000]

    lenient = {**options, "failOnDataLoss": "false"}
    rows = sorted(run_cleanly(spark, lenient, checkpoint))
    (log_start_after,) = trio.run(offsets_now, cluster.bootstrap, topic, 1, EARLIEST)
    offsets = [o for _, o, _ in rows]
    assert offsets, "the lenient run read nothing"
    first = offsets[0]
    assert log_start <= first <= log_start_after, (log_start, first, log_start_after)
    assert offsets == list(range(first, hw)), "from the log start to the end, each once"
    assert [v for _, _, v in rows] == values[first:hw]
    print(f"log start {log_start} past the checkpoint (10); the lenient run read {first}..{hw}")


# -- 6. batch reads with explicit offsets ------------------------------------------------------


@pytest.mark.timeout(120)
def test_batch_read_with_starting_and_ending_offsets(cluster: Cluster, spark: Any) -> None:
    """startingOffsets/endingOffsets JSON (with -2 earliest and -1 latest) read exactly the
    ranges asked for; minPartitions splits the tasks without changing the rows."""
    topic = "batch-ranges"
    trio.run(create_topic, cluster, topic, [[1, 2, 3], [2, 3, 1], [3, 1, 2]])
    produced = {p: [b"p%d-%d" % (p, i) for i in range(30)] for p in range(3)}
    for p, values in produced.items():
        send_now(cluster.bootstrap, topic, values, partition=p)
    starting = {topic: {"0": 5, "1": EARLIEST, "2": 10}}
    ending = {topic: {"0": 20, "1": 7, "2": LATEST}}
    wanted = {(0, o) for o in range(5, 20)} | {(1, o) for o in range(7)}
    wanted |= {(2, o) for o in range(10, 30)}
    for min_partitions in (None, 8):
        reader = (
            spark.read.format("highwater")
            .option("bootstrap.servers", cluster.bootstrap)
            .option("subscribe", topic)
            .option("startingOffsets", json.dumps(starting))
            .option("endingOffsets", json.dumps(ending))
        )
        if min_partitions is not None:
            reader = reader.option("minPartitions", str(min_partitions))
        df = reader.load()
        rows = df.select("topic", "partition", "offset", "value").collect()
        keys = [(r["partition"], r["offset"]) for r in rows]
        assert len(keys) == len(set(keys)), "a record read twice"
        assert set(keys) == wanted, sorted(set(keys) ^ wanted)[:10]
        assert all(r["topic"] == topic for r in rows)
        assert all(bytes(r["value"]) == produced[r["partition"]][r["offset"]] for r in rows)
        if min_partitions is not None:
            assert df.rdd.getNumPartitions() >= min_partitions


async def send_stamped(
    bootstrap: str, topic: str, partition: int, stamped: dict[int, bytes]
) -> None:
    """Produce {timestamp_ms: value} to one partition (CreateTime), acks=all."""
    async with Producer(bootstrap, linger_ms=1) as producer:
        futures = [
            await producer.send(topic, value, partition=partition, timestamp_ms=ts)
            for ts, value in stamped.items()
        ]
        for future in futures:
            await future


@pytest.mark.timeout(120)
def test_starting_timestamp(cluster: Cluster, spark: Any) -> None:
    """startingTimestamp starts each partition at its first record stamped at or after it. A
    partition with no such record fails the read, naming the strategy option (Spark's default
    "error"); with startingOffsetsByTimestampStrategy=latest it starts at its end instead."""
    topic = "from-timestamp"
    trio.run(create_topic, cluster, topic, [[1, 2, 3], [2, 3, 1]])
    # Recent timestamps: retention (checked every 200 ms here) would delete records from long ago.
    since_ms = time.time_ns() // 1_000_000 - 60_000
    first = {since_ms - 50_000 + i: b"early-%d" % i for i in range(5)}  # offsets 0-4
    later = {since_ms + i: b"late-%d" % i for i in range(3)}  # offsets 5-7, the first at since
    trio.run(send_stamped, cluster.bootstrap, topic, 0, first | later)
    trio.run(send_stamped, cluster.bootstrap, topic, 1, {since_ms - 1: b"before"})

    def read(timestamp_ms: int = since_ms, **more: str) -> list[tuple[int, int, bytes]]:
        rows = (
            spark.read.format("highwater")
            .options(**source_options(cluster.bootstrap, topic, **more))
            .option("startingTimestamp", str(timestamp_ms))
            .load()
            .collect()
        )
        return sorted((r["partition"], r["offset"], bytes(r["value"])) for r in rows)

    error = _error_of(read)
    assert "startingOffsetsByTimestampStrategy" in error and f"{topic}-1" in error, error[:2000]
    assert read(startingOffsetsByTimestampStrategy="latest") == [
        (0, 5, b"late-0"),
        (0, 6, b"late-1"),
        (0, 7, b"late-2"),
    ]
    # After every record: each partition starts at its end, and the read is empty (Spark
    # plans a stand-in partition for a read with none, which must read nothing).
    assert read(since_ms + 10, startingOffsetsByTimestampStrategy="latest") == []


# -- 8. every compression codec ------------------------------------------------------------------


async def send_compressed(
    bootstrap: str, topic: str, codec: Compression, values: list[bytes]
) -> None:
    """One batch of `values` in partition 0, compressed with `codec`."""
    async with Producer(bootstrap, linger_ms=50, batch_size=1 << 20, compression=codec) as producer:
        futures = [await producer.send(topic, value, partition=0) for value in values]
        for future in futures:
            await future


@pytest.mark.timeout(120)
def test_batch_read_of_every_compression_codec(cluster: Cluster, spark: Any) -> None:
    """A batch compressed with each codec (the producer's bytes, stored as they came) reads
    back through the source with every record and value."""
    topic = "spark-codecs"
    trio.run(create_topic, cluster, topic, [[1, 2, 3]])
    expected: list[bytes] = []
    for codec in Compression:
        batch = [b"%s-%d " % (codec.name.encode(), i) + b"z" * (i % 50) for i in range(100)]
        trio.run(send_compressed, cluster.bootstrap, topic, codec, batch)
        expected += batch
    stored = {h.compression for h in cluster.brokers[1].batch_headers(topic, 0)}
    assert stored == {int(c) for c in Compression}
    assert batch_read_values(cluster, spark, topic) == list(enumerate(expected))


@pytest.mark.timeout(120)
def test_batch_read_of_records_larger_than_the_first_fetch(cluster: Cluster, spark: Any) -> None:
    """A task's first Fetch asks for FIRST_FETCH_BYTES; a batch larger than that still reads
    back whole (the fetch grows), with the small records around it."""
    topic = "spark-large-records"
    trio.run(create_topic, cluster, topic, [[1, 2, 3]])
    large = FIRST_FETCH_BYTES + 200_000  # below the broker's message.max.bytes
    values = [b"L" * large, b"a", b"M" * large, b"b"]
    for value in values:  # one batch each
        send_now(cluster.bootstrap, topic, [value], partition=0)
    assert batch_read_values(cluster, spark, topic) == list(enumerate(values))


def batch_read_values(cluster: Cluster, spark: Any, topic: str) -> list[tuple[int, bytes]]:
    """(offset, value) of every record of the topic, by a batch read through the source."""
    rows = (
        spark.read.format("highwater")
        .option("bootstrap.servers", cluster.bootstrap)
        .option("subscribe", topic)
        .load()
        .select("offset", "value")
        .collect()
    )
    return sorted((r["offset"], bytes(r["value"])) for r in rows)


# -- 9. option errors ---------------------------------------------------------------------------


def _error_of(action: Any) -> str:
    with pytest.raises(Exception) as caught:  # Spark wraps ours: checked by its text
        action()
    return str(caught.value)


@pytest.mark.timeout(120)
def test_bad_options_fail_naming_the_option(cluster: Cluster, spark: Any, tmp_path: Path) -> None:
    """An unknown option, both subscribe and assign, and endingOffsets on a stream each fail
    with a message naming the option."""

    def batch(**options: str) -> Any:
        return spark.read.format("highwater").options(
            **{"bootstrap.servers": cluster.bootstrap, **options}
        )

    # Spark hands a source its options with lower-cased keys: the message can only name it so.
    unknown = _error_of(lambda: batch(subscribe="t", maxRatePerPartition="5").load().collect())
    assert "unknown option 'maxrateperpartition'" in unknown.lower(), unknown[:2000]

    both = _error_of(lambda: batch(subscribe="t", assign=json.dumps({"t": [0]})).load().collect())
    assert "subscribe" in both and "assign" in both, both[:2000]
    assert "exactly one" in both, both[:2000]

    def stream_with_ending_offsets() -> None:
        query = start_memory_stream(
            spark,
            "ending_offsets_stream",
            source_options(cluster.bootstrap, "t", endingOffsets="latest"),
            tmp_path / "checkpoint",
        )
        with stopping(query):
            query.awaitTermination(QUERY_TIMEOUT_S)

    ending = _error_of(stream_with_ending_offsets)
    assert "endingOffsets" in ending, ending[:2000]
