"""Record batches: the unit the producer sends, the log stores and the fetcher serves.

Kafka's 61-byte v2 batch header (docs/protocol.md has the table), then a msgpack records
section, compressed as a whole. The CRC covers bytes 21 onwards, so the leader stamps
base_offset and partition_leader_epoch (bytes 0-15) without touching the CRC or the records:
the broker never decodes records. A record is `[timestamp_delta, offset_delta, key, value,
headers]`, headers `[key: str, value: bin | nil]` pairs. Its writers and readers share
one file (past 500 lines) because they share the header's private layout and fast checks.
"""

from __future__ import annotations

import contextlib
import struct
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, NoReturn

import crc32c as _crc32c
import msgpack

from protocol.compression import MAX_DECOMPRESSED_BYTES, Compression, compress, decompress
from protocol.errors import CorruptRecordError, InvalidRecordError

__all__ = [
    "BATCH_HEADER_BYTES",
    "BATCH_PREFIX",
    "LOG_OVERHEAD_BYTES",
    "MAGIC_V2",
    "NO_PARTITION_LEADER_EPOCH",
    "NO_PRODUCER_EPOCH",
    "NO_PRODUCER_ID",
    "NO_SEQUENCE",
    "BatchHeader",
    "Record",
    "RecordBatch",
    "TimestampType",
    "batch_entries",
    "build_batch",
    "build_batch_from_entries",
    "build_batch_from_section",
    "check_batches",
    "crc32c",
    "decode_batch",
    "decode_batch_entries",
    "decode_batches",
    "decode_batches_entries",
    "decode_record",
    "iter_batch_headers",
    "iter_plain_sections",
    "next_offset_after_whole_batches",
    "read_header",
    "stamp_prefix",
    "validate_batch",
]

MAGIC_V2: Final = 2
BATCH_HEADER_BYTES: Final = 61
LOG_OVERHEAD_BYTES: Final = 12  # base_offset + batch_length: bytes not counted in batch_length
CRC_START: Final = 21
NO_PRODUCER_ID: Final = -1
NO_PRODUCER_EPOCH: Final = -1
NO_SEQUENCE: Final = -1
NO_PARTITION_LEADER_EPOCH: Final = -1

COMPRESSION_MASK: Final = 0x07
TIMESTAMP_TYPE_BIT: Final = 0x08
TRANSACTIONAL_BIT: Final = 0x10
CONTROL_BIT: Final = 0x20

_HEADER: Final = struct.Struct(">qiibIhiqqqhii")
# The first 16 bytes, the ones the leader stamps: base_offset, batch_length, partition_leader_epoch.
BATCH_PREFIX: Final = struct.Struct(">qii")
_OFFSET_AND_LENGTH: Final = struct.Struct(">qi")
_MAGIC_AND_CRC: Final = struct.Struct(">bI")
# Bound once: check_batches runs per produce and per replicated fetch.
_HEADER_UNPACK_FROM: Final = _HEADER.unpack_from
_crc: Final = _crc32c.crc32c
_tuple_new: Final = tuple.__new__


class TimestampType:
    CREATE_TIME: Final = 0
    LOG_APPEND_TIME: Final = 1


def crc32c(data: bytes | bytearray | memoryview) -> int:
    return int(_crc32c.crc32c(data))


class BatchHeader(NamedTuple):
    """The 61-byte header, as parsed (a NamedTuple: cheap to build on the append path)."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies."""
        return self.batch_length + LOG_OVERHEAD_BYTES

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def timestamp_type(self) -> int:
        return (self.attributes & TIMESTAMP_TYPE_BIT) >> 3

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == NO_SEQUENCE:
            return NO_SEQUENCE
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


def read_header(buf: bytes | bytearray | memoryview, pos: int = 0) -> BatchHeader:
    """Parse (without checking the CRC) the header of the batch starting at `pos`.

    Raises CorruptRecordError if fewer than a header's bytes remain, the magic is not 2,
    or batch_length cannot describe a whole batch.
    """
    if len(buf) - pos < BATCH_HEADER_BYTES:
        raise CorruptRecordError(
            f"batch at byte {pos}: {len(buf) - pos} bytes left, a header needs {BATCH_HEADER_BYTES}"
        )
    header = BatchHeader._make(_HEADER.unpack_from(buf, pos))
    if header.magic != MAGIC_V2 or header.batch_length < BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES:
        _raise_bad_header(pos, header)
    return header


