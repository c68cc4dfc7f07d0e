"""Highwater for PySpark: `format("highwater")` for reads and writes, batch and streaming.

    from client.spark import register
    register(spark)
    df = (spark.readStream.format("highwater")
          .option("bootstrap.servers", "localhost:9092").option("subscribe", "events").load())

Needs the `spark` extra (pyspark, pyarrow). See docs/spark.md. The option and offset modules
are pure and import without it.
"""

from __future__ import annotations

from typing import Any

from client.spark.options import OptionError

__all__ = ["OptionError", "register"]


def register(spark: Any) -> None:
    """Make `format("highwater")` known to this SparkSession."""
    from client.spark.source import HighwaterDataSource

    spark.dataSource.register(HighwaterDataSource)
