"""A pipeline to run: page views in, windowed counts per page out (docs/spark.md).

    python -m client.spark.pageviews produce --count 20000      # page views into `pageviews`
    python -m client.spark.pageviews run --available-now        # the Spark job
    highwater consume pageview-counts --from-beginning --exit-at-end

The job reads committed page views (JSON: page, user, ts in ms) from Highwater, counts views
per page in 1-minute event-time windows, and writes every updated count both to Parquet (one
row per update, with the micro-batch id) and to the output topic, keyed by
`<page>@<window start>`: a changelog, where the last record of a key holds its current count.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
from collections import Counter
from collections.abc import Sequence
from typing import Any, Final

from client.blocking import BlockingProducer

__all__ = ["expected_counts", "generate_views", "produce_views", "start_query"]

WINDOW_MS: Final = 60_000
PAGES: Final = ("/", "/pricing", "/docs", "/blog", "/signup")


def generate_views(
    count: int, seed: int = 1, start_ms: int = 1_767_225_600_000
) -> list[dict[str, Any]]:
    """`count` page views over about five minutes of event time, in order (a seeded RNG, so a
    test can recompute them)."""
    rng = random.Random(seed)
    views = []
    ts = start_ms
    for _ in range(count):
        ts += rng.randrange(0, max(1, 300_000 * 2 // max(count, 1)) + 1)
        views.append({"page": rng.choice(PAGES), "user": f"u{rng.randrange(1000)}", "ts": ts})
    return views


def expected_counts(views: Sequence[dict[str, Any]]) -> dict[str, int]:
    """The final count per output key `<page>@<window start ms>`."""
    return dict(Counter(f"{v['page']}@{v['ts'] // WINDOW_MS * WINDOW_MS}" for v in views))


def produce_views(bootstrap: str, topic: str, views: Sequence[dict[str, Any]]) -> None:
    with BlockingProducer(bootstrap) as producer:
        for view in views:
            producer.send(topic, json.dumps(view).encode(), key=view["user"].encode())
        producer.flush()


def start_query(
    spark: Any,
    *,
    bootstrap: str,
    source_topic: str,
    output_topic: str,
    parquet_dir: str,
    checkpoint_dir: str,
    available_now: bool,
) -> Any:
    """Start the streaming job; returns Spark's StreamingQuery."""
    from pyspark.sql import functions as f

    from client.spark import register

    register(spark)
    views = (
        spark.readStream.format("highwater")
        .option("bootstrap.servers", bootstrap)
        .option("subscribe", source_topic)
        .option("startingOffsets", "earliest")
        .load()
        .select(
            f.from_json(f.col("value").cast("string"), "page string, user string, ts long").alias(
                "v"
            )
        )
        .select("v.page", (f.col("v.ts") / 1000).cast("timestamp").alias("event_time"))
    )
    counts = (
        views.withWatermark("event_time", "10 minutes")
        .groupBy(f.window("event_time", "1 minute"), "page")
        .count()
        .select(
            f.concat_ws(
                "@", "page", (f.unix_timestamp("window.start") * 1000).cast("string")
            ).alias("key"),
            "page",
            f.col("window.start").alias("window_start"),
            "count",
        )
    )

    def write_batch(batch: Any, batch_id: int) -> None:
        batch = batch.cache()
        batch.withColumn("batch_id", f.lit(batch_id)).write.mode("append").parquet(parquet_dir)
        (
            batch.select(
                f.col("key").cast("binary").alias("key"),
                f.to_json(f.struct("page", "window_start", "count")).cast("binary").alias("value"),
            )
            .write.format("highwater")
            .option("bootstrap.servers", bootstrap)
            .option("topic", output_topic)
            .mode("append")
            .save()
        )
        batch.unpersist()

    writer = (
        counts.writeStream.outputMode("update")
        .option("checkpointLocation", checkpoint_dir)
        .foreachBatch(write_batch)
    )
    writer = (
        writer.trigger(availableNow=True)
        if available_now
        else writer.trigger(processingTime="5 seconds")
    )
    return writer.start()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m client.spark.pageviews",
        description=__doc__,
        # The example commands print one per line, as written, not run into a paragraph.
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "-b", "--bootstrap-server", default=os.environ.get("HIGHWATER_BOOTSTRAP", "127.0.0.1:9092")
    )
    commands = parser.add_subparsers(dest="command", required=True)
    produce = commands.add_parser("produce", help="produce page views")
    produce.add_argument("--topic", default="pageviews")
    produce.add_argument("--count", type=int, default=20_000)
    produce.add_argument("--seed", type=int, default=1)
    run = commands.add_parser("run", help="run the Spark job")
    run.add_argument("--source-topic", default="pageviews")
    run.add_argument("--output-topic", default="pageview-counts")
    # Under .spark-output/ (git-ignored), not the directory it runs from.
    run.add_argument("--parquet-dir", default=".spark-output/pageview-counts.parquet")
    run.add_argument("--checkpoint-dir", default=".spark-output/pageviews-checkpoint")
    run.add_argument(
        "--available-now", action="store_true", help="process what is there, then stop"
    )
    args = parser.parse_args(argv)
    if args.command == "produce":
        produce_views(args.bootstrap_server, args.topic, generate_views(args.count, args.seed))
        print(f"produced {args.count} page views to {args.topic}")
        return
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    from pyspark.sql import SparkSession

    spark = (
        SparkSession.builder.master("local[2]")
        .appName("highwater-pageviews")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("WARN")
    query = start_query(
        spark,
        bootstrap=args.bootstrap_server,
        source_topic=args.source_topic,
        output_topic=args.output_topic,
        parquet_dir=os.path.abspath(args.parquet_dir),
        checkpoint_dir=os.path.abspath(args.checkpoint_dir),
        available_now=args.available_now,
    )
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    parquet_dir = os.path.abspath(args.parquet_dir)
    rows = spark.read.parquet(parquet_dir).count()
    print(f"done: {rows} count updates in {parquet_dir}, and in topic {args.output_topic}")
    print(f"checkpoint: {os.path.abspath(args.checkpoint_dir)}")
    spark.stop()


if __name__ == "__main__":
    main()