def _raise_bad_header(pos: int, header: BatchHeader) -> NoReturn:
    if header.magic != MAGIC_V2:
        raise CorruptRecordError(f"batch at byte {pos}: magic {header.magic}, expected 2")
    raise CorruptRecordError(f"batch at byte {pos}: batch_length {header.batch_length}")


def validate_batch(buf: bytes | bytearray | memoryview, pos: int, header: BatchHeader) -> None:
    """Check that the whole batch is present, its CRC matches and its counts are coherent."""
    end = pos + header.batch_length + LOG_OVERHEAD_BYTES
    if end > len(buf):
        raise CorruptRecordError(
            f"batch at byte {pos}: declares {end - pos} bytes, {len(buf) - pos} present"
        )
    # The whole-buffer case (one batch per request) avoids a slice: this runs per produce.
    if pos == 0 and end == len(buf):
        actual = _crc32c.crc32c(memoryview(buf)[CRC_START:])
    else:
        actual = _crc32c.crc32c(memoryview(buf)[pos + CRC_START : end])
    if actual != header.crc:
        raise CorruptRecordError(
            f"batch at byte {pos}: CRC-32C {actual:#010x} != stored {header.crc:#010x}"
        )
    # A producer's batch is dense (record_count == last_offset_delta + 1); a cleaned one
    # keeps its offsets and last_offset_delta with fewer records, none at all for a producer's
    # last batch the cleaner emptied (Kafka's v2 batches too: BatchRetention.RETAIN_EMPTY).
    # Every batch covers at least one offset.
    if not (
        header.last_offset_delta >= 0 and 0 <= header.record_count <= header.last_offset_delta + 1
    ):
        raise InvalidRecordError(
            f"batch at byte {pos}: record_count {header.record_count} does not fit "
            f"last_offset_delta {header.last_offset_delta}"
        )


def check_batches(buf: bytes | bytearray | memoryview) -> list[tuple[int, BatchHeader]]:
    """(position, header) of every batch in `buf`, each whole, CRC-checked and coherent.

    The broker runs this on every produce and replicated fetch, so the good path is one
    inlined pass; anything odd is handed to read_header/validate_batch for the exact error.
    """
    size = len(buf)
    unpack_from = _HEADER_UNPACK_FROM
    if size >= BATCH_HEADER_BYTES:
        # One batch filling the buffer (the usual produce request): no loop, no list growth.
        fields = unpack_from(buf, 0)
        if fields[1] + LOG_OVERHEAD_BYTES == size:
            # batch_length is then at least a header's worth, since size >= a header.
            view = buf if type(buf) is memoryview else memoryview(buf)  # the log passes a view
            if not _coherent(fields, view, 0, size):
                validate_batch(buf, 0, read_header(buf, 0))  # raises the precise error
            return [(0, _tuple_new(BatchHeader, fields))]
    checked = []
    pos = 0
    view = memoryview(buf)
    while pos < size:
        if size - pos < BATCH_HEADER_BYTES:
            read_header(buf, pos)  # raises, naming the short tail
        fields = unpack_from(buf, pos)
        end = pos + fields[1] + LOG_OVERHEAD_BYTES
        if (
            fields[1] < BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES
            or end > size
            or not _coherent(fields, view, pos, end)
        ):
            validate_batch(buf, pos, read_header(buf, pos))  # raises the precise error
        checked.append((pos, _tuple_new(BatchHeader, fields)))
        pos = end
    return checked


def _coherent(fields: tuple[Any, ...], view: memoryview, pos: int, end: int) -> bool:
    """The good path's checks of the whole batch at [pos, end) with header `fields`: magic 2,
    record counts that agree, a matching CRC. When one fails, validate_batch names it."""
    return bool(
        fields[3] == MAGIC_V2
        and fields[6] >= 0
        and 0 <= fields[12] <= fields[6] + 1
        and _crc(view[pos + CRC_START : end]) == fields[4]
    )


