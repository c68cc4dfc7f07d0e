"""Spark's own Kafka source and sink (`format("kafka")`, spark-sql-kafka-0-10 from Maven Central
by `make kafka-jars`) against Highwater's Kafka listener: a batch read whose count and
checksum equal what was produced, a Trigger.AvailableNow stream, and a write read back by
Highwater's own consumer (docs/kafka.md)."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from client.cli.zookeeper_server import ZooKeeperServer
from tests.benchmarks.kafka.jars import spark_kafka_jars
from tests.integration.cluster_harness import Cluster
from tests.integration.kafka_wire_cluster import (
    KCAT,
    cli,
    create_topic,
    kafka_bootstrap,
    kafka_cluster,
)
from tests.integration.replication_checks import whole_cluster_around
from tests.integration.spark_session import spark

__all__ = ["spark"]  # the session fixture, imported for this module's tests

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

RECORDS_PER_PARTITION = 500


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    if spark_kafka_jars() is None:
        pytest.fail("Spark's Kafka connector is not fetched (make kafka-jars)")  # never skip
    with kafka_cluster(zookeeper.port, tmp_path_factory.mktemp("kafka-spark")) as cluster:
        create_topic(cluster, "sk", partitions=3)
        for p in range(3):
            values = range(p * RECORDS_PER_PARTITION, (p + 1) * RECORDS_PER_PARTITION)
            lines = "".join(f"{v}\n" for v in values).encode()
            cli(cluster, "produce", "sk", "-p", str(p), stdin=lines)
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


def _kafka(reader: Any, cluster: Cluster) -> Any:
    return reader.format("kafka").option("kafka.bootstrap.servers", kafka_bootstrap(cluster))


TOTAL = 3 * RECORDS_PER_PARTITION
CHECKSUM = TOTAL * (TOTAL - 1) // 2  # the values are 0 .. TOTAL-1


def test_a_batch_read_counts_and_sums_what_was_produced(cluster: Cluster, spark: Any) -> None:
    from pyspark.sql import functions as F

    df = (
        _kafka(spark.read, cluster)
        .option("subscribe", "sk")
        .option("startingOffsets", "earliest")
        .option("endingOffsets", "latest")
        .load()
    )
    row = df.agg(
        F.count("*").alias("n"), F.sum(F.col("value").cast("string").cast("long")).alias("sum")
    ).collect()[0]
    assert (row["n"], row["sum"]) == (TOTAL, CHECKSUM)
    offsets = df.groupBy("partition").agg(F.min("offset"), F.max("offset")).collect()
    assert sorted(tuple(r) for r in offsets) == [
        (p, 0, RECORDS_PER_PARTITION - 1) for p in range(3)
    ]


def test_an_available_now_stream_reads_everything_once(
    cluster: Cluster, spark: Any, tmp_path: Path
) -> None:
    stream = (
        _kafka(spark.readStream, cluster)
        .option("subscribe", "sk")
        .option("startingOffsets", "earliest")
        .load()
    )
    query = (
        stream.selectExpr("partition", "offset")
        .writeStream.format("memory")
        .queryName("sk_available_now")
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    try:
        assert query.awaitTermination(240), "the availableNow run did not finish"
    finally:
        query.stop()
    rows = spark.table("sk_available_now").collect()
    assert sorted((r["partition"], r["offset"]) for r in rows) == [
        (p, o) for p in range(3) for o in range(RECORDS_PER_PARTITION)
    ]


def test_a_write_through_format_kafka_is_read_by_highwater(cluster: Cluster, spark: Any) -> None:
    create_topic(cluster, "sk-out", partitions=1)
    rows = [(f"k{i}", f"written by spark {i}") for i in range(50)]
    (
        spark.createDataFrame(rows, ["key", "value"])
        .write.format("kafka")
        .option("kafka.bootstrap.servers", kafka_bootstrap(cluster))
        .option("topic", "sk-out")
        .save()
    )
    deadline = time.monotonic() + 60
    read: list[dict[str, Any]] = []
    while len(read) < 50 and time.monotonic() < deadline:
        out = cli(cluster, "consume", "sk-out", "--from-beginning", "-e", "--json").stdout
        read = [json.loads(line) for line in out.decode().splitlines()]
    assert sorted((r["key"], r["value"]) for r in read) == sorted(rows)


def test_highwaters_own_source_reads_records_kcat_produced(cluster: Cluster, spark: Any) -> None:
    assert KCAT is not None
    create_topic(cluster, "sk-kcat", partitions=1)
    lines = b"".join(b"key%d:value %d\n" % (i, i) for i in range(20))
    subprocess.run(
        [KCAT, "-b", kafka_bootstrap(cluster), "-P", "-t", "sk-kcat", "-K:", "-H", "src=kcat"],
        input=lines,
        check=True,
        timeout=60,
    )
    kafka_view = json_lines(
        subprocess.run(
            [KCAT, "-b", kafka_bootstrap(cluster), "-C", "-t", "sk-kcat", "-o", "beginning",
             "-e", "-J"],
            capture_output=True,
            check=True,
            timeout=60,
        ).stdout
    )  # fmt: skip
    rows = (
        spark.read.format("highwater")
        .option("bootstrap.servers", cluster.bootstrap)
        .option("subscribe", "sk-kcat")
        .option("includeHeaders", "true")
        .load()
        .orderBy("offset")
        .collect()
    )
    ours = [
        (
            r["offset"],
            bytes(r["key"]).decode(),
            bytes(r["value"]).decode(),
            [(h["key"], bytes(h["value"]).decode()) for h in r["headers"]],
            int(r["timestamp"].timestamp() * 1000),
        )
        for r in rows
    ]
    theirs = [
        (r["offset"], r["key"], r["payload"], [tuple(r["headers"])], r["ts"]) for r in kafka_view
    ]
    assert ours == theirs
    assert [o[2] for o in ours] == [f"value {i}" for i in range(20)]


def json_lines(out: bytes) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.decode().splitlines()]
