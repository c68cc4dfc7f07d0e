"""Kafka v2 batches to and from Highwater's (protocol/kafka/records.py): records survive both
ways unchanged, the compiled Fetch transcoder writes exactly aiokafka's bytes, and bad
Kafka batches are refused with Kafka's errors."""

from __future__ import annotations

from typing import Any

import pytest
from aiokafka.record.default_records import DefaultRecordBatch
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
