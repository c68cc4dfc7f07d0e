"""Framing: a 4-byte big-endian length, then that many bytes of msgpack body.

`FrameDecoder` is sans-IO (after h11): feed it whatever bytes arrived with `receive_data`,
then call `next_frame()` until it returns `NEED_DATA`. It never reads a socket itself.
"""

from __future__ import annotations

import enum
import struct
from typing import Final

from protocol.errors import FrameError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "LENGTH_PREFIX_BYTES",
    "NEED_DATA",
    "FrameDecoder",
    "NeedData",
    "frame",
]

LENGTH_PREFIX_BYTES: Final = 4
# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_BYTES: Final = 100 * 1024 * 1024

_LENGTH = struct.Struct(">i")


class NeedData(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA


def frame(body: bytes) -> bytes:
    """Prefix an encoded body with its length."""
    return _LENGTH.pack(len(body)) + body


class FrameDecoder:
    """Splits a byte stream into frame bodies.

    A declared length below 0 or above `max_frame_bytes` raises FrameError before any buffer of
    that size is allocated; the decoder is then broken and the connection must be closed.
    """

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES) -> None:
        if max_frame_bytes <= 0:
            raise ValueError("max_frame_bytes must be positive")
        self.max_frame_bytes = max_frame_bytes
        self._buffer = bytearray()
        self._start = 0  # read position in _buffer; compacted lazily to keep appends cheap
        self._broken: FrameError | None = None

    @property
    def buffered_bytes(self) -> int:
        return len(self._buffer) - self._start

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._broken is not None:
            raise self._broken
        if self._start and self._start * 2 >= len(self._buffer):
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data

    def next_frame(self) -> bytes | NeedData:
        if self._broken is not None:
            raise self._broken
        available = len(self._buffer) - self._start
        if available < LENGTH_PREFIX_BYTES:
            return NEED_DATA
        (length,) = _LENGTH.unpack_from(self._buffer, self._start)
        if length < 0 or length > self.max_frame_bytes:
            self._broken = FrameError(
                f"frame length {length} outside [0, {self.max_frame_bytes}] "
                "(socket.request.max.bytes)"
            )
            raise self._broken
        end = self._start + LENGTH_PREFIX_BYTES + length
        if len(self._buffer) < end:
            return NEED_DATA
        with memoryview(self._buffer) as view:  # one copy (a bytearray slice would be two)
            body = bytes(view[self._start + LENGTH_PREFIX_BYTES : end])
        self._start = end
        if self._start == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        return body
