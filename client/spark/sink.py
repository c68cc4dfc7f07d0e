"""`df.write.format("highwater")` and `df.writeStream.format("highwater")`: the sink.

Columns as Spark's Kafka sink: `value` (required), `key`, `topic` (the `topic` option
overrides it), `partition`, `headers`; others are ignored. Each task sends its rows with one
idempotent producer (acks=all) and returns once every row is acknowledged, or fails. A retried
task or a re-run micro-batch sends its rows again: at-least-once, as Spark's Kafka sink.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Final

import pyarrow as pa
import trio
from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
)

from client.errors import HighwaterClientError
from client.producer import DeliveryFuture, Producer
from client.spark.options import OptionError, SinkOptions, parse_sink_options
from client.spark.rows import sink_rows

__all__ = [
    "HighwaterBatchWriter",
    "HighwaterStreamWriter",
    "WriteResult",
    "check_sink_schema",
    "produce_batches",
]

BATCH_SIZE_BYTES: Final = 256 * 1024
LINGER_MS: Final = 5
FLUSH_TIMEOUT_MS: Final = 300_000

_BYTES_LIKE = (BinaryType, StringType)


def check_sink_schema(raw_options: Mapping[str, str], schema: StructType) -> SinkOptions:
    """The sink's options, after checking the DataFrame's columns (on the driver, so that a
    bad query fails before any task runs)."""
    options = parse_sink_options(raw_options)
    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise OptionError("the DataFrame to write needs a 'value' column")
    _expect(fields, "value", _BYTES_LIKE, "binary or string")
    _expect(fields, "key", _BYTES_LIKE, "binary or string")
    _expect(fields, "topic", (StringType,), "string")
    _expect(fields, "partition", (IntegerType,), "int")
    headers = fields.get("headers")
    if headers is not None and not _is_headers_type(headers):
        raise OptionError(
            "column 'headers' must be array<struct<key: string, value: binary>>, "
            f"not {headers.simpleString()}"
        )
    if "topic" not in fields and options.topic is None:
        raise OptionError("give a 'topic' column or the 'topic' option")
    return options


def _expect(
    fields: Mapping[str, DataType], name: str, types: tuple[type, ...], described: str
) -> None:
    found = fields.get(name)
    if found is not None and not isinstance(found, types):
        raise OptionError(f"column {name!r} must be {described}, not {found.simpleString()}")


def _is_headers_type(t: DataType) -> bool:
    if not isinstance(t, ArrayType) or not isinstance(t.elementType, StructType):
        return False
    inner = {f.name: f.dataType for f in t.elementType.fields}
    return (
        set(inner) == {"key", "value"}
        and isinstance(inner["key"], StringType)
        and isinstance(inner["value"], _BYTES_LIKE)
    )


@dataclass(frozen=True)
class WriteResult(WriterCommitMessage):
    records: int


def produce_batches(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    """Send every row of `batches`; return how many, once all are acknowledged (acks=all).
    Raises HighwaterClientError if any record failed."""
    return trio.run(_produce, options, batches)


async def _produce(options: SinkOptions, batches: Iterator[pa.RecordBatch]) -> int:
    count = 0
    failed: list[DeliveryFuture] = []

    def on_done(future: DeliveryFuture) -> None:
        if future.exception() is not None and not failed:
            failed.append(future)

    async with Producer(
        options.bootstrap_servers,
        client_id="highwater-spark-writer",
        security=dict(options.security),
        acks="all",
        enable_idempotence=True,
        batch_size=BATCH_SIZE_BYTES,
        linger_ms=LINGER_MS,
        compression=options.compression,
    ) as producer:
        # Spark hands batches over a pipe: next() blocks this loop briefly, which is fine,
        # since the producer's sender runs whenever send() yields.
        for batch in batches:
            for row in sink_rows(batch, options.topic):
                await producer.send(
                    row.topic, row.value, row.key, row.partition, row.headers, callback=on_done
                )
                count += 1
                if failed:
                    break
            if failed:
                break
        await producer.flush(FLUSH_TIMEOUT_MS)
    if failed:
        error = failed[0].exception()
        raise HighwaterClientError(f"the sink could not write a record: {error}")
    return count


class HighwaterBatchWriter(DataSourceArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return WriteResult(produce_batches(self.options, iterator))


class HighwaterStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, options: SinkOptions) -> None:
        self.options = options

    def write(self, iterator: Iterator[pa.RecordBatch]) -> WriteResult:
        return WriteResult(produce_batches(self.options, iterator))

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing to do: every record was acknowledged before its task finished."""

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        """Nothing can be taken back: records already acknowledged stay in their topics."""
