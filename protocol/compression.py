"""Compression codecs for the records section of a batch (attribute bits 0-2, Kafka's numbering).

The producer compresses; the broker stores and serves the compressed bytes as they came;
consumers decompress. Decompression is bounded so a small batch cannot inflate without limit.
Formats (docs/protocol.md 6.7): one gzip member, one raw snappy block, one LZ4 frame, one zstd
frame.
"""

from __future__ import annotations

import enum
import struct
import zlib
from typing import Final

import cramjam
import zstandard

from protocol.errors import CorruptRecordError, ErrorCode, HighwaterError

__all__ = [
    "CODECS",
    "MAX_DECOMPRESSED_BYTES",
    "SUPPORTED",
    "Compression",
    "check_supported",
    "codec_named",
    "compress",
    "decompress",
]

MAX_DECOMPRESSED_BYTES: Final = 64 * 1024 * 1024


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4


SUPPORTED: Final = frozenset(Compression)
# Kafka's compression.type names.
CODECS: Final = {codec.name.lower(): codec for codec in Compression}

_ZSTD_COMPRESSOR: Final = zstandard.ZstdCompressor(level=3)
_ZSTD_DECOMPRESSOR: Final = zstandard.ZstdDecompressor()
# snappy-java's stream header: the magic, then a version and a compatible version (int32 each).
_XERIAL_MAGIC: Final = b"\x82SNAPPY\x00"
_XERIAL_HEADER_BYTES: Final = len(_XERIAL_MAGIC) + 8
_LZ4_MAGIC: Final = b"\x04\x22\x4d\x18"
_LZ4_BLOCK_MAX_BYTES: Final = {4: 64 << 10, 5: 256 << 10, 6: 1 << 20, 7: 4 << 20}


def codec_named(name: str) -> Compression:
    """The codec for a Kafka compression.type name; ValueError lists the known ones."""
    try:
        return CODECS[name.lower()]
    except KeyError:
        raise ValueError(f"unknown compression {name!r} (known: {', '.join(CODECS)})") from None


def check_supported(codec: int) -> Compression:
    try:
        return Compression(codec)
    except ValueError:
        known = ", ".join(f"{c.name.lower()}={c.value}" for c in Compression)
        raise HighwaterError(
            f"compression codec {codec} is not supported ({known})",
            ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        ) from None


def compress(codec: Compression, data: bytes) -> bytes:
    codec = check_supported(codec)
    if codec is Compression.NONE:
        return data
    if codec is Compression.GZIP:
        compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip container
        return compressor.compress(data) + compressor.flush()
    if codec is Compression.SNAPPY:
        return bytes(cramjam.snappy.compress_raw(data))
    if codec is Compression.LZ4:
        return bytes(cramjam.lz4.compress(data))
    return bytes(_ZSTD_COMPRESSOR.compress(data))


