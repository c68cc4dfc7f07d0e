"""Records to Arrow and back: the Spark source's rows and the sink's input columns.

The source's schema is Spark's Kafka source schema; columns.ColumnBuilder fills it. Rows leave
the reader as Arrow record batches (Spark takes them without a per-row Python conversion).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa

from client.spark.schema import SOURCE_NAMES, source_schema

__all__ = [
    "HEADER_TYPE",
    "SOURCE_NAMES",
    "TIMESTAMP_MS",
    "TIMESTAMP_US",
    "SinkRow",
    "sink_rows",
    "source_schema",
]

HEADER_TYPE: Final = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
TIMESTAMP_MS: Final = pa.timestamp("ms", tz="UTC")
TIMESTAMP_US: Final = pa.timestamp("us", tz="UTC")  # Spark's TimestampType in Arrow


@dataclass(frozen=True, slots=True)
class SinkRow:
    topic: str
    value: bytes | None
    key: bytes | None
    partition: int | None
    headers: tuple[tuple[str, bytes | None], ...]


def sink_rows(batch: pa.RecordBatch, default_topic: str | None) -> Iterator[SinkRow]:
    """The records a sink batch asks to write: to `default_topic` (the topic option) if given,
    else to the row's topic column. Strings are sent as UTF-8 (as Spark's Kafka sink does).
    ValueError naming the row when a row has no topic."""
    # Column names match case-insensitively, as Spark's do (and as check_sink_schema checks).
    index = {name.lower(): i for i, name in enumerate(batch.schema.names)}
    count = batch.num_rows

    def column(name: str) -> list[Any]:
        if name not in index:
            return [None] * count
        return list(batch.column(index[name]).to_pylist())

    values = column("value")
    keys = column("key")
    topics = column("topic")
    partitions = column("partition")
    headers = column("headers")
    for i in range(count):
        # The topic option, when given, overrides the column (as in Spark's Kafka sink).
        topic = default_topic if default_topic is not None else topics[i]
        if topic is None:
            raise ValueError(f"row {i} has no topic: give a 'topic' column or the 'topic' option")
        row_headers = headers[i] or ()
        yield SinkRow(
            topic,
            _as_bytes(values[i]),
            _as_bytes(keys[i]),
            partitions[i],
            tuple((h["key"], _as_bytes(h["value"])) for h in row_headers),
        )


def _as_bytes(value: bytes | str | None) -> bytes | None:
    return value.encode() if isinstance(value, str) else value
