"""Kafka v2 batches to and from Highwater's (protocol/kafka/records.py): records survive both
ways unchanged, the compiled transcoders (Fetch's and Produce's) write exactly the bytes of
the aiokafka paths, and bad Kafka batches are refused with Kafka's errors."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest
from aiokafka.record.default_records import DefaultRecordBatch, DefaultRecordBatchBuilder
from hypothesis import given, settings
from hypothesis import strategies as st

import protocol.kafka.records as kafka_records
from protocol.compression import Compression
from protocol.errors import CorruptRecordError, InvalidRecordError
from protocol.kafka.records import from_kafka_batches, to_kafka_batches
from protocol.records import Record, build_batch, decode_batches

_BYTES = st.one_of(st.none(), st.binary(max_size=40))
_HEADERS = st.lists(st.tuples(st.text(max_size=8), _BYTES), max_size=3).map(tuple)
_RECORDS = st.lists(
    st.builds(
        Record,
        value=_BYTES,
        key=_BYTES,
        timestamp_ms=st.integers(1_600_000_000_000, 1_800_000_000_000),
        headers=_HEADERS,
    ),
    min_size=1,
    max_size=20,
)


def _kafka_records(batches: bytes) -> list[tuple[Any, ...]]:
    """Every record of Kafka batches, read by aiokafka's reader (the compressed ones too)."""
    out = []
    pos = 0
    while pos < len(batches):
        length = int.from_bytes(batches[pos + 8 : pos + 12], "big")
        batch = DefaultRecordBatch(batches[pos : pos + 12 + length])
        assert batch.validate_crc()
        out += [(r.offset, r.timestamp, r.key, r.value, tuple(r.headers)) for r in batch]
        pos += 12 + length
    return out


def _ours(batches: bytes) -> list[tuple[Any, ...]]:
    return [
        (r.offset, r.timestamp_ms, r.key, r.value, r.headers)
        for batch in decode_batches(batches)
        for r in batch.records
    ]


@settings(max_examples=200, deadline=None)
@given(records=_RECORDS, codec=st.sampled_from(list(Compression)), base=st.integers(0, 10**9))
def test_records_survive_the_trip_to_kafka_and_back(
    records: list[Record], codec: Compression, base: int
) -> None:
    stored = build_batch(records, compression=codec, base_offset=base, producer_id=7,
                         producer_epoch=1, base_sequence=3)  # fmt: skip
    kafka = to_kafka_batches(stored)
    assert _kafka_records(kafka) == _ours(stored)
    back = from_kafka_batches(kafka)
    assert [r[1:] for r in _ours(back)] == [r[1:] for r in _ours(stored)]


@pytest.mark.skipif(kafka_records._compiled is None, reason="the transcoder was not built")
@settings(max_examples=200, deadline=None)
@given(records=_RECORDS, base=st.integers(0, 10**9))
def test_the_compiled_transcoder_writes_aiokafkas_bytes(records: list[Record], base: int) -> None:
    stored = build_batch(records, base_offset=base) + build_batch(records, base_offset=base + 50)
    compiled = to_kafka_batches(stored)
    saved = kafka_records._compiled
    kafka_records._compiled = None  # aiokafka's path
    try:
        assert to_kafka_batches(stored) == compiled
    finally:
        kafka_records._compiled = saved


def test_a_bad_crc_is_corrupt_message_and_a_transactional_batch_invalid() -> None:
    kafka = to_kafka_batches(build_batch([Record(b"v")]))
    broken = bytearray(kafka)
    broken[-1] ^= 0xFF
    with pytest.raises(CorruptRecordError):
        from_kafka_batches(bytes(broken))
    transactional = bytearray(kafka)
    transactional[22] |= 0x10  # attributes' transactional bit (CRC no longer matches either)
    with pytest.raises((CorruptRecordError, InvalidRecordError)):
        from_kafka_batches(bytes(transactional))


def test_a_trailing_partial_batch_is_dropped() -> None:
    stored = build_batch([Record(b"a")]) + build_batch([Record(b"b")], base_offset=1)[:-3]
    assert [r[3] for r in _kafka_records(to_kafka_batches(stored))] == [b"a"]


@pytest.mark.skipif(kafka_records._compiled is None, reason="the transcoder was not built")
@settings(max_examples=2000, deadline=None)
@given(
    records=_RECORDS, cut=st.integers(0, 400), flip=st.integers(0, 400), count=st.integers(0, 25)
)
def test_the_compiled_transcoder_takes_any_bytes_without_crashing(
    records: list[Record], cut: int, flip: int, count: int
) -> None:
    section = bytearray(build_batch(records)[61:])
    if section:
        section[flip % len(section)] ^= 0x5A
    assert kafka_records._compiled is not None
    result = kafka_records._compiled.to_kafka_section(bytes(section[:cut]), count)
    assert result is None or isinstance(result, bytes)


