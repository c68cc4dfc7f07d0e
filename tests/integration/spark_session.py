"""One local SparkSession for the Spark integration tests, with `format("highwater")` registered,
and the waits those tests drive queries with.

A test module imports the fixture (`from tests.integration.spark_session import spark`) before
anything that needs pyspark: without pyspark (the `spark` extra) the module is skipped on a
developer machine and fails in CI, as the `zookeeper` fixture does without ZooKeeper.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import pytest
import trio

from tests.benchmarks.kafka.jars import spark_kafka_jars

__all__ = [
    "blocking",
    "memory_rows",
    "require_pyspark",
    "spark",
    "start_memory_stream",
    "stopping",
]

T = TypeVar("T")


def require_pyspark() -> None:
    """Skip the importing module if pyspark (or pyarrow) is missing; in CI that is a failure."""
    try:
        import pyarrow  # noqa: F401
        import pyspark  # noqa: F401
    except ImportError as exc:
        missing = f"the Spark tests need the 'spark' extra (pip install -e '.[spark]'): {exc}"
    else:
        return
    # Outside the except block, so the report is one line rather than a chained traceback.
    if os.environ.get("CI"):
        pytest.fail(f"CI must have pyspark installed: {missing}", pytrace=False)
    pytest.skip(missing, allow_module_level=True)


require_pyspark()


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """`local[2]`, no UI, 2 shuffle partitions, quiet logs. getOrCreate: the modules that each
    import this fixture share one session."""
    from pyspark.sql import SparkSession

    from client.spark import register

    # Spark's Python workers must run this interpreter (the venv with the project installed);
    # read when the session's JVM starts, so set before the builder runs.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("highwater-integration-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
    )
    kafka_jars = spark_kafka_jars()  # Spark's own format("kafka"), where make kafka-jars ran
    if kafka_jars:
        builder = builder.config("spark.jars", kafka_jars)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    register(session)
    try:
        yield session
    finally:
        for query in session.streams.active:
            query.stop()
        session.stop()


async def blocking(call: Callable[[], T], timeout_s: float, what: str) -> T:
    """A blocking Spark call from an async test, in a thread, with a deadline. On timeout the
    thread is abandoned (stopping its query, as `stopping` does, ends it)."""
    with trio.move_on_after(timeout_s):
        return await trio.to_thread.run_sync(call, abandon_on_cancel=True)
    raise AssertionError(f"timed out after {timeout_s}s waiting for {what}")


def start_memory_stream(
    spark: Any,
    name: str,
    options: Mapping[str, str],
    checkpoint: Path,
    *,
    processing_time: str | None = None,
) -> Any:
    """`readStream.format("highwater")` into the memory sink table `name` (append mode):
    with `processing_time` a query that keeps running, else one availableNow run."""
    stream = spark.readStream.format("highwater").options(**options).load()
    writer = (
        stream.writeStream.format("memory")
        .queryName(name)
        .outputMode("append")
        .option("checkpointLocation", str(checkpoint))
    )
    if processing_time is None:
        writer = writer.trigger(availableNow=True)
    else:
        writer = writer.trigger(processingTime=processing_time)
    return writer.start()


def memory_rows(spark: Any, name: str) -> list[tuple[int, int, bytes]]:
    """(partition, offset, value) of every row in the memory sink table `name`."""
    rows = spark.table(name).select("partition", "offset", "value").collect()
    return [(r["partition"], r["offset"], bytes(r["value"])) for r in rows]


@contextmanager
def stopping(query: Any) -> Iterator[Any]:
    """Stop the streaming query on the way out, whatever happened."""
    try:
        yield query
    finally:
        query.stop()
