"""Record batches: build/decode round trips, leader stamping, and every kind of damage."""

from __future__ import annotations

import struct
from typing import Any

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from protocol.compression import Compression, compress
from protocol.errors import (
    CorruptRecordError,
    ErrorCode,
    HighwaterError,
    InvalidRecordError,
)
from protocol.records import (
    BATCH_HEADER_BYTES,
    LOG_OVERHEAD_BYTES,
    MAGIC_V2,
    NO_PARTITION_LEADER_EPOCH,
    NO_PRODUCER_EPOCH,
    NO_PRODUCER_ID,
    NO_SEQUENCE,
    Record,
    RecordBatch,
    TimestampType,
    build_batch,
    build_batch_from_entries,
    crc32c,
    decode_batch,
    decode_batch_entries,
    decode_batches,
    decode_batches_entries,
    iter_batch_headers,
    next_offset_after_whole_batches,
    read_header,
    stamp_prefix,
    validate_batch,
)
from tests.unit.protocol.strategies import FAST, THOROUGH, flip_bit, recompute_crc

CORRUPT_MESSAGE = 2
INVALID_RECORD = 87
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
T = 1_700_000_000_000

CODECS = st.sampled_from(list(Compression))
INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TIMESTAMPS = st.integers(0, 2**62) | st.just(-1)
NOW_MS = 1_700_000_000_000

RECORDS = st.builds(
    Record,
    value=st.none() | st.binary(max_size=20),
    key=st.none() | st.binary(max_size=10),
    timestamp_ms=TIMESTAMPS,
    headers=st.lists(
        st.tuples(st.text(max_size=5), st.none() | st.binary(max_size=5)), max_size=3
    ).map(tuple),
)
RECORD_LISTS = st.lists(RECORDS, min_size=1, max_size=5)


def _expected_records(records: list[Record], base_offset: int, now_ms: int) -> list[Record]:
    return [
        Record(
            value=r.value,
            key=r.key,
            timestamp_ms=r.timestamp_ms if r.timestamp_ms >= 0 else now_ms,
            headers=r.headers,
            offset=base_offset + i,
        )
        for i, r in enumerate(records)
    ]


def _batch(n: int = 3, **kwargs: Any) -> bytes:
    records = [
        Record(f"v{i}".encode(), key=f"k{i}".encode(), timestamp_ms=1000 + i) for i in range(n)
    ]
    return build_batch(records, now_ms=NOW_MS, **kwargs)


def _with_section(section: bytes, record_count: int = 1, codec: int = 0) -> bytes:
    """A batch whose records section is `section`, with consistent lengths and a valid CRC."""
    out = bytearray(_batch(record_count)[:BATCH_HEADER_BYTES] + section)
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD_BYTES)
    struct.pack_into(">h", out, 21, codec)
    return recompute_crc(out)


# ---------------------------------------------------------------------------------------------
# Round trips.


@THOROUGH
@given(
    records=RECORD_LISTS,
    codec=CODECS,
    producer_id=INT64,
    producer_epoch=INT16,
    base_sequence=INT32,
    base_offset=st.integers(0, 2**62),
    partition_leader_epoch=INT32,
)
def test_build_then_decode_round_trips(
    records: list[Record],
    codec: Compression,
    producer_id: int,
    producer_epoch: int,
    base_sequence: int,
    base_offset: int,
    partition_leader_epoch: int,
) -> None:
    batch = build_batch(
        records,
        compression=codec,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        base_offset=base_offset,
        partition_leader_epoch=partition_leader_epoch,
        now_ms=NOW_MS,
    )
    expected = _expected_records(records, base_offset, NOW_MS)
    timestamps = [r.timestamp_ms for r in expected]

    header = read_header(batch)
    assert header.base_offset == base_offset
    assert header.batch_length == len(batch) - LOG_OVERHEAD_BYTES
    assert header.size == len(batch)
    assert header.partition_leader_epoch == partition_leader_epoch
    assert header.magic == MAGIC_V2
    assert header.crc == crc32c(batch[21:])
    assert header.attributes == int(codec)
    assert header.compression == int(codec)
    assert header.timestamp_type == TimestampType.CREATE_TIME
    assert header.last_offset_delta == len(records) - 1
    assert header.record_count == len(records)
    assert header.base_timestamp == timestamps[0]
    assert header.max_timestamp == max(timestamps)
    assert header.producer_id == producer_id
    assert header.producer_epoch == producer_epoch
    assert header.base_sequence == base_sequence
    assert header.last_offset == base_offset + len(records) - 1
    assert header.next_offset == base_offset + len(records)

    decoded = decode_batch(batch)
    assert isinstance(decoded, RecordBatch)
    assert decoded.header == header
    assert list(decoded.records) == expected
    assert list(iter_batch_headers(batch)) == [(0, header)]
    assert [b.records for b in decode_batches(batch)] == [decoded.records]


