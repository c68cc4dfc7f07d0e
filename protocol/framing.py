"""Framing: a 4-byte big-endian length, then that many bytes of msgpack body.

`FrameDecoder` is sans-IO (after h11): feed it whatever bytes arrived with `receive_data`,
then call `next_frame()` until it returns `NEED_DATA`. It never reads a socket itself. For a
large frame a reader may instead fill the frame's own buffer (`body_buffer`, then
`body_received`), which saves copying it (docs/performance.md, "Reading large frames"). That
buffer is made only once half of the frame has arrived or waits to be read, so a declared
length costs nothing until its bytes come (docs/reliability.md, "Limits").
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Callable
from typing import Final

from protocol.errors import FrameError

__all__ = [
    "DEFAULT_MAX_FRAME_BYTES",
    "DIRECT_FRAME_BYTES",
    "LENGTH_PREFIX_BYTES",
    "NEED_DATA",
    "FrameDecoder",
    "NeedData",
    "frame",
    "length_prefix",
]

LENGTH_PREFIX_BYTES: Final = 4
# Kafka's socket.request.max.bytes default.
DEFAULT_MAX_FRAME_BYTES: Final = 100 * 1024 * 1024
# A frame at least this long, not yet whole, may be read straight into its own buffer.
DIRECT_FRAME_BYTES: Final = 64 * 1024

_LENGTH = struct.Struct(">i")


class NeedData(enum.Enum):
    NEED_DATA = "NEED_DATA"


NEED_DATA: Final = NeedData.NEED_DATA


def frame(body: bytes) -> bytes:
    """Prefix an encoded body with its length."""
    return _LENGTH.pack(len(body)) + body


def length_prefix(body_bytes: int) -> bytes:
    """The 4 bytes that go before a body of `body_bytes` (for a frame sent in pieces)."""
    return _LENGTH.pack(body_bytes)


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
        # The body of a large frame being filled in place (body_buffer), and its bytes so far.
        self._body: bytearray | None = None
        self._filled = 0

    @property
    def buffered_bytes(self) -> int:
        filling = LENGTH_PREFIX_BYTES + self._filled if self._body is not None else 0
        return len(self._buffer) - self._start + filling

    def receive_data(self, data: bytes | bytearray | memoryview) -> None:
        if self._broken is not None:
            raise self._broken
        body = self._body
        if body is not None:  # the frame being filled in place takes what it still lacks
            taken = min(len(data), len(body) - self._filled)
            body[self._filled : self._filled + taken] = data[:taken]
            self._filled += taken
            data = data[taken:]
            if not data:
                return
        if self._start and self._start * 2 >= len(self._buffer):
            del self._buffer[: self._start]
            self._start = 0
        self._buffer += data

    def body_buffer(
        self, limit_bytes: int | None = None, ready_bytes: Callable[[], int] | None = None
    ) -> memoryview | None:
        """The unfilled rest of the frame now arriving, when it is long (DIRECT_FRAME_BYTES or
        more, and at most `limit_bytes`) and its length is known: read into it (e.g.
        `socket.recv_into`) and report the bytes with `body_received`. None: read with
        `receive_data`. The frame's length is checked against max_frame_bytes before its
        buffer is made. `ready_bytes` (the bytes waiting in the socket, e.g. FIONREAD) makes
        it wait for half the frame to have arrived or be waiting before it makes the buffer,
        so a peer's 4 bytes set aside nothing and a stalled frame holds at most twice what
        was sent; a frame that arrives whole is still read in place. A server also passes
        `limit_bytes`, above which a frame is read only as it arrives."""
        if self._broken is not None:
            raise self._broken
        body = self._body
        if body is None:
            available = len(self._buffer) - self._start
            if available < LENGTH_PREFIX_BYTES:
                return None
            length = self._frame_length()
            have = available - LENGTH_PREFIX_BYTES
            if length < DIRECT_FRAME_BYTES or have >= length:
                return None
            if limit_bytes is not None and length > limit_bytes:
                return None
            if ready_bytes is not None and 2 * (have + ready_bytes()) < length:
                return None  # kept as it arrives (receive_data) until half of it is here
            body = self._body = bytearray(length)
            begin = self._start + LENGTH_PREFIX_BYTES
            with memoryview(self._buffer) as view:
                body[:have] = view[begin : begin + have]
            self._filled = have
            self._buffer.clear()
            self._start = 0
        elif self._filled == len(body):
            return None  # whole: next_frame gives it
        return memoryview(body)[self._filled :]

    def body_received(self, count: int) -> None:
        """`count` more bytes of the frame were written into `body_buffer()`."""
        if self._body is None or not 0 <= count <= len(self._body) - self._filled:
            raise ValueError(f"body_received({count}) does not match the buffer given")
        self._filled += count

    def next_frame(self) -> bytes | bytearray | NeedData:
        """The next whole frame's body (a bytearray when it was filled in place), or
        NEED_DATA."""
        if self._broken is not None:
            raise self._broken
        body = self._body
        if body is not None:
            if self._filled < len(body):
                return NEED_DATA
            self._body = None
            self._filled = 0
            return body
        available = len(self._buffer) - self._start
        if available < LENGTH_PREFIX_BYTES:
            return NEED_DATA
        length = self._frame_length()
        end = self._start + LENGTH_PREFIX_BYTES + length
        if len(self._buffer) < end:
            return NEED_DATA
        with memoryview(self._buffer) as view:  # one copy (a bytearray slice would be two)
            frame_body = bytes(view[self._start + LENGTH_PREFIX_BYTES : end])
        self._start = end
        if self._start == len(self._buffer):
            self._buffer.clear()
            self._start = 0
        return frame_body

    def _frame_length(self) -> int:
        """The length declared at the read position, checked (FrameError breaks the decoder)."""
        (length,) = _LENGTH.unpack_from(self._buffer, self._start)
        if length < 0 or length > self.max_frame_bytes:
            self._broken = FrameError(
                f"frame length {length} outside [0, {self.max_frame_bytes}] "
                "(socket.request.max.bytes)"
            )
            raise self._broken
        return int(length)
