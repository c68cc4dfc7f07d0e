"""`df.write` / `df.writeStream` `.format("highwater")` against real brokers, a real ZooKeeper
and a real local SparkSession; what landed is read back with the CLI (`highwater consume`), not
with the Spark source, so the two are checked independently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer
from protocol.compression import Compression
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    create_topic,
    running_cluster,
    whole_cluster_around,
)
from tests.integration.spark_session import spark, stopping

__all__ = ["spark"]  # the session fixture, imported for this module's tests

pytestmark = [pytest.mark.integration]

CLI_TIMEOUT_S = 60
QUERY_TIMEOUT_S = 90
REPLICAS = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("spark-sink")
    with running_cluster(zookeeper.port, directory, FAST_REPLICATION) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


def consume_all(cluster: Cluster, topic: str, *extra: str) -> list[dict[str, Any]]:
    """Every record of `topic`, as `highwater consume --from-beginning -e --json` prints it."""
    command = [sys.executable, "-m", "client.cli", "consume", topic, "--from-beginning"]
    command += ["--exit-at-end", "--json", "-b", cluster.bootstrap, *extra]
    done = subprocess.run(
        command,
        capture_output=True,
        timeout=CLI_TIMEOUT_S,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    return [json.loads(line) for line in done.stdout.decode().splitlines()]


def _sink_error(action: Any) -> str:
    with pytest.raises(Exception) as caught:  # Spark wraps ours: checked by its text
        action()
    return str(caught.value)


@pytest.mark.timeout(180)
def test_batch_write_lands_every_row_for_the_cli(cluster: Cluster, spark: Any) -> None:
    """df.write with key (string), value (binary) and headers, the topic as an option: the CLI
    reads back each row once, with its key and headers."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        StringType,
        StructField,
        StructType,
    )

    topic = "sink-batch"
    trio.run(create_topic, cluster, topic, REPLICAS)
    header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
    schema = StructType(
        [
            StructField("key", StringType()),
            StructField("value", BinaryType()),
            StructField("headers", ArrayType(header)),
        ]
    )
    rows = [(f"k{i}", b"v%d" % i, [("n", str(i).encode()), ("src", b"spark")]) for i in range(300)]
    df = spark.createDataFrame(rows, schema).repartition(3)
    df.write.format("highwater").option("bootstrap.servers", cluster.bootstrap).option(
        "topic", topic
    ).mode("append").save()

    consumed = consume_all(cluster, topic)
    values = Counter(r["value"] for r in consumed)
    assert set(values) == {f"v{i}" for i in range(300)}
    assert max(values.values()) == 1, "a row written twice"
    for record in consumed:
        i = int(record["value"][1:])
        assert record["key"] == f"k{i}"
        assert record["headers"] == [
            {"key": "n", "value": str(i)},
            {"key": "src", "value": "spark"},
        ]
    assert {r["partition"] for r in consumed} == {0, 1, 2}, "keys spread over the partitions"


@pytest.mark.timeout(180)
def test_batch_write_routes_by_topic_and_partition_columns(cluster: Cluster, spark: Any) -> None:
    """No topic option: each row goes to its `topic` column's topic, `partition` column's
    partition; string values are sent as UTF-8."""
    topics = ("sink-routed-a", "sink-routed-b")
    for topic in topics:
        trio.run(create_topic, cluster, topic, REPLICAS)
    rows = [(topics[i % 2], i % 3, f"r{i}") for i in range(120)]
    df = spark.createDataFrame(rows, "topic string, partition int, value string")
    df.write.format("highwater").option("bootstrap.servers", cluster.bootstrap).mode(
        "append"
    ).save()

    for t, topic in enumerate(topics):
        for partition in range(3):
            consumed = consume_all(cluster, topic, "--partition", str(partition))
            got = Counter(r["value"] for r in consumed)
            want = {f"r{i}" for i in range(120) if i % 2 == t and i % 3 == partition}
            assert set(got) == want and max(got.values()) == 1, (topic, partition)


@pytest.mark.timeout(180)
def test_stream_write_from_parquet_lands_every_record(
    cluster: Cluster, spark: Any, tmp_path: Path
) -> None:
    """writeStream (availableNow, one parquet file per micro-batch) into a topic: every row
    lands once."""
    topic = "sink-stream"
    trio.run(create_topic, cluster, topic, REPLICAS)
    source = tmp_path / "input"
    spark.range(600).selectExpr(
        "cast(id % 7 as string) as key", "concat('s-', cast(id as string)) as value"
    ).repartition(3).write.parquet(str(source))
    stream = (
        spark.readStream.schema("key string, value string")
        .option("maxFilesPerTrigger", "1")
        .parquet(str(source))
    )
    query = (
        stream.writeStream.format("highwater")
        .option("bootstrap.servers", cluster.bootstrap)
        .option("topic", topic)
        .option("checkpointLocation", str(tmp_path / "checkpoint"))
        .trigger(availableNow=True)
        .start()
    )
    with stopping(query):
        assert query.awaitTermination(QUERY_TIMEOUT_S), "availableNow run did not finish"
        assert query.exception() is None
        batches = [p["numInputRows"] for p in query.recentProgress if p["numInputRows"] > 0]
    assert len(batches) >= 3 and sum(batches) == 600, batches

    consumed = consume_all(cluster, topic)
    values = Counter(r["value"] for r in consumed)
    assert set(values) == {f"s-{i}" for i in range(600)}
    assert max(values.values()) == 1, "a row written twice"
    assert all(r["key"] == str(int(r["value"][2:]) % 7) for r in consumed)


@pytest.mark.timeout(240)
def test_batch_write_compresses_with_every_codec(cluster: Cluster, spark: Any) -> None:
    """kafka.compression.type: each codec of protocol.compression, by Kafka's name; every batch
    the sink stored is compressed with it, and the CLI reads every row back."""
    for codec in Compression:
        topic = f"sink-codec-{codec.name.lower()}"
        trio.run(create_topic, cluster, topic, [[1, 2, 3]])
        rows = [(f"{codec.name}-{i} " + "compressible " * (i % 9),) for i in range(400)]
        spark.createDataFrame(rows, "value string").coalesce(1).write.format("highwater").option(
            "bootstrap.servers", cluster.bootstrap
        ).option("topic", topic).option("kafka.compression.type", codec.name).mode("append").save()
        stored = cluster.brokers[1].batch_headers(topic, 0)
        assert stored and {h.compression for h in stored} == {int(codec)}, (codec, stored[:3])
        consumed = consume_all(cluster, topic)
        assert sorted(r["value"] for r in consumed) == sorted(v for (v,) in rows), codec


@pytest.mark.timeout(120)
def test_bad_sink_schema_fails_clearly(cluster: Cluster, spark: Any) -> None:
    """No `value` column, or no topic at all: the write fails, saying what is missing."""

    def write(df: Any, **options: str) -> None:
        df.write.format("highwater").options(
            **{"bootstrap.servers": cluster.bootstrap, **options}
        ).mode("append").save()

    no_value = spark.createDataFrame([("k", "v")], "key string, payload string")
    error = _sink_error(lambda: write(no_value, topic="sink-never"))
    assert "needs a 'value' column" in error, error[:2000]

    no_topic = spark.createDataFrame([("v",)], "value string")
    error = _sink_error(lambda: write(no_topic))
    assert "give a 'topic' column or the 'topic' option" in error, error[:2000]

    wrong_type = spark.createDataFrame([(1,)], "value int")
    error = _sink_error(lambda: write(wrong_type, topic="sink-never"))
    assert "column 'value' must be binary or string" in error, error[:2000]
