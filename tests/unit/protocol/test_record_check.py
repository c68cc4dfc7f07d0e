"""The leader's records check: nothing a consumer cannot decode gets past it, and a producer's
batch whose records disagree with its header is refused with a message naming the fault."""

from __future__ import annotations

import gzip
import struct
from typing import Any

import msgpack
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from protocol.compression import MAX_DECOMPRESSED_BYTES, Compression, compress
from protocol.errors import CorruptRecordError, HighwaterError, InvalidRecordError
from protocol.record_check import check_records
from protocol.records import (
    BATCH_HEADER_BYTES,
    LOG_OVERHEAD_BYTES,
    Record,
    build_batch,
    build_batch_from_entries,
    decode_batch,
    read_header,
)
from tests.unit.protocol.strategies import THOROUGH, recompute_crc

BASE_TS = 1_700_000_000_000
BIG = 1 << 20


def with_section(
    section: bytes, count: int = 1, codec: int = 0, max_timestamp: int = BASE_TS
) -> bytes:
    """A batch whose records section is `section` (as sent: compressed when `codec` says so),
    with coherent header counts, base timestamp BASE_TS and a valid CRC."""
    head = bytearray(
        build_batch_from_entries([[0, 0, None, None, []]], base_timestamp=0, max_timestamp=0)[
            :BATCH_HEADER_BYTES
        ]
    )
    out = head + section
    struct.pack_into(">i", out, 8, len(out) - LOG_OVERHEAD_BYTES)
    struct.pack_into(">h", out, 21, codec)
    struct.pack_into(">i", out, 23, count - 1)
    struct.pack_into(">q", out, 27, BASE_TS)
    struct.pack_into(">q", out, 35, max_timestamp)
    struct.pack_into(">i", out, 57, count)
    return recompute_crc(out)


def check(batch: bytes, max_record_bytes: int = BIG) -> None:
    check_records(batch, 0, read_header(batch), max_record_bytes=max_record_bytes)


def verdict(batch: bytes, max_record_bytes: int = BIG) -> tuple[type, str] | None:
    try:
        check(batch, max_record_bytes)
    except HighwaterError as exc:
        return type(exc), str(exc)
    return None


def packed(entries: list[Any]) -> bytes:
    out: bytes = msgpack.packb(entries, use_bin_type=True)
    return out


def test_batches_the_clients_build_pass_in_every_codec() -> None:
    records = [
        Record(
            b"v" * i, key=None if i % 2 else b"k", timestamp_ms=BASE_TS - i, headers=(("h", None),)
        )
        for i in range(300)
    ]
    for codec in Compression.NONE, Compression.GZIP, Compression.ZSTD:
        batch = build_batch(records, compression=codec)
        check(batch)
        check(batch, max_record_bytes=500)  # decoded in pieces: the same verdict
        check_records(memoryview(b"x" * 7 + batch), 7, read_header(batch, 0), max_record_bytes=BIG)