def iter_batch_headers(
    buf: bytes | bytearray | memoryview, *, check_crc: bool = True
) -> Iterator[tuple[int, BatchHeader]]:
    """Yield (position, header) for each batch in `buf`; raise on the first bad one.

    The error's message names the byte position; everything before it was valid.
    """
    pos = 0
    size = len(buf)
    while pos < size:
        header = read_header(buf, pos)
        if check_crc:
            validate_batch(buf, pos, header)
        elif pos + header.size > size:
            raise CorruptRecordError(f"batch at byte {pos} is truncated")
        yield pos, header
        pos += header.size


def next_offset_after_whole_batches(buf: bytes | bytearray | memoryview) -> int:
    """The offset after the last whole batch at the start of `buf` (a fetch response may end
    with part of one), from the batch headers alone: no CRC check, no records decoded; -1 if
    no batch is whole. A hint for fetching ahead; decoding the batches is what checks them."""
    pos, last = 0, -1
    size = len(buf)
    while size - pos >= BATCH_HEADER_BYTES:
        _, batch_length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
        end = pos + LOG_OVERHEAD_BYTES + batch_length
        if batch_length < BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES or end > size:
            break
        last, pos = pos, end
    return -1 if last < 0 else read_header(buf, last).next_offset


def stamp_prefix(base_offset: int, batch_length: int, partition_leader_epoch: int) -> bytes:
    """The first 16 bytes of a batch with a new base offset and leader epoch (CRC unaffected)."""
    return BATCH_PREFIX.pack(base_offset, batch_length, partition_leader_epoch)


# ---------------------------------------------------------------------------------------------
# Client side: building and decoding records. The broker never calls these on its data path.


@dataclass(frozen=True, slots=True)
class Record:
    value: bytes | None
    key: bytes | None = None
    timestamp_ms: int = -1  # -1: the batch builder uses the current time
    headers: tuple[tuple[str, bytes | None], ...] = ()
    offset: int = -1  # set when decoded from a stored batch


@dataclass(frozen=True, slots=True)
class RecordBatch:
    header: BatchHeader
    records: tuple[Record, ...] = field(default=())


def build_batch(
    records: Sequence[Record],
    *,
    compression: Compression = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    now_ms: int | None = None,
) -> bytes:
    """Encode records as one batch, ready to produce (base offset 0, as a producer sends it)."""
    if not records:
        raise ValueError("a batch holds at least one record")
    if now_ms is None:
        now_ms = int(time.time() * 1000)
    timestamps = [r.timestamp_ms if r.timestamp_ms >= 0 else now_ms for r in records]
    base_timestamp = timestamps[0]
    plain = [
        [ts - base_timestamp, i, r.key, r.value, [list(h) for h in r.headers]]
        for i, (r, ts) in enumerate(zip(records, timestamps, strict=True))
    ]
    return build_batch_from_entries(
        plain,
        base_timestamp=base_timestamp,
        max_timestamp=max(timestamps),
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
    )


def build_batch_from_entries(
    entries: Sequence[Sequence[Any]],
    *,
    base_timestamp: int,
    max_timestamp: int,
    compression: Compression = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    last_offset_delta: int | None = None,
) -> bytes:
    """One batch from records already in their msgpack form, for builders that gather them
    one at a time (the producer's accumulator): each entry is
    `[timestamp - base_timestamp, index, key, value, headers]` with headers a sequence of
    (str, bytes | None) pairs. The bytes are identical to `build_batch` of the same records.
    `last_offset_delta`: the log cleaner's, keeping a batch's offsets with fewer records, or
    none (a producer's last batch, emptied: its header keeps the producer's sequence)."""
    if not entries and last_offset_delta is None:
        raise ValueError("a batch holds at least one record")
    return build_batch_from_section(
        msgpack.packb(entries, use_bin_type=True),
        len(entries),
        base_timestamp=base_timestamp,
        max_timestamp=max_timestamp,
        compression=compression,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        last_offset_delta=last_offset_delta,
    )


