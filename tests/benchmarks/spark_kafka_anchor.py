"""Spark anchor benchmark: format("highwater") against Spark's own Kafka source reading Apache
Kafka, the same records, in one run (docs/spark.md, "Against Spark's Kafka source").

Run: `make bench-spark-kafka` (or `.venv/bin/python -m tests.benchmarks.spark_kafka_anchor`);
needs the jars `make kafka-jars` fetches. One SparkSession (`local[2]`, with Spark's Kafka
connector on spark.jars) and one system at a time:
- Highwater (`highwater dev up`, 3 brokers): N 100-byte records (default 1M) into a topic of
  `--partitions` partitions, RF=1 (the read path is the subject, not replication). Timed,
  availableNow into Spark's `noop` sink: format("highwater"), Spark's format("kafka") through
  Highwater's Kafka listener (base-port + 100), and the no-I/O Python source of `make
  bench-spark` (tests/benchmarks/spark_ceiling.py). The rows are kept in a Parquet file, then
  the cluster stops.
- Apache Kafka 3.9.2 (tests/benchmarks/kafka/cluster.py, 3 brokers): the same keys and values
  written into a topic of as many partitions, RF=1, each record into the partition it had, by
  Spark's format("kafka"); then format("kafka") timed, and the no-I/O source again (the
  machine's weather during this phase).
Each query kind runs once untimed, then `--runs` times (default 3), interleaved; the median
counts. Each query's rows are counted (numInputRows) against N.
"""

from __future__ import annotations

import argparse
import functools
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.benchmarks.replication import highwater, local_cluster
from tests.benchmarks.spark import RECORD_BYTES, _compile_bytecode
from tests.benchmarks.spark_anchor_report import Measure, render