REFUSED: dict[str, tuple[bytes, type, str]] = {
    # The cases: valid CRC, gzip flag, non-gzip body; garbage msgpack.
    "gzip flag, plain body": (
        with_section(packed([[0, 0, None, b"v", []]]), codec=Compression.GZIP),
        CorruptRecordError,
        "cannot decompress GZIP",
    ),
    "zstd flag, gzip body": (
        with_section(gzip.compress(packed([[0, 0, None, b"v", []]])), codec=Compression.ZSTD),
        CorruptRecordError,
        "cannot decompress ZSTD",
    ),
    "garbage msgpack": (with_section(b"\xc1" * 8), CorruptRecordError, "does not decode"),
    "a map": (with_section(b"\x81\xa1k\xc0" + b"\x00" * 4), CorruptRecordError, "does not decode"),
    "not an array": (with_section(b"\xa6abcdef"), CorruptRecordError, "not an array"),
    "fewer records than the header": (
        with_section(packed([[0, 0, None, None, []]]), count=2, max_timestamp=BASE_TS),
        CorruptRecordError,
        "cannot fit",
    ),
    "more records than the header": (
        with_section(packed([[0, 0, None, None, []], [0, 1, None, None, []]])),
        CorruptRecordError,
        "record_count 1",
    ),
    "a record of 4": (with_section(packed([[0, 0, None, b"vv"]])), CorruptRecordError, "of 5"),
    "a str value": (with_section(packed([[0, 0, None, "v", []]])), CorruptRecordError, "bin"),
    "a float delta": (with_section(packed([[0.0, 0, None, b"", []]])), CorruptRecordError, "int"),
    "a bool offset delta": (
        with_section(packed([[0, False, None, b"", []]])),
        CorruptRecordError,
        "integers",
    ),
    "a bad header": (
        with_section(packed([[0, 0, None, None, [["k", "v"]]]])),
        CorruptRecordError,
        "headers",
    ),
    "trailing bytes": (
        with_section(packed([[0, 0, None, None, []]]) + b"\xc0"),
        CorruptRecordError,
        "1 bytes after the last record",
    ),
    "invalid UTF-8 in a header key": (
        with_section(b"\x91\x95\x00\x00\xc0\xc0\x91\x92\xa1\xff\xc0"),
        CorruptRecordError,
        "does not decode",
    ),
    "offset deltas out of order": (
        with_section(packed([[0, 1, None, None, []], [0, 0, None, None, []]]), count=2),
        InvalidRecordError,
        "record 0: offset delta 1, expected 0",
    ),
    "a repeated offset delta": (
        with_section(packed([[0, 0, None, None, []], [0, 0, None, None, []]]), count=2),
        InvalidRecordError,
        "record 1: offset delta 0, expected 1",
    ),
    "max_timestamp too large": (
        with_section(packed([[0, 0, None, None, []]]), max_timestamp=BASE_TS + 5),
        InvalidRecordError,
        f"max_timestamp {BASE_TS + 5} is not the largest record timestamp {BASE_TS}",
    ),
    "max_timestamp too small": (
        with_section(packed([[0, 0, None, None, []], [9, 1, None, None, []]]), count=2),
        InvalidRecordError,
        f"is not the largest record timestamp {BASE_TS + 9}",
    ),
}


@pytest.mark.parametrize("case", REFUSED.values(), ids=REFUSED.keys())
def test_refused_with_a_message_naming_the_fault(case: tuple[bytes, type, str]) -> None:
    batch, error, words = case
    for max_record_bytes in (BIG, 7):  # the whole section at once, or in pieces
        found = verdict(batch, max_record_bytes)
        assert found is not None
        kind, message = found
        if max_record_bytes == 7 and "larger than 7 bytes" in message:
            continue  # in pieces, a record of more than 7 bytes is refused for that
        assert kind is error, message
        assert message.startswith("batch at byte 0: ")
        assert words in message


def test_the_codes_are_kafkas() -> None:
    corrupt = REFUSED["garbage msgpack"][0]
    invalid = REFUSED["offset deltas out of order"][0]
    with pytest.raises(CorruptRecordError) as c:
        check(corrupt)
    assert c.value.code == 2  # CORRUPT_MESSAGE
    with pytest.raises(InvalidRecordError) as i:
        check(invalid)
    assert i.value.code == 87  # INVALID_RECORD


@pytest.mark.parametrize("codec", [Compression.GZIP, Compression.ZSTD])
def test_a_decompression_bomb_is_refused(codec: Compression) -> None:
    # One record whose value is 64 MiB of zeros: under 70 KiB compressed.
    value = bytes(MAX_DECOMPRESSED_BYTES)
    section = packed([[0, 0, None, value, []]])
    del value
    batch = with_section(compress(codec, section), codec=codec)
    assert len(batch) < 100_000
    with pytest.raises(CorruptRecordError, match="larger than 67108864 bytes"):
        check(batch)


