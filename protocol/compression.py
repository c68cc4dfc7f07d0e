"""Compression codecs for the records section of a batch (attribute bits 0-2, Kafka's numbering).

The producer compresses; the broker stores and serves the compressed bytes as they came;
consumers decompress. Decompression is bounded so a small batch cannot inflate without limit.
"""

from __future__ import annotations

import enum
import zlib
from typing import Final

import zstandard

from protocol.errors import CorruptRecordError, ErrorCode, HighwaterError

__all__ = ["MAX_DECOMPRESSED_BYTES", "Compression", "compress", "decompress"]

MAX_DECOMPRESSED_BYTES: Final = 64 * 1024 * 1024


class Compression(enum.IntEnum):
    NONE = 0
    GZIP = 1
    SNAPPY = 2  # reserved (Kafka's number); not supported
    LZ4 = 3  # reserved (Kafka's number); not supported
    ZSTD = 4


SUPPORTED: Final = frozenset({Compression.NONE, Compression.GZIP, Compression.ZSTD})

_ZSTD_COMPRESSOR: Final = zstandard.ZstdCompressor(level=3)
_ZSTD_DECOMPRESSOR: Final = zstandard.ZstdDecompressor()


def check_supported(codec: int) -> Compression:
    try:
        compression = Compression(codec)
    except ValueError:
        compression = None
    if compression not in SUPPORTED:
        raise HighwaterError(
            f"compression codec {codec} is not supported (none=0, gzip=1, zstd=4)",
            ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT,
        )
    assert compression is not None
    return compression


def compress(codec: Compression, data: bytes) -> bytes:
    if codec is Compression.NONE:
        return data
    if codec is Compression.GZIP:
        compressor = zlib.compressobj(6, zlib.DEFLATED, 16 + zlib.MAX_WBITS)  # gzip container
        return compressor.compress(data) + compressor.flush()
    if codec is Compression.ZSTD:
        return bytes(_ZSTD_COMPRESSOR.compress(data))
    check_supported(codec)
    raise AssertionError("unreachable")


def decompress(codec: int, data: bytes, max_bytes: int = MAX_DECOMPRESSED_BYTES) -> bytes:
    if max_bytes <= 0:
        raise ValueError("max_bytes must be positive")  # zlib would read 0 as "no limit"
    compression = check_supported(codec)
    if compression is Compression.NONE:
        return data
    try:
        if compression is Compression.GZIP:
            decompressor = zlib.decompressobj(16 + zlib.MAX_WBITS)
            out = decompressor.decompress(data, max_bytes)
            if decompressor.unconsumed_tail or not decompressor.eof:
                raise CorruptRecordError(f"gzip records larger than {max_bytes} bytes or truncated")
            if decompressor.unused_data:  # one gzip member, nothing after it (docs/protocol.md)
                raise CorruptRecordError("bytes after the gzip member")
            return out
        # Our producers write the content size into the zstd frame header; check it before
        # allocating. Without one, zstandard bounds the output by max_output_size.
        declared = zstandard.frame_content_size(data)
        if declared > max_bytes:
            raise CorruptRecordError(f"zstd records larger than {max_bytes} bytes")
        return bytes(
            _ZSTD_DECOMPRESSOR.decompress(data, max_output_size=max_bytes, allow_extra_data=False)
        )
    except (zlib.error, zstandard.ZstdError) as exc:
        raise CorruptRecordError(f"cannot decompress {compression.name} records: {exc}") from exc
