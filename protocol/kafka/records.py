"""Kafka's v2 record batches to and from Highwater's, for a Kafka listener.

The two share the 61-byte batch header field for field; only the records section differs
(Kafka: varint-framed records; Highwater: one msgpack array, docs/protocol.md). So a batch
keeps its header values (offsets, producer id, epoch and sequence, timestamps, codec) and
only its records section is re-encoded, then its length and CRC are computed anew. Each
section goes through the compiled transcoder (_transcode.c) where it was built and the
section is of the usual shape, else through aiokafka's C record codec, the reference (tests
hold the two to the same bytes). Each conversion is bounded: records sections decompress
through protocol.compression's limits.

As Kafka's LogValidator, a produced batch's max_timestamp is recomputed from its records
rather than trusted, and transactional, control and LogAppendTime batches are refused.
"""

from __future__ import annotations

import struct
from types import ModuleType
from typing import Any, Final

from aiokafka.codec import snappy_encode
from aiokafka.errors import CorruptRecordException
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder

from protocol.compression import MAX_DECOMPRESSED_BYTES, Compression, compress, decompress
from protocol.errors import CorruptRecordError, InvalidRecordError
from protocol.records import (
    BATCH_HEADER_BYTES,
    BATCH_PREFIX,
    CONTROL_BIT,
    LOG_OVERHEAD_BYTES,
    MAGIC_V2,
    TIMESTAMP_TYPE_BIT,
    TRANSACTIONAL_BIT,
    BatchHeader,
    batch_entries,
    build_batch_from_entries,
    build_batch_from_section,
    crc32c,
    iter_plain_sections,
    read_header,
    validate_batch,
)

_compiled: ModuleType | None
try:  # the compiled transcoder (optional: where it could not be built, aiokafka's path)
    from protocol.kafka import _transcode as _compiled
except ImportError:  # pragma: no cover - a build without a C compiler
    _compiled = None

__all__ = ["from_kafka_batches", "to_kafka_batches"]

_TAIL: Final = struct.Struct(">hiqqqhii")  # attributes .. record_count (bytes 21-60)
_MAGIC_AND_CRC: Final = struct.Struct(">bI")
_ATTRIBUTES: Final = struct.Struct(">h")
_NO_LIMIT: Final = 2**31 - 1
_COMPRESSION_MASK: Final = 0x07


def from_kafka_batches(
    records: bytes, max_decompressed_bytes: int = MAX_DECOMPRESSED_BYTES
) -> bytes:
    """A Produce request's records (one or more Kafka batches) as Highwater batches.
    CorruptRecordError (CORRUPT_MESSAGE) for bytes that are not whole, intact batches;
    InvalidRecordError (INVALID_RECORD) for batches Kafka's LogValidator refuses too."""
    out: list[bytes] = []
    pos = 0
    while pos < len(records):
        header = read_header(records, pos)
        end = pos + header.size
        if end > len(records):
            raise CorruptRecordError(f"batch at byte {pos} is cut short")
        if crc32c(memoryview(records)[pos + 21 : end]) != header.crc:
            raise CorruptRecordError(f"batch at byte {pos}: CRC mismatch")
        out.append(_from_kafka_batch(records, pos, header, max_decompressed_bytes))
        pos = end
    if not out:
        raise CorruptRecordError("no record batch")
    return b"".join(out)


def _from_kafka_batch(records: bytes, pos: int, header: BatchHeader, max_bytes: int) -> bytes:
    if header.attributes & (TRANSACTIONAL_BIT | CONTROL_BIT):
        raise InvalidRecordError("transactional and control batches are not supported")
    if header.attributes & TIMESTAMP_TYPE_BIT:
        raise InvalidRecordError("a producer's batch must use CreateTime timestamps")
    if header.record_count <= 0:
        raise InvalidRecordError("a produced batch holds at least one record")
    section = records[pos + BATCH_HEADER_BYTES : pos + header.size]
    plain = decompress(header.compression, section, max_bytes)
    base = header.base_timestamp
    # hasattr: a module built before Produce's compiled path (an editable install not rebuilt)
    # has Fetch's function only; Produce then takes aiokafka's path rather than failing.
    if _compiled is not None and hasattr(_compiled, "from_kafka_section"):
        converted = _compiled.from_kafka_section(plain, header.record_count)
        if converted is not None:
            packed, max_timestamp_delta = converted
            return build_batch_from_section(
                packed,
                header.record_count,
                base_timestamp=base,
                max_timestamp=base + max_timestamp_delta,
                compression=Compression(header.compression),
                producer_id=header.producer_id,
                producer_epoch=header.producer_epoch,
                base_sequence=header.base_sequence,
                last_offset_delta=header.last_offset_delta,
            )
    entries = []
    try:
        for record in DefaultRecordBatch(_uncompressed(header, plain)):
            entries.append(
                [
                    record.timestamp - base,
                    record.offset - header.base_offset,  # aiokafka gives absolute offsets
                    record.key,
                    record.value,
                    [[name, value] for name, value in record.headers],
                ]
            )
    except (CorruptRecordException, UnicodeDecodeError, ValueError) as exc:
        raise CorruptRecordError(f"records section: {exc}") from exc
    if len(entries) != header.record_count:
        raise CorruptRecordError(
            f"records section holds {len(entries)} records, not {header.record_count}"
        )
    return build_batch_from_entries(
        entries,
        base_timestamp=base,
        max_timestamp=max(base + e[0] for e in entries),
        compression=Compression(header.compression),
        producer_id=header.producer_id,
        producer_epoch=header.producer_epoch,
        base_sequence=header.base_sequence,
        last_offset_delta=header.last_offset_delta,
    )