def test_a_zstd_frame_without_a_content_size_is_bounded_too() -> None:
    section = packed([[0, 0, None, bytes(MAX_DECOMPRESSED_BYTES), []]])
    stream = zstandard.ZstdCompressor(write_content_size=False).compress(section)
    del section
    assert zstandard.frame_content_size(stream) == -1
    with pytest.raises(CorruptRecordError):
        check(with_section(stream, codec=Compression.ZSTD))


def test_a_record_larger_than_the_bound_is_refused_when_decoded_in_pieces() -> None:
    batch = build_batch(
        [Record(b"small", timestamp_ms=BASE_TS), Record(b"x" * 5000, timestamp_ms=BASE_TS)],
        compression=Compression.ZSTD,
    )
    check(batch, max_record_bytes=6000)
    with pytest.raises(CorruptRecordError, match="record 1 is larger than 4000 bytes"):
        check(batch, max_record_bytes=4000)


def test_many_records_decoded_in_pieces_keep_their_offsets() -> None:
    records = [Record(b"%d" % i, timestamp_ms=BASE_TS + i % 7) for i in range(20_000)]
    batch = build_batch(records, compression=Compression.GZIP)
    check(batch, max_record_bytes=1000)  # 100s of pieces, offsets checked across them
    entries = [[i % 7, i if i != 15_000 else 0, None, b"", []] for i in range(20_000)]
    bad = build_batch_from_entries(
        entries, base_timestamp=BASE_TS, max_timestamp=BASE_TS + 6, compression=Compression.GZIP
    )
    with pytest.raises(InvalidRecordError, match="record 15000: offset delta 0, expected 15000"):
        check(bad, max_record_bytes=1000)


SECTIONS = st.recursive(
    st.none() | st.booleans() | st.integers(-3, 3) | st.binary(max_size=3) | st.text(max_size=2),
    lambda children: st.lists(children, max_size=6),
    max_leaves=20,
)


@THOROUGH
@given(
    entries=st.lists(SECTIONS, min_size=1, max_size=4),
    count=st.integers(1, 4),
    codec=st.sampled_from([Compression.NONE, Compression.GZIP, Compression.ZSTD]),
    max_timestamp=st.integers(BASE_TS - 3, BASE_TS + 3),
    tail=st.binary(max_size=2),
)
def test_whatever_the_leader_accepts_a_consumer_decodes(
    entries: list[Any], count: int, codec: Compression, max_timestamp: int, tail: bytes
) -> None:
    """No poison: check_records accepts only what decode_batch reads, and it is what the header
    says; in pieces or whole, the verdict is the same."""
    section = compress(codec, packed(entries) + tail)
    batch = with_section(section, count, codec, max_timestamp)
    whole = verdict(batch)
    pieces = verdict(batch, max_record_bytes=4)
    if pieces is None or "larger than 4 bytes" not in pieces[1]:
        assert (pieces is None) == (whole is None)
    if whole is not None:
        assert whole[0] in (CorruptRecordError, InvalidRecordError)
        return
    decoded = decode_batch(batch)
    assert [r.offset for r in decoded.records] == list(range(count))
    assert max(r.timestamp_ms for r in decoded.records) == max_timestamp


@THOROUGH
@given(
    records=st.lists(
        st.builds(
            Record,
            value=st.none() | st.binary(max_size=8),
            key=st.none() | st.binary(max_size=4),
            timestamp_ms=st.integers(0, 2**40),
            headers=st.lists(
                st.tuples(st.text(max_size=3), st.none() | st.binary(max_size=3)), max_size=2
            ).map(tuple),
        ),
        min_size=1,
        max_size=6,
    ),
    codec=st.sampled_from([Compression.NONE, Compression.GZIP, Compression.ZSTD]),
)
def test_every_batch_build_batch_makes_is_accepted(
    records: list[Record], codec: Compression
) -> None:
    batch = build_batch(records, compression=codec)
    assert verdict(batch) is None
    assert verdict(batch, max_record_bytes=64) is None