def test_build_batch_defaults_are_kafkas_non_idempotent_values() -> None:
    header = read_header(build_batch([Record(b"v")], now_ms=NOW_MS))
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (
        NO_PRODUCER_ID,
        NO_PRODUCER_EPOCH,
        NO_SEQUENCE,
    )
    assert (NO_PRODUCER_ID, NO_PRODUCER_EPOCH, NO_SEQUENCE) == (-1, -1, -1)
    assert header.partition_leader_epoch == NO_PARTITION_LEADER_EPOCH == -1
    assert header.base_offset == 0
    assert header.base_timestamp == header.max_timestamp == NOW_MS  # timestamp -1: now
    assert header.last_sequence == NO_SEQUENCE


def test_first_records_timestamp_is_the_base_even_when_later_ones_are_smaller() -> None:
    records = [Record(b"a", timestamp_ms=500), Record(b"b", timestamp_ms=100), Record(b"c")]
    batch = build_batch(records, now_ms=900)
    header = read_header(batch)
    assert header.base_timestamp == 500
    assert header.max_timestamp == 900
    assert [r.timestamp_ms for r in decode_batch(batch).records] == [500, 100, 900]


def test_last_sequence_wraps_like_kafka() -> None:
    batch = build_batch([Record(b"a"), Record(b"b"), Record(b"c")], base_sequence=2**31 - 2)
    assert read_header(batch).last_sequence == 0
    assert read_header(_batch(3, base_sequence=10)).last_sequence == 12


def test_empty_batch_cannot_be_built() -> None:
    with pytest.raises(ValueError, match="at least one record"):
        build_batch([])


def test_decode_batch_at_an_offset_into_a_buffer() -> None:
    first, second = _batch(2), _batch(4)
    decoded = decode_batch(first + second, len(first))
    assert decoded.header.record_count == 4
    assert [r.value for r in decoded.records] == [b"v0", b"v1", b"v2", b"v3"]


# ---------------------------------------------------------------------------------------------
# The leader stamps base offset and epoch without touching the CRC.


@THOROUGH
@given(
    records=RECORD_LISTS,
    codec=CODECS,
    new_base_offset=st.integers(0, 2**62),
    epoch=INT32,
)
def test_stamped_prefix_keeps_the_crc_valid_and_shifts_offsets(
    records: list[Record], codec: Compression, new_base_offset: int, epoch: int
) -> None:
    batch = build_batch(records, compression=codec, now_ms=NOW_MS)
    batch_length = len(batch) - LOG_OVERHEAD_BYTES
    prefix = stamp_prefix(new_base_offset, batch_length, epoch)
    assert len(prefix) == 16
    stamped = prefix + batch[16:]

    header = read_header(stamped)
    validate_batch(stamped, 0, header)
    assert header.crc == read_header(batch).crc
    assert header.base_offset == new_base_offset
    assert header.partition_leader_epoch == epoch
    decoded = decode_batch(stamped)
    assert [r.offset for r in decoded.records] == [new_base_offset + i for i in range(len(records))]
    assert list(decoded.records) == _expected_records(records, new_base_offset, NOW_MS)