# Produce: Kafka batches as clients send them (aiokafka's builder), through the compiled
# transcoder and through aiokafka's reader, to the same stored bytes.
_WIDE_BYTES = st.one_of(
    st.none(),
    st.binary(max_size=40),
    st.sampled_from([b"x" * 255, b"y" * 256, b"z" * 65535, b"w" * 65536]),
)
_HEADER_KEYS = st.one_of(st.text(max_size=40), st.sampled_from(["k" * 255, "é" * 200, "h" * 70000]))
_KAFKA_RECORDS = st.lists(
    st.tuples(
        st.integers(-(2**40), 2**40),  # timestamp delta from the first record's (any sign)
        _WIDE_BYTES,
        _WIDE_BYTES,
        st.lists(st.tuples(_HEADER_KEYS, _WIDE_BYTES), max_size=3),
    ),
    min_size=1,
    max_size=20,
)


def _kafka_batch(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: Compression,
    first_timestamp: int,
) -> bytes:
    builder = DefaultRecordBatchBuilder(
        magic=2, compression_type=int(codec), is_transactional=0, producer_id=7,
        producer_epoch=1, base_sequence=3, batch_size=2**31 - 1,
    )  # fmt: skip
    for index, (delta, key, value, headers) in enumerate(records):
        timestamp = first_timestamp if index == 0 else first_timestamp + delta
        builder.append(index, timestamp, key, value, headers)
    return bytes(builder.build())


def _through_aiokafka(kafka: bytes) -> bytes:
    saved = kafka_records._compiled
    kafka_records._compiled = None
    try:
        return from_kafka_batches(kafka)
    finally:
        kafka_records._compiled = saved


