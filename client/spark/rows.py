"""Records to Arrow and back: the Spark source's rows and the sink's input columns.

The source's schema is Spark's Kafka source schema. Rows leave the reader as Arrow record
batches (Spark takes them without a per-row Python conversion).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Final

import pyarrow as pa

from client.consumer import ConsumerRecord

__all__ = [
    "SINK_COLUMNS",
    "SinkRow",
    "records_to_batch",
    "sink_rows",
    "source_schema",
]

_BASE_DDL: Final = (
    "key binary, value binary, topic string, partition int, offset long, "
    "timestamp timestamp, timestampType int"
)
_HEADERS_DDL: Final = "headers array<struct<key: string, value: binary>>"
_HEADER_TYPE: Final = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
_NAMES: Final = ("key", "value", "topic", "partition", "offset", "timestamp", "timestampType")
_TIMESTAMP_MS: Final = pa.timestamp("ms", tz="UTC")
_TIMESTAMP_US: Final = pa.timestamp("us", tz="UTC")  # Spark's TimestampType in Arrow

SINK_COLUMNS: Final = frozenset({"key", "value", "topic", "partition", "headers"})


def source_schema(include_headers: bool) -> str:
    """The source's schema as a Spark DDL string."""
    return f"{_BASE_DDL}, {_HEADERS_DDL}" if include_headers else _BASE_DDL


def records_to_batch(records: Sequence[ConsumerRecord], include_headers: bool) -> pa.RecordBatch:
    """Consumed records (all from one partition) as one Arrow batch in the source's schema."""
    count = len(records)
    topic = records[0].topic if count else ""
    partition = records[0].partition if count else 0
    columns: list[Any] = [
        pa.array([r.key for r in records], pa.binary()),
        pa.array([r.value for r in records], pa.binary()),
        pa.array([topic] * count, pa.string()),
        pa.array([partition] * count, pa.int32()),
        pa.array([r.offset for r in records], pa.int64()),
        pa.array([r.timestamp for r in records], pa.int64())
        .cast(_TIMESTAMP_MS)
        .cast(_TIMESTAMP_US),
        pa.array([r.timestamp_type for r in records], pa.int32()),
    ]
    names = list(_NAMES)
    if include_headers:
        columns.append(
            pa.array(
                [[{"key": k, "value": v} for k, v in r.headers] for r in records], _HEADER_TYPE
            )
        )
        names.append("headers")
    return pa.RecordBatch.from_arrays(columns, names=names)


@dataclass(frozen=True, slots=True)
class SinkRow:
    topic: str
    value: bytes | None
    key: bytes | None
    partition: int | None
    headers: tuple[tuple[str, bytes | None], ...]


def sink_rows(batch: pa.RecordBatch, default_topic: str | None) -> Iterator[SinkRow]:
    """The records a sink batch asks to write. Strings are sent as UTF-8 (as Spark's Kafka sink
    does). ValueError naming the row when a row has no topic."""
    names = set(batch.schema.names)
    count = batch.num_rows

    def column(name: str) -> list[Any]:
        if name not in names:
            return [None] * count
        return list(batch.column(name).to_pylist())

    values = column("value")
    keys = column("key")
    topics = column("topic")
    partitions = column("partition")
    headers = column("headers")
    for i in range(count):
        topic = topics[i] if topics[i] is not None else default_topic
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