def test_stamp_prefix_is_the_first_16_bytes_of_a_built_batch() -> None:
    batch = _batch(2, base_offset=123456789, partition_leader_epoch=7)
    assert stamp_prefix(123456789, len(batch) - LOG_OVERHEAD_BYTES, 7) == batch[:16]


# ---------------------------------------------------------------------------------------------
# Damage.


@FAST
@given(records=RECORD_LISTS, codec=CODECS, data=st.data())
def test_any_single_bit_flip_after_byte_17_is_a_crc_error(
    records: list[Record], codec: Compression, data: st.DataObject
) -> None:
    batch = build_batch(records, compression=codec, now_ms=NOW_MS)
    index = data.draw(st.integers(17, len(batch) - 1))  # the CRC itself and everything it covers
    damaged = flip_bit(batch, index, data.draw(st.integers(0, 7)))
    for call in (
        lambda: decode_batch(damaged),
        lambda: validate_batch(damaged, 0, read_header(damaged)),
        lambda: list(iter_batch_headers(damaged)),
        lambda: list(decode_batches(damaged)),
    ):
        with pytest.raises(CorruptRecordError, match="CRC-32C") as info:
            call()
        assert info.value.code == CORRUPT_MESSAGE
        assert info.value.code is ErrorCode.CORRUPT_MESSAGE


def test_every_bit_of_a_small_batch_is_covered_by_the_crc() -> None:
    batch = _batch(2, compression=Compression.GZIP)
    for index in range(21, len(batch)):
        for bit in range(8):
            with pytest.raises(CorruptRecordError, match="CRC-32C"):
                decode_batch(flip_bit(batch, index, bit))


@pytest.mark.parametrize("index", [*range(8), *range(12, 16)])
def test_base_offset_and_epoch_bytes_are_outside_the_crc(index: int) -> None:
    batch = _batch(2)
    restamped = flip_bit(batch, index, 0)
    decode_batch(restamped)  # no error: the leader may rewrite these bytes
    assert restamped[21:] == batch[21:]


@pytest.mark.parametrize("magic", [0, 1, 3, 255])
def test_bad_magic_is_corrupt(magic: int) -> None:
    damaged = bytearray(_batch())
    damaged[16] = magic
    for call in (
        lambda: read_header(damaged),
        lambda: decode_batch(damaged),
        lambda: list(iter_batch_headers(damaged)),
        lambda: list(iter_batch_headers(damaged, check_crc=False)),
    ):
        with pytest.raises(CorruptRecordError, match="magic") as info:
            call()
        assert info.value.code == CORRUPT_MESSAGE


def test_every_truncation_is_corrupt() -> None:
    batch = _batch(3, compression=Compression.ZSTD)
    for cut in range(len(batch)):
        with pytest.raises(CorruptRecordError) as info:
            decode_batch(batch[:cut])
        assert info.value.code == CORRUPT_MESSAGE
        if cut:  # an empty buffer holds no batches at all
            with pytest.raises(CorruptRecordError):
                list(iter_batch_headers(batch[:cut], check_crc=False))


@pytest.mark.parametrize("batch_length", [-1, 0, 48, -(2**31)])
def test_batch_length_too_small_for_a_header_is_corrupt(batch_length: int) -> None:
    damaged = bytearray(_batch())
    struct.pack_into(">i", damaged, 8, batch_length)
    with pytest.raises(CorruptRecordError, match="batch_length") as info:
        read_header(damaged)
    assert info.value.code == CORRUPT_MESSAGE


@pytest.mark.parametrize(
    ("last_offset_delta", "record_count"),
    [(2, 4), (1, 3), (-1, 0), (-2, 0), (2, -3), (2**31 - 1, -(2**31))],
)
def test_record_count_inconsistent_with_last_offset_delta_is_invalid(
    last_offset_delta: int, record_count: int
) -> None:
    damaged = bytearray(_batch(3))
    struct.pack_into(">i", damaged, 23, last_offset_delta)
    struct.pack_into(">i", damaged, 57, record_count)
    damaged_with_crc = recompute_crc(damaged)
    header = read_header(damaged_with_crc)
    assert header.crc == crc32c(damaged_with_crc[21:])  # only the counts are wrong
    for call in (
        lambda: decode_batch(damaged_with_crc),
        lambda: validate_batch(damaged_with_crc, 0, header),
        lambda: list(iter_batch_headers(damaged_with_crc)),
    ):
        with pytest.raises(InvalidRecordError, match="record_count") as info:
            call()
        assert info.value.code == INVALID_RECORD
        assert info.value.code is ErrorCode.INVALID_RECORD
        assert not isinstance(info.value, CorruptRecordError)