@pytest.mark.skipif(kafka_records._compiled is None, reason="the transcoder was not built")
@settings(max_examples=200, deadline=None)
@given(
    records=_KAFKA_RECORDS,
    codec=st.sampled_from(list(Compression)),
    first_timestamp=st.integers(0, 2**42),
)
def test_produce_through_the_compiled_transcoder_stores_aiokafkas_bytes(
    records: list[tuple[int, bytes | None, bytes | None, list[tuple[str, bytes | None]]]],
    codec: Compression,
    first_timestamp: int,
) -> None:
    kafka = _kafka_batch(records, codec, first_timestamp)
    stored = from_kafka_batches(kafka)
    assert stored == _through_aiokafka(kafka)
    # and what is stored is what was sent: keys, values, headers, timestamps, the header
    (batch,) = decode_batches(stored)
    timestamps = [first_timestamp] + [first_timestamp + d for d, *_ in records[1:]]
    assert [(r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records] == [
        (ts, key, value, tuple(headers))
        for ts, (_, key, value, headers) in zip(timestamps, records, strict=True)
    ]
    assert batch.header.max_timestamp == max(timestamps)
    assert batch.header.compression == codec
    assert (batch.header.producer_id, batch.header.producer_epoch) == (7, 1)
    assert batch.header.base_sequence == 3


@pytest.mark.skipif(kafka_records._compiled is None, reason="the transcoder was not built")
@settings(max_examples=1000, deadline=None)
@given(
    records=_RECORDS,
    cut=st.integers(0, 400),
    flips=st.lists(st.tuples(st.integers(0, 400), st.integers(1, 255)), max_size=3),
    count=st.one_of(st.none(), st.integers(0, 25)),
)
def test_the_compiled_produce_transcoder_converts_only_what_aiokafka_reads_alike(
    records: list[Record], cut: int, flips: list[tuple[int, int]], count: int | None
) -> None:
    """Any bytes: no crash, and wherever the compiled path converts a section, aiokafka's
    reader converts it to the same entries (else the compiled path must give it back)."""
    kafka = _kafka_batch(
        [(0, r.key, r.value, list(r.headers)) for r in records], Compression.NONE, 1000
    )
    section = bytearray(kafka[61:])
    for at, mask in flips:
        if section:
            section[at % len(section)] ^= mask
    section = section[:cut] if cut < len(section) else section
    count = len(records) if count is None else count  # None: the records' own count
    assert kafka_records._compiled is not None
    result = kafka_records._compiled.from_kafka_section(bytes(section), count)
    if result is None:
        return
    packed, max_delta = result
    reference = []
    for record in DefaultRecordBatch(_batch_around(bytes(section), count)):
        reference.append(
            [record.timestamp - 1000, record.offset, record.key, record.value,
             [[k, v] for k, v in record.headers]]
        )  # fmt: skip
    assert packed == msgpack.packb(reference, use_bin_type=True)
    assert max_delta == max(entry[0] for entry in reference)


def _batch_around(section: bytes, count: int) -> bytes:
    """An uncompressed v2 batch (base offset 0, first timestamp 1000) holding `section`."""
    tail = struct.pack(">hiqqqhii", 0, max(count - 1, 0), 1000, 1000, -1, -1, -1, count)
    return struct.pack(">qii", 0, 49 + len(section), 0) + b"\x02" + b"\0" * 4 + tail + section


def _varint(value: int) -> bytes:
    zigzag = (value << 1) ^ (value >> 63)
    zigzag &= 2**64 - 1
    out = bytearray()
    while zigzag >= 0x80:
        out.append((zigzag & 0x7F) | 0x80)
        zigzag >>= 7
    return bytes(out) + bytes([zigzag])


def _field(data: bytes | None, length_skew: int = 0) -> bytes:
    return _varint(-1) if data is None else _varint(len(data) + length_skew) + data


_ODD = st.sampled_from([0, 0, 0, 0, -1, 1, -2])  # mostly honest, sometimes off
_HAND_MADE = st.lists(
    st.fixed_dictionaries(
        {
            "attributes": st.sampled_from([0, 0, 0, 1, 0x80]),
            "ts": st.integers(-(2**63), 2**63 - 1) | st.integers(-300, 300),
            "offset": st.integers(-(2**31), 2**31 - 1) | st.integers(0, 300),
            "key": _BYTES,
            "key_skew": _ODD,
            "value": _BYTES,
            "headers": st.lists(
                st.tuples(st.one_of(st.none(), st.binary(max_size=6)), _BYTES), max_size=2
            ),
            "header_count_skew": _ODD,
            "trailing": st.sampled_from([b"", b"", b"", b"\0"]),
            "length_skew": _ODD,
        }
    ),
    min_size=1,
    max_size=6,
)


def _hand_made_record(r: dict[str, Any]) -> bytes:
    body = bytes([r["attributes"]]) if r["attributes"] < 0x80 else b"\x80\x01"
    body += _varint(r["ts"]) + _varint(r["offset"])
    body += _field(r["key"], r["key_skew"]) + _field(r["value"])
    body += _varint(len(r["headers"]) + r["header_count_skew"])
    for key, value in r["headers"]:
        body += _field(key) + _field(value)
    body += r["trailing"]
    return _varint(len(body) + r["length_skew"]) + body


def _int64(value: int) -> int:
    return (value + (1 << 63)) % (1 << 64) - (1 << 63)


@pytest.mark.skipif(kafka_records._compiled is None, reason="the transcoder was not built")
@settings(max_examples=2000, deadline=None)
@given(records=_HAND_MADE, count_skew=_ODD)
def test_the_compiled_produce_transcoder_agrees_with_aiokafka_on_odd_records(
    records: list[dict[str, Any]], count_skew: int
) -> None:
    """Records written by hand, some a little wrong (attributes, lengths, counts, trailing
    bytes, null or non-UTF-8 header keys, extreme deltas): the compiled path converts a
    section only where aiokafka's reader reads the same entries from it."""
    section = b"".join(_hand_made_record(r) for r in records)
    count = len(records) + count_skew
    assert kafka_records._compiled is not None
    result = kafka_records._compiled.from_kafka_section(section, count)
    honest = all(
        r["attributes"] == 0 and r["key_skew"] == r["header_count_skew"] == r["length_skew"] == 0
        and r["trailing"] == b"" and all(k is not None for k, _ in r["headers"])
        for r in records
    ) and count_skew == 0  # fmt: skip
    if result is None:
        valid_keys = True
        for r in records:
            for key, _ in r["headers"]:
                try:
                    (key or b"").decode()
                except UnicodeDecodeError:
                    valid_keys = False
        assert not (honest and valid_keys), "an honest section must take the compiled path"
        return
    packed, max_delta = result
    # The delta as sent: aiokafka adds it to the first timestamp in int64 (wrapping, as Kafka's
    # Java does), so undo that sum the same way.
    reference = [
        [_int64(record.timestamp - 1000), record.offset, record.key, record.value,
         [[k, v] for k, v in record.headers]]
        for record in DefaultRecordBatch(_batch_around(section, count))
    ]  # fmt: skip
    assert packed == msgpack.packb(reference, use_bin_type=True)
    assert max_delta == max(entry[0] for entry in reference)