def decompress(codec: int, data: bytes, max_bytes: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")  # zlib would read 0 as "no limit"
    compression = check_supported(codec)
    if compression is Compression.NONE:
        return data
    try:
        if compression is Compression.GZIP:
            return _gunzip(data, max_bytes)
        if compression is Compression.SNAPPY:
            return _unsnappy(data, max_bytes)
        if compression is Compression.LZ4:
            return _unlz4(data, max_bytes)
        # Our producers write the content size into the zstd frame header; check it before
        # allocating. Without one, zstandard bounds the output by max_output_size.
        declared = zstandard.frame_content_size(data)
        if declared > max_bytes:
            raise CorruptRecordError(f"zstd records larger than {max_bytes} bytes")
        return bytes(
            _ZSTD_DECOMPRESSOR.decompress(data, max_output_size=max_bytes, allow_extra_data=False)
        )
    except (zlib.error, zstandard.ZstdError, cramjam.DecompressionError) as exc:
        raise CorruptRecordError(f"cannot decompress {compression.name} records: {exc}") from exc


def _gunzip(data: bytes, max_bytes: int) -> bytes:
    decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = decompressor.decompress(data, max_bytes)
    if decompressor.unconsumed_tail or not decompressor.eof:
        raise CorruptRecordError(f"gzip records larger than {max_bytes} bytes or truncated")
    if decompressor.unused_data:  # one gzip member, nothing after it (docs/protocol.md)
        raise CorruptRecordError("bytes after the gzip member")
    return out


def _unsnappy(data: bytes, max_bytes: int) -> bytes:
    """A raw snappy block starts with its uncompressed length (a varint): checked first.
    Java's Kafka producer writes xerial's framing instead (snappy-java's SnappyOutputStream),
    which Kafka brokers and librdkafka read too: a magic, then length-prefixed raw blocks."""
    if bytes(data[: len(_XERIAL_MAGIC)]) == _XERIAL_MAGIC:
        return _unsnappy_xerial(data, max_bytes)
    declared = cramjam.snappy.decompress_raw_len(data)
    if declared > max_bytes:
        raise CorruptRecordError(f"snappy records larger than {max_bytes} bytes")
    return bytes(cramjam.snappy.decompress_raw(data))


def _unsnappy_xerial(data: bytes, max_bytes: int) -> bytes:
    pos = _XERIAL_HEADER_BYTES
    out: list[bytes] = []
    total = 0
    while pos < len(data):
        if len(data) < pos + 4:
            raise CorruptRecordError("xerial snappy block length cut short")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > len(data):
            raise CorruptRecordError("xerial snappy block cut short")
        block = data[pos : pos + size]
        pos += size
        total += cramjam.snappy.decompress_raw_len(block)
        if total > max_bytes:
            raise CorruptRecordError(f"snappy records larger than {max_bytes} bytes")
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
    return b"".join(out)


def _unlz4(data: bytes, max_bytes: int) -> bytes:
    """One LZ4 frame, decompressed into a buffer no larger than its blocks can fill (or than
    max_bytes + 1): a frame that would write past it is refused without inflating further."""
    bound = _lz4_frame_bound(data)
    out = bytearray(min(bound, max_bytes + 1))
    try:
        size = cramjam.lz4.decompress_into(data, out)
    except cramjam.DecompressionError as exc:
        if bound > max_bytes:
            raise CorruptRecordError(f"lz4 records larger than {max_bytes} bytes") from exc
        raise
    if size > max_bytes:
        raise CorruptRecordError(f"lz4 records larger than {max_bytes} bytes")
    del out[size:]
    return bytes(out)


def _lz4_frame_bound(data: bytes) -> int:
    """The most one LZ4 frame (the LZ4 frame format spec) can decompress to, from its header
    and block headers; CorruptRecordError if it is not exactly one well-formed frame."""
    if len(data) < 7 or data[:4] != _LZ4_MAGIC:
        raise CorruptRecordError("not an LZ4 frame")
    flags, block_descriptor = data[4], data[5]
    block_max = _LZ4_BLOCK_MAX_BYTES.get((block_descriptor >> 4) & 0x7)
    if flags >> 6 != 0b01 or block_max is None:
        raise CorruptRecordError("unsupported LZ4 frame descriptor")
    pos = 6
    content_size = None
    if flags & 0x08:
        if len(data) < pos + 8:
            raise CorruptRecordError("LZ4 frame header cut short")
        (content_size,) = struct.unpack_from("<Q", data, pos)
        pos += 8
    pos += 4 if flags & 0x01 else 0  # dictionary id
    pos += 1  # header checksum
    block_checksum = 4 if flags & 0x10 else 0
    bound = 0
    while True:
        if len(data) < pos + 4:
            raise CorruptRecordError("LZ4 frame cut short")
        (word,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if word == 0:  # end mark
            break
        size = word & 0x7FFFFFFF
        bound += size if word >> 31 else block_max  # high bit: a stored (uncompressed) block
        pos += size + block_checksum
    pos += 4 if flags & 0x04 else 0  # content checksum
    if pos != len(data):
        raise CorruptRecordError(
            "LZ4 frame cut short" if pos > len(data) else "bytes after the LZ4 frame"
        )
    return bound if content_size is None else min(bound, content_size)