def test_a_cleaned_batch_has_gaps_and_keeps_its_offsets() -> None:
    """Kafka's v2 batches after compaction: fewer records than last_offset_delta + 1, each
    at its own offset delta, strictly increasing."""
    entries = [(0, 1, b"a", b"1", ()), (5, 3, b"b", b"2", ())]
    batch = build_batch_from_entries(
        entries, base_timestamp=T, max_timestamp=T + 5, base_offset=10, last_offset_delta=4
    )
    decoded = decode_batch(batch)
    assert (decoded.header.record_count, decoded.header.next_offset) == (2, 15)
    assert [(r.offset, r.key) for r in decoded.records] == [(11, b"a"), (13, b"b")]

    backwards = [(0, 3, b"a", b"1", ()), (5, 1, b"b", b"2", ())]
    bad = build_batch_from_entries(
        backwards, base_timestamp=T, max_timestamp=T + 5, base_offset=10, last_offset_delta=4
    )
    with pytest.raises(CorruptRecordError, match="not above the previous"):
        decode_batch(bad)


def test_an_emptied_batch_keeps_its_offsets_and_producer_fields_without_records() -> None:
    """Kafka's BatchRetention.RETAIN_EMPTY: the cleaner keeps a producer's last batch as its
    header alone, record_count 0 with its last_offset_delta; every reader takes it, the
    good path (iter_plain_sections) as the checked one, and yields no record."""
    empty = build_batch_from_entries(
        (), base_timestamp=T, max_timestamp=T, producer_id=8, producer_epoch=2,
        base_sequence=40, base_offset=10, partition_leader_epoch=3, last_offset_delta=4,
    )  # fmt: skip
    header = read_header(empty)
    validate_batch(empty, 0, header)
    assert (header.record_count, header.next_offset, header.last_sequence) == (0, 15, 44)
    assert decode_batch(empty).records == ()
    buf = _batch(1, base_offset=9) + empty + _batch(2, base_offset=15)
    assert [h.next_offset for _, h in iter_batch_headers(buf)] == [10, 15, 17]
    assert [len(b.records) for b in decode_batches(buf)] == [1, 0, 2]
    assert _entries_fast(buf) == _entries_one_by_one(buf)
    assert [len(entries) for _, entries in _entries_fast(buf)] == [1, 0, 2]
    assert next_offset_after_whole_batches(buf[: len(buf) - 1]) == 15


def test_header_counts_that_agree_but_differ_from_the_records_section_are_corrupt() -> None:
    damaged = bytearray(_batch(3))
    struct.pack_into(">i", damaged, 23, 3)
    struct.pack_into(">i", damaged, 57, 4)
    with pytest.raises(CorruptRecordError, match="does not hold 4 records"):
        decode_batch(recompute_crc(damaged))


def _record(*fields: Any) -> bytes:
    packed: bytes = msgpack.packb([list(fields)], use_bin_type=True)
    return packed


