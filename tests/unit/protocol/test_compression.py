"""Compression codecs: round trips, bounded decompression, damage, unsupported codecs."""

from __future__ import annotations

import time
import tracemalloc
import zlib

import cramjam
import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from protocol.compression import (
    CODECS,
    MAX_DECOMPRESSED_BYTES,
    SUPPORTED,
    Compression,
    check_supported,
    codec_named,
    compress,
    decompress,
)
from protocol.errors import CorruptRecordError, ErrorCode, HighwaterError
from tests.unit.protocol.strategies import THOROUGH

CORRUPT_MESSAGE = 2
UNSUPPORTED_FOR_MESSAGE_FORMAT = 43

REAL_CODECS = [Compression.GZIP, Compression.SNAPPY, Compression.LZ4, Compression.ZSTD]
ALL_SUPPORTED = [Compression.NONE, *REAL_CODECS]
PAYLOADS = st.binary(max_size=2000) | st.binary(max_size=20).map(lambda b: b * 200)


def test_kafkas_codec_numbers() -> None:
    assert [int(c) for c in Compression] == [0, 1, 2, 3, 4]
    assert set(SUPPORTED) == set(Compression)
    assert MAX_DECOMPRESSED_BYTES == 64 * 1024 * 1024


def test_kafkas_compression_type_names() -> None:
    assert list(CODECS) == ["none", "gzip", "snappy", "lz4", "zstd"]
    assert codec_named("LZ4") is Compression.LZ4
    with pytest.raises(ValueError, match="known: none, gzip, snappy, lz4, zstd"):
        codec_named("brotli")


@THOROUGH
@given(data=PAYLOADS, codec=st.sampled_from(ALL_SUPPORTED))
def test_round_trip(data: bytes, codec: Compression) -> None:
    compressed = compress(codec, data)
    assert decompress(codec, compressed) == data
    assert decompress(int(codec), compressed) == data  # the header's raw attribute bits work too
    if data:  # exactly at the bound is allowed
        assert decompress(codec, compressed, max_bytes=len(data)) == data


def test_none_is_the_identity() -> None:
    assert compress(Compression.NONE, b"abc") == b"abc"
    assert decompress(Compression.NONE, b"abc", max_bytes=1) == b"abc"


def test_codecs_write_their_container_formats() -> None:
    data = b"hello hello hello hello"
    gz = compress(Compression.GZIP, data)
    assert gz[:2] == b"\x1f\x8b"  # a gzip member, not a raw deflate or zlib stream
    assert zlib.decompress(gz, 16 + zlib.MAX_WBITS) == data
    zs = compress(Compression.ZSTD, data)
    assert zs[:4] == b"\x28\xb5\x2f\xfd"
    assert zstandard.frame_content_size(zs) == len(data)  # what decompress checks first
    assert zstandard.ZstdDecompressor().decompress(zs) == data
    sn = compress(Compression.SNAPPY, data)
    assert sn[0] == len(data)  # a raw snappy block: its length as a varint first
    assert bytes(cramjam.snappy.decompress_raw(sn)) == data
    lz = compress(Compression.LZ4, data)
    assert lz[:4] == b"\x04\x22\x4d\x18"  # an LZ4 frame
    assert bytes(cramjam.lz4.decompress(lz)) == data


@pytest.mark.parametrize("codec", REAL_CODECS)
def test_one_byte_over_the_bound_is_corrupt(codec: Compression) -> None:
    data = bytes(range(256)) * 4
    compressed = compress(codec, data)
    assert decompress(codec, compressed, max_bytes=len(data)) == data
    with pytest.raises(CorruptRecordError) as info:
        decompress(codec, compressed, max_bytes=len(data) - 1)
    assert info.value.code == CORRUPT_MESSAGE
    assert info.value.code is ErrorCode.CORRUPT_MESSAGE


def _bombs() -> list[tuple[str, int, bytes]]:
    size = 32 * 1024 * 1024
    zeros = b"\x00" * size
    stream = zstandard.ZstdCompressor().compressobj()
    zstd_streamed = stream.compress(zeros) + stream.flush()
    return [
        ("gzip", Compression.GZIP, compress(Compression.GZIP, zeros)),
        ("snappy", Compression.SNAPPY, compress(Compression.SNAPPY, zeros)),
        ("lz4", Compression.LZ4, compress(Compression.LZ4, zeros)),
        ("zstd", Compression.ZSTD, compress(Compression.ZSTD, zeros)),
        (
            "zstd-no-content-size",
            Compression.ZSTD,
            zstandard.ZstdCompressor(write_content_size=False).compress(zeros),
        ),
        ("zstd-streamed", Compression.ZSTD, zstd_streamed),
    ]


