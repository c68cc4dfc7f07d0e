"""Fetched record batches straight to Arrow columns, for the Spark source's hot path.

The consumer builds one Python object per record; a Spark task only needs columns. Here each
batch's records section is unpacked once (msgpack, in C) and split into columns with zip, so
the per-record work in Python is a few C-level tuple operations. Arrow arrays are then built
in C: keys and values by Arrow's converter from the collected tuples, numeric and constant
columns by numpy. A batch whose records do not have the usual shape (five fields, offset
deltas 0..n-1) goes through `decode_record`, which checks each record and raises the precise
error.
"""

from __future__ import annotations

import bisect
import functools
from dataclasses import dataclass, field
from itertools import chain
from typing import Any

import numpy as np
import pyarrow as pa

from client.spark.rows import HEADER_TYPE, SOURCE_NAMES, TIMESTAMP_US
from protocol.errors import CorruptRecordError
from protocol.records import decode_batches_entries, decode_record

__all__ = ["ColumnBuilder"]


@dataclass
class ColumnBuilder:
    """Collects the records [start, end) of one partition from fetched bytes."""

    topic: str
    partition: int
    include_headers: bool
    batch_bytes: int = 0  # size of the stored batches the collected records came from
    last_leader_epoch: int | None = None  # of the batch of the last record added (KIP-320)
    _count: int = 0
    _keys: list[tuple[bytes | None, ...]] = field(default_factory=list)  # one tuple per batch
    _values: list[tuple[bytes | None, ...]] = field(default_factory=list)
    _offsets: list[range | tuple[int, ...]] = field(default_factory=list)
    _timestamp_deltas: list[tuple[int, ...]] = field(default_factory=list)
    _batches: list[tuple[int, int, int]] = field(default_factory=list)  # (count, ts, ts type)
    _headers: list[list[dict[str, Any]]] = field(default_factory=list)

    def __len__(self) -> int:
        return self._count

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
            if len(columns) != 5 or columns[1] != _deltas(count):
                columns = _checked_columns(entries, header)
            ts_deltas, deltas, keys, values, headers = columns
            base = header.base_offset
            offsets: range | tuple[int, ...]
            if deltas == _deltas(count):  # dense: the usual batch
                lo = max(0, start - base)
                hi = min(count, end - base)
                offsets = range(base + lo, base + hi)
            else:  # a cleaned batch: offsets with gaps, in order
                lo = bisect.bisect_left(deltas, start - base)
                hi = bisect.bisect_left(deltas, end - base)
                offsets = tuple(base + d for d in deltas[lo:hi])
            if lo >= hi:
                continue
            if lo or hi < count:
                keys, values, ts_deltas = keys[lo:hi], values[lo:hi], ts_deltas[lo:hi]
            self._keys.append(keys)
            self._values.append(values)
            self._offsets.append(offsets)
            self._timestamp_deltas.append(ts_deltas)
            self._batches.append((hi - lo, header.base_timestamp, header.timestamp_type))
            if self.include_headers:
                self._headers.extend([{"key": k, "value": v} for k, v in h] for h in headers[lo:hi])
            self._count += hi - lo
            self.batch_bytes += header.size
            self.last_leader_epoch = header.partition_leader_epoch
        return batches, next_offset

    def flush(self) -> pa.RecordBatch:
        """The collected records as one Arrow batch in the source's schema; starts anew."""
        count = self._count
        offsets = np.concatenate(
            [
                np.arange(r.start, r.stop, dtype=np.int64)
                if type(r) is range
                else np.array(r, dtype=np.int64)
                for r in self._offsets
            ]
            or [np.empty(0, dtype=np.int64)]
        )
        runs, base_timestamps, types = (
            (np.array(c, dtype=np.int64) for c in zip(*self._batches, strict=True))
            if count
            else (np.empty(0, dtype=np.int64) for _ in range(3))
        )
        deltas = np.fromiter(
            chain.from_iterable(self._timestamp_deltas), dtype=np.int64, count=count
        )
        timestamps_us = (np.repeat(base_timestamps, runs) + deltas) * 1000
        arrays = [
            _binary_array(self._keys, count),
            _binary_array(self._values, count),
            _constant_string(self.topic, count),
            pa.array(np.full(count, self.partition, dtype=np.int32)),
            pa.array(offsets),
            pa.array(timestamps_us, TIMESTAMP_US),
            pa.array(np.repeat(types.astype(np.int32), runs)),
        ]
        names = list(SOURCE_NAMES)
        if self.include_headers:
            arrays.append(pa.array(self._headers, HEADER_TYPE))
            names.append("headers")
        self._count = self.batch_bytes = 0
        self._keys, self._values, self._offsets = [], [], []
        self._timestamp_deltas, self._batches, self._headers = [], [], []
        return pa.RecordBatch.from_arrays(arrays, names=names)


@functools.cache
def _deltas(count: int) -> tuple[int, ...]:
    """The offset deltas of a batch of `count` records in the usual shape."""
    return tuple(range(count))


def _binary_array(chunks: list[tuple[bytes | None, ...]], count: int) -> pa.Array:
    """A binary array of the items of `chunks`."""
    if all(chunk.count(None) == len(chunk) for chunk in chunks):
        return pa.nulls(count, pa.binary())  # keys, usually
    # Arrow's converter sizes and copies the items in C, nulls included; the reader bounds a
    # flush far below the 2 GiB that one array with 32-bit offsets can hold.
    return pa.array(list(chain.from_iterable(chunks)), pa.binary())


def _constant_string(text: str, count: int) -> pa.Array:
    """`count` copies of `text` as a string array, built from buffers."""
    encoded = text.encode()
    ends = (np.arange(count + 1, dtype=np.int64) * len(encoded)).astype(np.int32)
    return pa.Array.from_buffers(
        pa.string(), count, [None, pa.py_buffer(ends), pa.py_buffer(encoded * count)]
    )


def _checked_columns(entries: tuple[Any, ...], header: Any) -> list[tuple[Any, ...]]:
    """Columns of a batch, each record checked (CorruptRecordError on a malformed one); the
    records come back in offset order, offsets strictly increasing (a cleaned batch has gaps)."""
    records = [decode_record(e, header, i) for i, e in enumerate(entries)]
    records.sort(key=lambda r: r.offset)
    deltas = tuple(r.offset - header.base_offset for r in records)
    if len(set(deltas)) != len(deltas):
        raise CorruptRecordError(f"batch at offset {header.base_offset}: repeated offsets")
    return [
        tuple(r.timestamp_ms - header.base_timestamp for r in records),
        deltas,
        tuple(r.key for r in records),
        tuple(r.value for r in records),
        tuple(r.headers for r in records),
    ]