GARBAGE_SECTIONS = {
    "empty": b"",
    "nil": b"\xc0",
    "empty-array": b"\x90",
    "map": b"\x80",
    "record-is-nil": b"\x91\xc0",
    "record-is-map": b"\x91\x80",
    "record-of-4": _record(0, 0, None, None),
    "record-of-6": _record(0, 0, None, None, [], 1),
    "float-delta": _record(0.5, 0, None, None, []),
    "str-offset-delta": _record(0, "0", None, None, []),
    "offset-delta-out-of-range": _record(0, 1, None, None, []),
    "negative-offset-delta": _record(0, -1, None, None, []),
    "str-key": _record(0, 0, "k", None, []),
    "int-value": _record(0, 0, None, 5, []),
    "headers-not-array": _record(0, 0, None, None, None),
    "header-not-pair": _record(0, 0, None, None, [["k"]]),
    "header-bin-key": _record(0, 0, None, None, [[b"k", None]]),
    "header-str-value": _record(0, 0, None, None, [["k", "v"]]),
    "truncated": _record(0, 0, b"key", b"value", [])[:-3],
    "trailing": _record(0, 0, None, None, []) + b"\xc0",
    "invalid-utf8": b"\x91\x95\x00\x00\xc0\xc0\x91\x92\xa1\xff\xc0",
    "ext": b"\x91\xc7\x00\x05",
    "empty-timestamp-ext": b"\x91\xc7\x00\xff",
    "huge-array": b"\xdd\xff\xff\xff\xff",
    "huge-bin": b"\x91\x95\x00\x00\xc6\xff\xff\xff\xff",
    "deep": b"\x91" * 5000 + b"\xc0",
}


@pytest.mark.parametrize("section", GARBAGE_SECTIONS.values(), ids=GARBAGE_SECTIONS.keys())
def test_garbage_records_section_with_a_valid_crc_is_corrupt(section: bytes) -> None:
    batch = _with_section(section)
    validate_batch(batch, 0, read_header(batch))  # the envelope is fine
    with pytest.raises(CorruptRecordError) as info:
        decode_batch(batch)
    assert info.value.code == CORRUPT_MESSAGE


def test_well_formed_handmade_section_decodes() -> None:
    # The counterpart of the garbage cases: the same construction with a valid record works.
    batch = _with_section(_record(5, 0, b"k", None, [["h", None]]))
    (record,) = decode_batch(batch).records
    assert record == Record(
        value=None, key=b"k", timestamp_ms=1005, headers=(("h", None),), offset=0
    )


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
@pytest.mark.parametrize("payload", [b"", b"garbage", b"\x1f\x8b\x08\x00", b"\x28\xb5\x2f\xfd"])
def test_garbage_compressed_section_with_a_valid_crc_is_corrupt(
    codec: Compression, payload: bytes
) -> None:
    with pytest.raises(CorruptRecordError) as info:
        decode_batch(_with_section(payload, codec=codec))
    assert info.value.code == CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_compressed_garbage_records_are_corrupt(codec: Compression) -> None:
    # Decompresses fine, but what comes out is not a records array.
    with pytest.raises(CorruptRecordError, match="records section"):
        decode_batch(_with_section(compress(codec, b"\x92\xc0"), codec=codec))


@THOROUGH
@given(section=st.binary(max_size=64), codec=CODECS, record_count=st.integers(1, 3))
def test_random_records_section_only_raises_corrupt_record(
    section: bytes, codec: Compression, record_count: int
) -> None:
    batch = _with_section(section, record_count, codec)
    try:
        decoded = decode_batch(batch)
    except CorruptRecordError as err:
        assert err.code == CORRUPT_MESSAGE
    else:  # astronomically unlikely, but then it must be a coherent batch
        assert len(decoded.records) == record_count


@pytest.mark.parametrize("codec", [5, 6, 7])
def test_unsupported_codec_in_attributes(codec: int) -> None:
    batch = _with_section(b"\x90", codec=codec)
    assert read_header(batch).compression == codec
    with pytest.raises(HighwaterError) as info:
        decode_batch(batch)
    assert info.value.code == 43
    assert info.value.code is ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT


@pytest.mark.parametrize("codec", [c for c in Compression if c is not Compression.NONE])
def test_decode_batch_bounds_decompression(codec: Compression) -> None:
    batch = build_batch([Record(b"\x00" * 100_000)], compression=codec, now_ms=NOW_MS)
    assert len(batch) < 10_000  # snappy squeezes least: about 21 to 1
    assert decode_batch(batch, max_decompressed_bytes=200_000).records[0].value == b"\x00" * 100_000
    with pytest.raises(CorruptRecordError) as info:
        decode_batch(batch, max_decompressed_bytes=10_000)
    assert info.value.code == CORRUPT_MESSAGE