def build_batch_from_section(
    plain_section: bytes,
    count: int,
    *,
    base_timestamp: int,
    max_timestamp: int,
    compression: Compression = Compression.NONE,
    producer_id: int = NO_PRODUCER_ID,
    producer_epoch: int = NO_PRODUCER_EPOCH,
    base_sequence: int = NO_SEQUENCE,
    base_offset: int = 0,
    partition_leader_epoch: int = NO_PARTITION_LEADER_EPOCH,
    last_offset_delta: int | None = None,
) -> bytes:
    """One batch from its records section already packed (the msgpack array of `count`
    entries, uncompressed): build_batch_from_entries' second half, for a section packed
    elsewhere (the Kafka listener's compiled transcoder)."""
    section = compress(compression, plain_section)
    batch_length = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + len(section)
    if last_offset_delta is None:
        last_offset_delta = count - 1
    tail = (
        _HEADER.pack(
            base_offset,
            batch_length,
            partition_leader_epoch,
            MAGIC_V2,
            0,
            int(compression),
            last_offset_delta,
            base_timestamp,
            max_timestamp,
            producer_id,
            producer_epoch,
            base_sequence,
            count,
        )[CRC_START:]
        + section
    )
    return (
        BATCH_PREFIX.pack(base_offset, batch_length, partition_leader_epoch)
        + _MAGIC_AND_CRC.pack(MAGIC_V2, _crc32c.crc32c(tail))
        + tail
    )


def _decode_record(plain: Any, header: BatchHeader, index: int) -> Record:
    if type(plain) is not tuple or len(plain) != 5:
        raise CorruptRecordError(f"record {index}: expected an array of 5")
    ts_delta, offset_delta, key, value, headers = plain
    if type(ts_delta) is not int or type(offset_delta) is not int:
        raise CorruptRecordError(f"record {index}: timestamp/offset delta must be ints")
    if not 0 <= offset_delta <= header.last_offset_delta:
        raise CorruptRecordError(f"record {index}: offset delta {offset_delta} out of range")
    if not (key is None or type(key) is bytes) or not (value is None or type(value) is bytes):
        raise CorruptRecordError(f"record {index}: key and value must be bin or nil")
    if type(headers) is not tuple:
        raise CorruptRecordError(f"record {index}: headers must be an array")
    parsed: list[tuple[str, bytes | None]] = []
    for h in headers:
        if (
            type(h) is not tuple
            or len(h) != 2
            or type(h[0]) is not str
            or not (h[1] is None or type(h[1]) is bytes)
        ):
            raise CorruptRecordError(f"record {index}: header must be [str, bin | nil]")
        parsed.append((h[0], h[1]))
    return Record(
        value=value,
        key=key,
        timestamp_ms=header.base_timestamp + ts_delta,
        headers=tuple(parsed),
        offset=header.base_offset + offset_delta,
    )


def decode_batch(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
) -> RecordBatch:
    """Validate and fully decode one batch (consumer side)."""
    header, plain = decode_batch_entries(buf, pos, max_decompressed_bytes=max_decompressed_bytes)
    return RecordBatch(header, _decode_records(plain, header))


def decode_batches(buf: bytes | bytearray | memoryview) -> Iterator[RecordBatch]:
    """Decode consecutive batches, as a Fetch response's records field carries them.

    A partial batch at the very end (a fetch cut at max_bytes) is skipped, as Kafka clients do.
    """
    for header, plain in decode_batches_entries(buf):
        yield RecordBatch(header, _decode_records(plain, header))


def _decode_records(plain: tuple[Any, ...], header: BatchHeader) -> tuple[Record, ...]:
    records = tuple(_decode_record(p, header, i) for i, p in enumerate(plain))
    if header.record_count != header.last_offset_delta + 1:  # cleaned: gaps, still in order
        for i in range(1, len(records)):
            if records[i].offset <= records[i - 1].offset:
                raise CorruptRecordError(f"record {i}: offset delta not above the previous")
    return records


# Additive fast paths for consumers that build their own record objects: the batch is checked
# exactly as decode_batch checks it, and the records section is handed over unpacked.