TOPIC = "bench-spark"  # the no-I/O source names its rows' topic so
LABELS = {
    "kafka": 'format("kafka") <- Apache Kafka 3.9.2',
    "listener": 'format("kafka") <- Highwater\'s Kafka listener',
    "highwater": 'format("highwater") <- Highwater',
    "no-io": "no-I/O Python source (Highwater phase)",
    "no-io-kafka": "no-I/O Python source (Kafka phase)",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=2)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--base-port", type=int, default=19592)
    parser.add_argument("--zk-port", type=int, default=32581)
    args = parser.parse_args()
    from tests.benchmarks.kafka.jars import spark_kafka_jars

    jars = spark_kafka_jars()
    if jars is None:
        raise SystemExit("Spark's Kafka connector is not fetched: run `make kafka-jars`")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    _compile_bytecode()
    from pyspark.sql import SparkSession

    from client.spark import register
    from tests.benchmarks.spark_ceiling import NoIoSource

    spark = (
        SparkSession.builder.master("local[2]")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.jars", jars)
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    register(spark)
    spark.dataSource.register(NoIoSource)
    measures = {key: Measure(label) for key, label in LABELS.items()}
    try:
        with tempfile.TemporaryDirectory(prefix="hw-bench-anchor-") as root:
            bench = _Bench(spark, Path(root), args.records, measures)
            _highwater_phase(bench, args)
            _kafka_phase(bench, args)
    finally:
        spark.stop()
    print(
        f"{args.records} records of {RECORD_BYTES} bytes, {args.partitions} partitions, RF=1, "
        f"local[2], availableNow -> noop, medians of {args.runs}; one system at a time"
    )
    print(
        render(measures, args.records, anchor="kafka", ours="highwater", ceiling="no-io"),
        flush=True,
    )
    print(f"machine load after: {_uptime()}")


class _Bench:
    """The session, a scratch directory, and the timed availableNow queries."""

    def __init__(self, spark: Any, root: Path, records: int, measures: dict[str, Measure]):
        self.spark = spark
        self.root = root
        self.records = records
        self.measures = measures
        self.parquet = str(root / "records.parquet")
        self._queries = 0

    def available_now(self, stream: Any, key: str | None) -> None:
        """Run `stream` into noop once; check it read every record; record its times under
        `key` (None: untimed)."""
        self._queries += 1
        started = time.perf_counter()
        query = (
            stream.writeStream.format("noop")
            .option("checkpointLocation", str(self.root / f"checkpoint-{self._queries}"))
            .trigger(availableNow=True)
            .start()
        )
        query.awaitTermination()
        wall_s = time.perf_counter() - started
        read = sum(p["numInputRows"] for p in query.recentProgress)
        assert read == self.records, f"{key}: read {read} rows, expected {self.records}"
        if key is not None:
            self.measures[key].wall_s.append(wall_s)
            self.measures[key].trigger_s.append(
                sum(p["durationMs"]["triggerExecution"] for p in query.recentProgress) / 1000
            )

    def kafka(self, bootstrap: str, key: str | None) -> None:
        stream = (
            self.spark.readStream.format("kafka")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .load()
        )
        self.available_now(stream, key)

    def highwater(self, bootstrap: str, key: str | None) -> None:
        stream = (
            self.spark.readStream.format("highwater")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .option("startingOffsets", "earliest")
            .load()
        )
        self.available_now(stream, key)

    def no_io(self, key: str | None) -> None:
        stream = self.spark.readStream.format("highwater-no-io").option("rows", self.records)
        self.available_now(stream.load(), key)

    def rounds(self, runs: int, queries: list[tuple[str, Callable[[str | None], None]]]) -> None:
        """Each query once untimed (the first streaming query of a source also pays for loading
        its code), then `runs` rounds, each starting with the next query in turn, so that none
        is always first or always after the same one."""
        for _, query in queries:
            query(None)
        for index in range(runs):
            shift = index % len(queries)
            for key, query in queries[shift:] + queries[:shift]:
                query(key)
                print(
                    f"  {self.measures[key].label}: {self.measures[key].wall_s[-1]:.2f} s",
                    file=sys.stderr,
                    flush=True,
                )


def _highwater_phase(bench: _Bench, args: argparse.Namespace) -> None:
    from client.cli.local_cluster import KAFKA_PORT_OFFSET

    with local_cluster(args.base_port, args.zk_port) as (bootstrap, _):
        listener = f"127.0.0.1:{args.base_port + KAFKA_PORT_OFFSET}"
        highwater(
            "topics", "create", TOPIC, "--partitions", str(args.partitions),
            "--replication-factor", "1", bootstrap=bootstrap,
        )  # fmt: skip
        highwater(
            "perf", "produce", "--topic", TOPIC,
            "--num-records", str(args.records), "--record-size", str(RECORD_BYTES),
            bootstrap=bootstrap,
        )  # fmt: skip
        (
            bench.spark.read.format("highwater")
            .option("bootstrap.servers", bootstrap)
            .option("subscribe", TOPIC)
            .load()
            .write.parquet(bench.parquet)
        )
        print(f"Highwater: {args.records} records produced; load {_uptime()}", file=sys.stderr)
        bench.rounds(
            args.runs,
            [
                ("highwater", functools.partial(bench.highwater, bootstrap)),
                ("listener", functools.partial(bench.kafka, listener)),
                ("no-io", bench.no_io),
            ],
        )


def _kafka_phase(bench: _Bench, args: argparse.Namespace) -> None:
    from confluent_kafka.admin import AdminClient, NewTopic

    from tests.benchmarks.kafka import cluster as kafka_cluster

    with kafka_cluster.running(bench.root / "kafka") as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap, "logger": kafka_cluster.QUIET})
        for future in admin.create_topics(
            [NewTopic(TOPIC, args.partitions, replication_factor=1)]
        ).values():
            future.result(30)
        (
            bench.spark.read.parquet(bench.parquet)
            .select("key", "value", "partition")
            .write.format("kafka")
            .option("kafka.bootstrap.servers", cluster.bootstrap)
            .option("topic", TOPIC)
            .save()
        )
        print(f"Kafka: {args.records} records written; load {_uptime()}", file=sys.stderr)
        bench.rounds(
            args.runs,
            [
                ("kafka", functools.partial(bench.kafka, cluster.bootstrap)),
                ("no-io-kafka", bench.no_io),
            ],
        )


def _uptime() -> str:
    done = subprocess.run(["uptime"], capture_output=True, text=True, check=False)
    return done.stdout.strip().split("load average:")[-1].strip()


if __name__ == "__main__":
    main()
