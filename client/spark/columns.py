"""Fetched record batches straight to Arrow columns, for the Spark source's hot path.

The consumer builds one Python object per record; a Spark task only needs columns. A batch of
the usual shape (uncompressed; five fields, offset deltas 0..n-1, no headers) goes through
the compiled decoder (_sections.c), which copies its keys and values into column buffers
without a Python object per record. Any other batch is unpacked (msgpack, in C) and split
into the same buffers in Python, each record checked by `decode_record` when it does not have
the usual shape, which raises the precise error. Arrow arrays are then made from the buffers;
numeric and constant columns by numpy. See docs/performance.md ("Spark").
"""

from __future__ import annotations

import bisect
import functools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
import pyarrow as pa

from client.spark.rows import HEADER_TYPE, SOURCE_NAMES, TIMESTAMP_US
from protocol.errors import CorruptRecordError
from protocol.records import (
    BatchHeader,
    batch_entries,
    decode_batch_entries,
    decode_record,
    iter_plain_sections,
)

# A batch's records as (timestamp deltas int64, key lengths int32 (-1: nil), key bytes,
# value lengths int32, value bytes), each item's bytes end to end.
_Packed = tuple[bytes, bytes, bytes, bytes, bytes]
_decode_section: Callable[[memoryview, int, int, int], _Packed | None] | None
try:  # the compiled twin of _checked + _pack for the usual batch, where it was built
    from client.spark._sections import decode_section as _decode_section
except ImportError:  # pragma: no cover - a build without a C compiler
    _decode_section = None

__all__ = ["ColumnBuilder"]

_EMPTY: _Packed = (b"", b"", b"", b"", b"")
_MAX_BINARY_BYTES = 2**31 - 1  # what one Arrow binary array with 32-bit offsets holds


