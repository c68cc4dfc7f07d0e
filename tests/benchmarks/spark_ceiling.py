"""A Python streaming data source that does no I/O: the ceiling for any Python source here.

It emits `rows` rows in the Highwater source's schema (100-byte values, like the benchmark's
records), built from numpy buffers in each task, through the same Python Data Source API
path as `format("highwater")`: Spark's per-query source runner process, Python read tasks,
Arrow batches to the JVM. What it costs is what Spark charges any Python source; the Highwater
source's rate over this one is what is left to gain in the source itself.

It imports only light modules (the schema and Arrow types): Spark's runner process imports
this module on every query, and importing the Highwater reader (trio, the protocol) there
cost about 0.2 s a query, which made the ceiling look lower than it is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
from pyspark.sql.datasource import DataSource, DataSourceStreamReader, InputPartition
from pyspark.sql.streaming.datasource import SupportsTriggerAvailableNow
from pyspark.sql.types import StructType

from client.spark.rows import SOURCE_NAMES, TIMESTAMP_US
from client.spark.schema import source_schema

__all__ = ["NoIoSource"]

VALUE_BYTES = 100
TASKS = 2  # as the benchmark topic's 2 partitions
ROWS_PER_BATCH = 65_536  # as client.spark.partition_reader's (not imported: see above)


@dataclass(frozen=True)
class _Range(InputPartition):
    partition: int
    start: int
    end: int

    def __post_init__(self) -> None:
        object.__setattr__(self, "value", None)


def _batch(partition: int, start: int, end: int) -> pa.RecordBatch:
    count = end - start
    ends = (np.arange(count + 1, dtype=np.int64) * VALUE_BYTES).astype(np.int32)
    topic = b"bench-spark"
    topic_ends = (np.arange(count + 1, dtype=np.int64) * len(topic)).astype(np.int32)
    arrays = [
        pa.nulls(count, pa.binary()),
        pa.Array.from_buffers(
            pa.binary(), count, [None, pa.py_buffer(ends), pa.py_buffer(bytes(VALUE_BYTES * count))]
        ),
        pa.Array.from_buffers(
            pa.string(), count, [None, pa.py_buffer(topic_ends), pa.py_buffer(topic * count)]
        ),
        pa.array(np.full(count, partition, dtype=np.int32)),
        pa.array(np.arange(start, end, dtype=np.int64)),
        pa.array(np.full(count, 1_700_000_000_000_000, dtype=np.int64), TIMESTAMP_US),
        pa.array(np.zeros(count, dtype=np.int32)),
    ]
    return pa.RecordBatch.from_arrays(arrays, names=list(SOURCE_NAMES))


class _Reader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, rows: int) -> None:
        self.rows = rows

    def initialOffset(self) -> dict[str, Any]:
        return {"offset": 0}

    def prepareForTriggerAvailableNow(self) -> None:
        pass

    def latestOffset(
        self, start: dict[str, Any] | None = None, limit: Any = None
    ) -> dict[str, Any]:
        return {"offset": self.rows}

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> Sequence[InputPartition]:
        first, last = start["offset"], end["offset"]
        cuts = [first + (last - first) * i // TASKS for i in range(TASKS + 1)]
        return [_Range(i, cuts[i], cuts[i + 1]) for i in range(TASKS) if cuts[i] < cuts[i + 1]]

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        assert isinstance(partition, _Range)
        for start in range(partition.start, partition.end, ROWS_PER_BATCH):
            end = min(partition.end, start + ROWS_PER_BATCH)
            yield _batch(partition.partition, start, end)

    def commit(self, end: dict[str, Any]) -> None:
        pass


class NoIoSource(DataSource):
    """`format("highwater-no-io")` with option `rows`."""

    @classmethod
    def name(cls) -> str:
        return "highwater-no-io"

    def schema(self) -> str:
        return source_schema(False)

    def streamReader(self, schema: StructType) -> DataSourceStreamReader:
        return _Reader(int(self.options.get("rows", "0")))
