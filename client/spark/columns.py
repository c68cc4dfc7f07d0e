"""Fetched record batches straight to Arrow columns, for the Spark source's hot path.

The consumer builds one Python object per record; a Spark task only needs columns. Here each
batch's records section is unpacked once (msgpack, in C) and split into columns with zip, so
the per-record work in Python is a few C-level list operations. A batch whose records do not
have the usual shape (five fields, offset deltas 0..n-1) goes through `decode_record`, which
checks each record and raises the precise error.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from client.spark.rows import HEADER_TYPE, SOURCE_NAMES, TIMESTAMP_MS, TIMESTAMP_US
from protocol.errors import CorruptRecordError
from protocol.records import decode_batches_entries, decode_record

__all__ = ["ColumnBuilder"]


@dataclass
class ColumnBuilder:
    """Collects the records [start, end) of one partition from fetched bytes."""

    topic: str
    partition: int
    include_headers: bool
    keys: list[bytes | None] = field(default_factory=list)
    values: list[bytes | None] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)
    timestamps: list[int] = field(default_factory=list)
    timestamp_types: list[int] = field(default_factory=list)
    headers: list[list[dict[str, Any]]] = field(default_factory=list)

    def __len__(self) -> int:
        return len(self.offsets)

    def add(self, records: bytes, start: int, end: int) -> tuple[int, int]:
        """Add the records of whole batches in `records` with offsets in [start, end).
        Returns (whole batches seen, the offset after the last batch seen, or -1)."""
        batches = 0
        next_offset = -1
        for header, entries in decode_batches_entries(records):
            batches += 1
            next_offset = header.next_offset
            if next_offset <= start:
                continue
            if header.base_offset >= end:
                break
            count = len(entries)
            columns = list(zip(*entries, strict=False)) if count else []
            if len(columns) != 5 or columns[1] != tuple(range(count)):
                columns = _checked_columns(entries, header)
            ts_deltas, _, keys, values, headers = columns
            base = header.base_offset
            lo = max(0, start - base)
            hi = min(count, end - base)
            self.keys.extend(keys[lo:hi])
            self.values.extend(values[lo:hi])
            self.offsets.extend(range(base + lo, base + hi))
            self.timestamps.extend(map(header.base_timestamp.__add__, ts_deltas[lo:hi]))
            self.timestamp_types.extend([header.timestamp_type] * (hi - lo))
            if self.include_headers:
                self.headers.extend([{"key": k, "value": v} for k, v in h] for h in headers[lo:hi])
        return batches, next_offset

    def flush(self) -> pa.RecordBatch:
        """The collected records as one Arrow batch in the source's schema; starts anew."""
        count = len(self.offsets)
        arrays = [
            pa.array(self.keys, pa.binary()),
            pa.array(self.values, pa.binary()),
            pa.array([self.topic] * count, pa.string()),
            pa.array([self.partition] * count, pa.int32()),
            pa.array(self.offsets, pa.int64()),
            pa.array(self.timestamps, pa.int64()).cast(TIMESTAMP_MS).cast(TIMESTAMP_US),
            pa.array(self.timestamp_types, pa.int32()),
        ]
        names = list(SOURCE_NAMES)
        if self.include_headers:
            arrays.append(pa.array(self.headers, HEADER_TYPE))
            names.append("headers")
        self.keys, self.values, self.offsets = [], [], []
        self.timestamps, self.timestamp_types, self.headers = [], [], []
        return pa.RecordBatch.from_arrays(arrays, names=names)


def _checked_columns(entries: list[Any], header: Any) -> list[tuple[Any, ...]]:
    """Columns of a batch, each record checked (CorruptRecordError on a malformed one); the
    records come back in offset order and without gaps, as `add` expects."""
    records = [decode_record(e, header, i) for i, e in enumerate(entries)]
    records.sort(key=lambda r: r.offset)
    if [r.offset - header.base_offset for r in records] != list(range(len(records))):
        raise CorruptRecordError(
            f"batch at offset {header.base_offset}: offset deltas are not 0..{len(records) - 1}"
        )
    return [
        tuple(r.timestamp_ms - header.base_timestamp for r in records),
        tuple(range(len(records))),
        tuple(r.key for r in records),
        tuple(r.value for r in records),
        tuple(r.headers for r in records),
    ]