@dataclass
class ColumnBuilder:
    """Collects the records [start, end) of one partition from fetched bytes."""

    topic: str
    partition: int
    include_headers: bool
    batch_bytes: int = 0  # size of the stored batches the collected records came from
    last_leader_epoch: int | None = None  # of the batch of the last record added (KIP-320)
    _count: int = 0
    # One item per batch: its records' columns as _Packed, and the offsets it added.
    _packed: list[_Packed] = field(default_factory=list)
    _offsets: list[range | tuple[int, ...]] = field(default_factory=list)
    _batches: list[tuple[int, int, int]] = field(default_factory=list)  # (count, ts, ts type)
    _headers: list[list[dict[str, Any]]] = field(default_factory=list)

    def __len__(self) -> int:
        return self._count

    def add(self, records: bytes, start: int, end: int) -> tuple[int, int]:
        """Add the records of whole batches in `records` with offsets in [start, end).
        Returns (whole batches seen, the offset after the last batch seen, or -1)."""
        batches = 0
        next_offset = -1
        for pos, plain_header, section in iter_plain_sections(records):
            entries = None
            if plain_header is None:  # compressed, or damaged: checked, or the precise error
                header, entries = decode_batch_entries(records, pos)
            else:
                header = plain_header
            batches += 1
            next_offset = header.next_offset
            if next_offset <= start:
                continue
            if header.base_offset >= end:
                break
            base = header.base_offset
            count = header.record_count
            lo = max(0, start - base)
            hi = min(count, end - base)
            packed = None
            if _decode_section is not None and section is not None and lo < hi:
                packed = _decode_section(section, count, lo, hi)  # dense batches only
            if packed is not None:
                offsets: range | tuple[int, ...] = range(base + lo, base + hi)
                if self.include_headers:
                    self._headers.extend([] for _ in range(hi - lo))
            else:
                if entries is None:
                    header, entries = batch_entries(records, pos, plain_header, section)
                lo, hi, offsets, packed, headers = _checked(
                    header, entries, start, end, self.include_headers
                )
                if lo >= hi:
                    continue
                self._headers.extend(headers)
            self._packed.append(packed)
            self._offsets.append(offsets)
            self._batches.append((hi - lo, header.base_timestamp, header.timestamp_type))
            self._count += hi - lo
            self.batch_bytes += header.size
            self.last_leader_epoch = header.partition_leader_epoch
        return batches, next_offset

    def flush(self) -> pa.RecordBatch:
        """The collected records as one Arrow batch in the source's schema; starts anew."""
        count = self._count
        runs, base_timestamps, types = (
            (np.array(c, dtype=np.int64) for c in zip(*self._batches, strict=True))
            if count
            else (np.empty(0, dtype=np.int64) for _ in range(3))
        )
        offsets = _offsets_column(self._offsets, runs, count)
        ts_deltas, key_lengths, keys, value_lengths, values = (
            zip(*self._packed, strict=True) if count else ((),) * 5
        )
        deltas = np.frombuffer(b"".join(ts_deltas), dtype=np.int64)
        timestamps_us = (np.repeat(base_timestamps, runs) + deltas) * 1000
        arrays = [
            _binary_array(b"".join(key_lengths), keys, count),
            _binary_array(b"".join(value_lengths), values, count),
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
        self._packed, self._offsets, self._batches, self._headers = [], [], [], []
        return pa.RecordBatch.from_arrays(arrays, names=names)


def _checked(
    header: BatchHeader, entries: tuple[Any, ...], start: int, end: int, include_headers: bool
) -> tuple[int, int, range | tuple[int, ...], _Packed, list[list[dict[str, Any]]]]:
    """The records [start, end) of a batch through Python, as (lo, hi, their offsets, their
    columns, their headers as the source's rows hold them if asked for): any shape a batch
    may have (cleaned, with headers), each record checked when it is not the usual one."""
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
        return lo, hi, offsets, _EMPTY, []
    if lo or hi < count:
        keys, values, ts_deltas = keys[lo:hi], values[lo:hi], ts_deltas[lo:hi]
    rows = (
        [[{"key": k, "value": v} for k, v in h] for h in headers[lo:hi]] if include_headers else []
    )
    return lo, hi, offsets, _pack(ts_deltas, keys, values), rows


def _offsets_column(
    chunks: list[range | tuple[int, ...]], runs: np.ndarray, count: int
) -> np.ndarray:
    """The batches' offsets end to end; `runs` holds each chunk's length."""
    ranges = [chunk for chunk in chunks if type(chunk) is range]
    if len(ranges) == len(chunks):  # dense batches: no item by item
        starts = np.fromiter((r.start for r in ranges), np.int64, count=len(ranges))
        firsts = np.cumsum(runs) - runs  # where each chunk begins in the column
        offsets: np.ndarray = np.arange(count, dtype=np.int64) + np.repeat(starts - firsts, runs)
        return offsets
    return np.concatenate([np.array(chunk, dtype=np.int64) for chunk in chunks])


@functools.cache
def _deltas(count: int) -> tuple[int, ...]:
    """The offset deltas of a batch of `count` records in the usual shape."""
    return tuple(range(count))


def _pack(
    ts_deltas: tuple[int, ...], keys: tuple[bytes | None, ...], values: tuple[bytes | None, ...]
) -> _Packed:
    """Checked columns of a batch in _decode_section's form."""
    return (
        np.array(ts_deltas, dtype=np.int64).tobytes(),
        _lengths(keys),
        b"".join(filter(None, keys)),  # a nil or empty item adds no bytes
        _lengths(values),
        b"".join(filter(None, values)),
    )


def _lengths(items: tuple[bytes | None, ...]) -> bytes:
    """The items' lengths as int32 bytes, -1 for a nil."""
    if items.count(None):
        return np.array([-1 if i is None else len(i) for i in items], dtype=np.int32).tobytes()
    present = cast("tuple[bytes, ...]", items)
    return np.fromiter(map(len, present), dtype=np.int32, count=len(items)).tobytes()


def _binary_array(lengths_bytes: bytes, pieces: tuple[bytes, ...], count: int) -> pa.Array:
    """A binary array from items' lengths (int32, -1 for a nil) and their bytes, end to end
    in `pieces`."""
    lengths = np.frombuffer(lengths_bytes, dtype=np.int32)
    present = lengths >= 0
    if not present.any():
        return pa.nulls(count, pa.binary())  # keys, usually
    ends = np.cumsum(lengths * present, dtype=np.int64)
    data = _pool_joined(pieces)
    if data.size != int(ends[-1]) or data.size > _MAX_BINARY_BYTES:
        raise CorruptRecordError("record columns do not add up")  # not reached: a guard
    offsets = np.zeros(count + 1, dtype=np.int32)
    offsets[1:] = ends
    validity = None if present.all() else pa.py_buffer(np.packbits(present, bitorder="little"))
    return pa.Array.from_buffers(pa.binary(), count, [validity, pa.py_buffer(offsets), data])


def _pool_joined(pieces: tuple[bytes, ...]) -> pa.Buffer:
    """The pieces end to end, in memory from Arrow's pool. The pool keeps freed memory for
    the next batch; a new bytes object of megabytes costs a page fault per page, and freeing
    it gives the pages back (docs/spark.md, "Where the memory comes from")."""
    buffer = pa.allocate_buffer(sum(map(len, pieces)))
    with memoryview(buffer) as raw, raw.cast("B") as view:
        position = 0
        for piece in pieces:
            end = position + len(piece)
            view[position:end] = piece
            position = end
    return buffer


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