# ---------------------------------------------------------------------------------------------
# Many batches in one buffer.


def _concat(sizes: list[int]) -> tuple[bytes, list[int]]:
    buf = b""
    positions = []
    offset = 0
    for n in sizes:
        positions.append(len(buf))
        batch = _batch(n)
        buf += stamp_prefix(offset, len(batch) - LOG_OVERHEAD_BYTES, 1) + batch[16:]
        offset += n
    return buf, positions


@FAST
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=5))
def test_iter_batch_headers_yields_every_position(sizes: list[int]) -> None:
    buf, positions = _concat(sizes)
    for check_crc in (True, False):
        found = list(iter_batch_headers(buf, check_crc=check_crc))
        assert [pos for pos, _ in found] == positions
        assert [h for _, h in found] == [read_header(buf, p) for p in positions]
        assert [h.record_count for _, h in found] == sizes
        assert [h.base_offset for _, h in found] == [sum(sizes[:i]) for i in range(len(sizes))]
    decoded = list(decode_batches(buf))
    assert [r.offset for b in decoded for r in b.records] == list(range(sum(sizes)))


@FAST
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=5), data=st.data())
def test_iter_batch_headers_raises_at_the_first_bad_batch(
    sizes: list[int], data: st.DataObject
) -> None:
    buf, positions = _concat(sizes)
    bad = data.draw(st.integers(0, len(sizes) - 1))
    damaged = flip_bit(buf, positions[bad] + data.draw(st.integers(21, 60)), 3)
    seen = []
    with pytest.raises(CorruptRecordError) as info:
        for pos, _ in iter_batch_headers(damaged):
            seen.append(pos)
    assert seen == positions[:bad]
    assert f"batch at byte {positions[bad]}:" in info.value.message


def test_iter_batch_headers_reports_trailing_garbage_at_its_position() -> None:
    buf, positions = _concat([1, 2])
    for tail in (b"\x00", b"\x00" * 60, b"\xff" * 61):
        seen = []
        with pytest.raises(CorruptRecordError) as info:
            for pos, _ in iter_batch_headers(buf + tail):
                seen.append(pos)
        assert seen == positions
        assert f"batch at byte {len(buf)}" in info.value.message


def test_iter_batch_headers_without_crc_check_still_finds_truncation() -> None:
    buf, positions = _concat([1, 2])
    seen = []
    with pytest.raises(CorruptRecordError, match=f"batch at byte {positions[1]} is truncated"):
        for pos, _ in iter_batch_headers(buf[:-1], check_crc=False):
            seen.append(pos)
    assert seen == positions[:1]


def test_iter_batch_headers_of_nothing_is_nothing() -> None:
    assert list(iter_batch_headers(b"")) == []
    assert list(decode_batches(b"")) == []


@FAST
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_decode_batches_skips_a_partial_trailing_batch(
    sizes: list[int], data: st.DataObject
) -> None:
    buf, positions = _concat(sizes)
    last = positions[-1]
    cut = data.draw(st.integers(last, len(buf) - 1))  # anywhere inside the last batch
    decoded = list(decode_batches(buf[:cut]))
    assert [b.header.record_count for b in decoded] == sizes[:-1]
    assert [b.header.base_offset for b in decoded] == [
        sum(sizes[:i]) for i in range(len(sizes) - 1)
    ]
    assert [b.header.record_count for b in decode_batches(buf)] == sizes


@FAST
@given(sizes=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data())
def test_next_offset_after_whole_batches_agrees_with_decoding(
    sizes: list[int], data: st.DataObject
) -> None:
    """The fetch-ahead hint: the offset after the last whole batch of any prefix of a fetch
    response, read from headers alone, is where decoding that prefix ends (-1: none whole)."""
    buf, _ = _concat(sizes)
    cut = data.draw(st.integers(0, len(buf)))
    decoded = list(decode_batches(buf[:cut]))
    expected = decoded[-1].header.next_offset if decoded else -1
    assert next_offset_after_whole_batches(buf[:cut]) == expected