def decode_batch_entries(
    buf: bytes | bytearray | memoryview,
    pos: int = 0,
    *,
    max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES,
) -> tuple[BatchHeader, tuple[Any, ...]]:
    """Validate one batch (as decode_batch) and return its header and the records section's
    raw msgpack entries, `(timestamp_delta, offset_delta, key, value, headers)` each, not yet
    checked one by one: pass an entry that looks wrong to `decode_record` for the error."""
    header = read_header(buf, pos)
    validate_batch(buf, pos, header)
    section = bytes(memoryview(buf)[pos + BATCH_HEADER_BYTES : pos + header.size])
    section = decompress(header.compression, section, max_decompressed_bytes)
    try:
        plain = _unpack_section(section)
    except (ValueError, TypeError, msgpack.exceptions.StackError) as exc:
        raise CorruptRecordError(f"batch at byte {pos}: records section: {exc}") from exc
    if type(plain) is not tuple or len(plain) != header.record_count:
        raise CorruptRecordError(
            f"batch at byte {pos}: records section does not hold {header.record_count} records"
        )
    return header, plain


def _unpack_section(section: bytes | memoryview) -> Any:
    """A plain records section's msgpack, unpacked within its bounds."""
    return msgpack.unpackb(
        section,
        raw=False,
        use_list=False,  # tuples: about 3x cheaper than lists, mostly in the cyclic GC
        max_array_len=len(section),  # every element takes at least one byte
        max_map_len=0,
        max_ext_len=0,
    )


def decode_batches_entries(
    buf: bytes | bytearray | memoryview,
) -> Iterator[tuple[BatchHeader, tuple[Any, ...]]]:
    """decode_batches, yielding (header, raw entries) per batch (see decode_batch_entries).

    Consumers and Spark tasks run this on every fetched batch, so the good path (an
    uncompressed, coherent batch) unpacks the records section in place; anything else goes
    through decode_batch_entries, which decompresses or raises the precise error.
    """
    for pos, header, section in iter_plain_sections(buf):
        yield batch_entries(buf, pos, header, section)


def iter_plain_sections(
    buf: bytes | bytearray | memoryview,
) -> Iterator[tuple[int, BatchHeader | None, memoryview | None]]:
    """(position, header, records section) of each whole batch in `buf`, a partial one at
    the end skipped; header and section are given only for an uncompressed batch that passes
    the good path's checks (inlined, as in check_batches), else None: pass the position to
    decode_batch_entries, which decompresses or raises the precise error."""
    pos = 0
    size = len(buf)
    view = memoryview(buf)
    unpack_from = _HEADER_UNPACK_FROM
    while size - pos >= LOG_OVERHEAD_BYTES:
        _, batch_length = _OFFSET_AND_LENGTH.unpack_from(buf, pos)
        end = pos + LOG_OVERHEAD_BYTES + batch_length
        if end > size:
            return
        if batch_length >= BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES:
            fields = unpack_from(buf, pos)
            if not fields[5] & COMPRESSION_MASK and _coherent(fields, view, pos, end):
                yield pos, _tuple_new(BatchHeader, fields), view[pos + BATCH_HEADER_BYTES : end]
                pos = end
                continue
        yield pos, None, None
        pos = end


def batch_entries(
    buf: bytes | bytearray | memoryview,
    pos: int,
    header: BatchHeader | None,
    section: memoryview | None,
) -> tuple[BatchHeader, tuple[Any, ...]]:
    """(header, raw entries) of the batch at `pos`, as iter_plain_sections gave it: its section
    unpacked in place when there is one and it holds the header's count of entries, else
    through decode_batch_entries."""
    if header is not None and section is not None:
        plain: Any = None
        with contextlib.suppress(ValueError, TypeError, msgpack.exceptions.StackError):
            plain = _unpack_section(section)
        if type(plain) is tuple and len(plain) == header.record_count:
            return header, plain
    return decode_batch_entries(buf, pos)


def decode_record(plain: Any, header: BatchHeader, index: int) -> Record:
    """One raw entry of a batch as a Record, checked (CorruptRecordError if malformed)."""
    return _decode_record(plain, header, index)