BOMBS = _bombs()


@pytest.mark.parametrize(("codec", "bomb"), [b[1:] for b in BOMBS], ids=[b[0] for b in BOMBS])
def test_bomb_larger_than_max_bytes_is_corrupt_and_stays_bounded(codec: int, bomb: bytes) -> None:
    max_bytes = 1024 * 1024
    assert len(bomb) < 2 * 1024 * 1024  # 32 MiB of zeros squeezed small
    tracemalloc.start()
    started = time.perf_counter()
    try:
        with pytest.raises(CorruptRecordError) as info:
            decompress(codec, bomb, max_bytes=max_bytes)
        elapsed = time.perf_counter() - started
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert info.value.code == CORRUPT_MESSAGE
    assert peak < 4 * max_bytes  # never inflated to anywhere near 32 MiB
    assert elapsed < 1.0


@pytest.mark.parametrize("codec", REAL_CODECS)
def test_every_truncation_is_corrupt(codec: Compression) -> None:
    data = bytes(range(256)) + b"some text " * 20
    compressed = compress(codec, data)
    for cut in range(len(compressed)):
        with pytest.raises(CorruptRecordError) as info:
            decompress(codec, compressed[:cut])
        assert info.value.code == CORRUPT_MESSAGE


@pytest.mark.parametrize("codec", REAL_CODECS)
@pytest.mark.parametrize(
    "garbage",
    [
        b"garbage!",
        b"\x00" * 32,
        b"\x1f\x8b\x08\x00\x00\x00",
        b"\x28\xb5\x2f\xfd\xff\xff\xff",
        b"\x04\x22\x4d\x18\x64\x40\xa7\xff\xff\xff\x7f",
    ],
    ids=["text", "zeros", "gzip-magic", "zstd-magic", "lz4-magic"],
)
def test_garbage_is_corrupt(codec: Compression, garbage: bytes) -> None:
    with pytest.raises(CorruptRecordError) as info:
        decompress(codec, garbage)
    assert info.value.code == CORRUPT_MESSAGE


@THOROUGH
@given(garbage=st.binary(max_size=200), codec=st.sampled_from(REAL_CODECS))
def test_random_input_only_raises_corrupt_record(garbage: bytes, codec: Compression) -> None:
    try:
        out = decompress(codec, garbage, max_bytes=4096)
    except CorruptRecordError as err:
        assert err.code == CORRUPT_MESSAGE
    else:
        assert len(out) <= 4096


@pytest.mark.parametrize("codec", [5, 6, 7, -1, 8])
def test_unsupported_codec_on_decompress(codec: int) -> None:
    with pytest.raises(HighwaterError) as info:
        decompress(codec, b"anything")
    assert info.value.code == UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert info.value.code is ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT
    assert not isinstance(info.value, CorruptRecordError)  # not damage: a format we do not speak
    assert f"codec {codec}" in info.value.message


@pytest.mark.parametrize("codec", [5, 7])
def test_unsupported_codec_on_compress(codec: int) -> None:
    with pytest.raises(HighwaterError) as info:
        compress(codec, b"anything")  # type: ignore[arg-type]
    assert info.value.code == UNSUPPORTED_FOR_MESSAGE_FORMAT


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
def test_check_supported_returns_the_codec(codec: int) -> None:
    assert check_supported(codec) is Compression(codec)


@pytest.mark.parametrize("codec", REAL_CODECS)
@pytest.mark.parametrize("extra", ["junk", "second-member"])
def test_anything_after_the_one_member_or_frame_is_corrupt(codec: Compression, extra: str) -> None:
    # docs/protocol.md 6.7: exactly one gzip member, snappy block, LZ4 frame or zstd frame.
    # Bytes after it would be silently dropped records, so they are rejected.
    compressed = compress(codec, b"first records")
    tail = b"junk" if extra == "junk" else compress(codec, b"second records")
    assert decompress(codec, compressed) == b"first records"
    with pytest.raises(CorruptRecordError) as info:
        decompress(codec, compressed + tail)
    assert info.value.code == CORRUPT_MESSAGE
