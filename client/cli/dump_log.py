"""`highwater dump-log`: print the batches of a segment file (like kafka-dump-log.sh).

Reads files directly with protocol/ only; it never needs a running broker.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from pathlib import Path

from protocol.errors import HighwaterError
from protocol.records import decode_batch, read_header, validate_batch

__all__ = ["dump_file"]

_INDEX_ENTRY = struct.Struct(">ii")
_TIME_INDEX_ENTRY = struct.Struct(">qi")


def dump_file(path: Path, *, records: bool = False) -> Iterator[str]:
    """Lines describing a .log, .index or .timeindex file."""
    data = path.read_bytes()
    base_offset = int(path.stem) if path.stem.isdigit() else 0
    yield f"Dumping {path} ({len(data)} bytes)"
    if path.suffix == ".index":
        yield from _dump_entries(
            data, _INDEX_ENTRY, lambda rel, pos: f"offset: {base_offset + rel} position: {pos}"
        )
    elif path.suffix == ".timeindex":
        yield from _dump_entries(
            data, _TIME_INDEX_ENTRY, lambda ts, rel: f"timestamp: {ts} offset: {base_offset + rel}"
        )
    else:
        yield from _dump_log(data, records)


def _dump_log(data: bytes, records: bool) -> Iterator[str]:
    position = 0
    batches = 0
    while position < len(data):
        try:
            header = read_header(data, position)
            validate_batch(data, position, header)
        except HighwaterError as exc:
            yield f"invalid bytes from position {position}: {exc.message}"
            break
        batches += 1
        yield (
            f"baseOffset: {header.base_offset} lastOffset: {header.last_offset} "
            f"count: {header.record_count} position: {position} size: {header.size} "
            f"partitionLeaderEpoch: {header.partition_leader_epoch} "
            f"compression: {header.compression} crc: {header.crc:#010x} isValid: true "
            f"maxTimestamp: {header.max_timestamp} producerId: {header.producer_id} "
            f"producerEpoch: {header.producer_epoch} baseSequence: {header.base_sequence}"
        )
        if records:
            for record in decode_batch(data, position).records:
                headers = ", ".join(f"{k}={v!r}" for k, v in record.headers)
                yield (
                    f"| offset: {record.offset} timestamp: {record.timestamp_ms} "
                    f"key: {record.key!r} value: {record.value!r} headers: [{headers}]"
                )
        position += header.size
    yield f"{batches} valid batches, {position} valid bytes"


def _dump_entries(
    data: bytes, entry: struct.Struct, describe: Callable[[int, int], str]
) -> Iterator[str]:
    whole = len(data) - len(data) % entry.size
    for first, second in entry.iter_unpack(data[:whole]):
        yield describe(first, second)
    if whole != len(data):
        yield f"{len(data) - whole} trailing bytes (a torn entry)"