def _uncompressed(header: BatchHeader, plain: bytes) -> bytes:
    """The batch with its records section decompressed, as aiokafka's reader takes it (its
    CRC is not checked again)."""
    batch_length = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + len(plain)
    return (
        BATCH_PREFIX.pack(header.base_offset, batch_length, header.partition_leader_epoch)
        + _MAGIC_AND_CRC.pack(MAGIC_V2, 0)
        + _tail(header, header.attributes & ~_COMPRESSION_MASK, header.record_count)
        + plain
    )


def _tail(header: BatchHeader, attributes: int, record_count: int) -> bytes:
    return _TAIL.pack(
        attributes,
        header.last_offset_delta,
        header.base_timestamp,
        header.max_timestamp,
        header.producer_id,
        header.producer_epoch,
        header.base_sequence,
        record_count,
    )


def to_kafka_batches(records: bytes) -> bytes:
    """Stored batches (a Fetch's records) as Kafka's; a partial batch at the end is dropped
    (a fetch cut at max_bytes; Kafka clients skip it too). Each records section goes through
    the compiled transcoder where it was built and the section has the usual shape, else
    through aiokafka's codec (the reference: tests hold the two to the same bytes)."""
    out: list[bytes] = []
    for pos, header, section in iter_plain_sections(records):
        if _compiled is not None:
            if header is None:  # compressed, or not the fast path's shape: checked here
                header = read_header(records, pos)
                validate_batch(records, pos, header)
                raw = memoryview(records)[pos + BATCH_HEADER_BYTES : pos + header.size]
                section = memoryview(decompress(header.compression, bytes(raw)))
            converted = _compiled_batch(header, section) if header.record_count else None
            if converted is not None:
                out.append(converted)
                continue
        parsed, entries = batch_entries(records, pos, header, section)
        out.append(_to_kafka_batch(parsed, entries))
    return b"".join(out)


def _compiled_batch(header: BatchHeader, section: Any) -> bytes | None:
    assert _compiled is not None
    kafka_section = _compiled.to_kafka_section(section, header.record_count)
    if kafka_section is None:
        return None
    codec = header.compression
    if codec == Compression.SNAPPY:
        kafka_section = snappy_encode(kafka_section, xerial_compatible=True)  # Java reads it
    elif codec != Compression.NONE:
        kafka_section = compress(Compression(codec), kafka_section)
    return _assembled(header, header.attributes, header.record_count, kafka_section)


def _assembled(header: BatchHeader, attributes: int, count: int, section: bytes) -> bytes:
    tail = _tail(header, attributes, count) + section
    batch_length = BATCH_HEADER_BYTES - LOG_OVERHEAD_BYTES + len(section)
    return (
        BATCH_PREFIX.pack(header.base_offset, batch_length, header.partition_leader_epoch)
        + _MAGIC_AND_CRC.pack(MAGIC_V2, crc32c(tail))
        + tail
    )


def _to_kafka_batch(header: BatchHeader, entries: tuple[Any, ...]) -> bytes:
    attributes = header.attributes
    if entries:
        builder = DefaultRecordBatchBuilder(
            magic=MAGIC_V2,
            compression_type=header.compression,
            is_transactional=0,
            producer_id=header.producer_id,
            producer_epoch=header.producer_epoch,
            base_sequence=header.base_sequence,
            batch_size=_NO_LIMIT,
        )
        base = header.base_timestamp
        for ts_delta, offset_delta, key, value, headers in entries:
            builder.append(offset_delta, base + ts_delta, key, value, list(headers))
        built = builder.build()
        # aiokafka sends a section uncompressed where compressing did not make it smaller.
        (built_attributes,) = _ATTRIBUTES.unpack_from(built, 21)
        attributes = (attributes & ~_COMPRESSION_MASK) | (built_attributes & _COMPRESSION_MASK)
        section = bytes(built[BATCH_HEADER_BYTES:])
    else:
        section = b""  # a batch the cleaner emptied keeps its header (RETAIN_EMPTY)
        attributes &= ~_COMPRESSION_MASK
    return _assembled(header, attributes, len(entries), section)