def test_next_offset_after_whole_batches_stops_at_a_nonsense_length() -> None:
    buf, positions = _concat([2, 3])
    bad = bytearray(buf)
    bad[positions[1] + 8 : positions[1] + 12] = (-1).to_bytes(4, "big", signed=True)
    assert next_offset_after_whole_batches(bytes(bad)) == 2


def test_decode_batches_raises_on_a_corrupt_complete_batch() -> None:
    buf, positions = _concat([1, 2, 3])
    damaged = flip_bit(buf, positions[1] + 40, 0)
    batches = decode_batches(damaged)
    assert next(batches).header.record_count == 1
    with pytest.raises(CorruptRecordError, match=f"batch at byte {positions[1]}"):
        next(batches)


def test_decode_batches_rejects_a_negative_batch_length() -> None:
    buf, _ = _concat([1])
    with pytest.raises(CorruptRecordError):
        list(decode_batches(buf + struct.pack(">qi", 5, -100) + b"\x00" * 100))


def _entries_one_by_one(buf: bytes) -> list[Any]:
    """The reference for decode_batches_entries' inlined good path: each whole batch through
    decode_batch_entries, stopping at the first error (kept as its type and message)."""
    out: list[Any] = []
    pos = 0
    while len(buf) - pos >= LOG_OVERHEAD_BYTES:
        batch_length = struct.unpack_from(">i", buf, pos + 8)[0]
        if pos + LOG_OVERHEAD_BYTES + batch_length > len(buf):
            break
        try:
            out.append(decode_batch_entries(buf, pos))
        except Exception as exc:
            out.append((type(exc), str(exc)))
            break
        pos += LOG_OVERHEAD_BYTES + batch_length
    return out


def _entries_fast(buf: bytes) -> list[Any]:
    out: list[Any] = []
    try:
        out.extend(decode_batches_entries(buf))
    except Exception as exc:
        out.append((type(exc), str(exc)))
    return out


@THOROUGH
@given(
    batches=st.lists(st.tuples(RECORD_LISTS, CODECS), min_size=1, max_size=4),
    flips=st.integers(0, 3),
    fix_crc=st.booleans(),
    cut=st.none() | st.integers(0, 10**6),
    data=st.data(),
)
def test_decode_batches_entries_matches_decoding_batch_by_batch(
    batches: list[tuple[list[Record], Compression]],
    flips: int,
    fix_crc: bool,
    cut: int | None,
    data: st.DataObject,
) -> None:
    """The inlined good path (uncompressed batches, records section unpacked in place) yields
    exactly what decode_batch_entries gives batch by batch, and on damaged input (bit flips
    anywhere, with the CRC made to match or not, and a cut tail) the same error, at the same
    batch."""
    buf = b""
    for records, codec in batches:
        batch = build_batch(records, now_ms=NOW_MS, compression=codec)
        for _ in range(flips):
            batch = flip_bit(
                batch, data.draw(st.integers(0, len(batch) - 1)), data.draw(st.integers(0, 7))
            )
        if flips and fix_crc:
            batch = recompute_crc(batch)
        buf += batch
    if cut is not None:
        buf = buf[: cut % (len(buf) + 1)]
    assert _entries_fast(buf) == _entries_one_by_one(buf)


@pytest.mark.parametrize(
    ("records", "record_count", "last_offset_delta"),
    [(2, 2, 1), (2, 1, 1), (2, 3, 2), (2, 0, -1), (2, 2, 0), (0, 0, -1)],
)
def test_decode_batches_entries_checks_header_counts_like_decode_batch_entries(
    records: int, record_count: int, last_offset_delta: int
) -> None:
    """Counts in the header that disagree with each other or with the records section, or
    an empty batch: the same outcome as decoding that batch alone."""
    section = msgpack.packb([[0, i, None, b"v", []] for i in range(records)])
    batch = bytearray(_with_section(section, record_count=2))
    struct.pack_into(">i", batch, 23, last_offset_delta)
    struct.pack_into(">i", batch, 57, record_count)
    buf = _batch(1) + recompute_crc(batch)
    assert _entries_fast(buf) == _entries_one_by_one(buf)
