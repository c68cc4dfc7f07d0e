"""Input records out of a byte stream: kcat's -D delimiter, in linear time and bounded memory.

`LineSplitter` looks at each byte once and copies each record once: a buffer holds at most the
unfinished record, and a record longer than the limit is skipped as it streams in (only its
length is kept), so a 200 MB line costs neither quadratic time nor 200 MB of memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["LineSplitter", "TooLong", "unescape"]

_ESCAPE = re.compile(rb"\\(x[0-9A-Fa-f]{2}|.)", re.DOTALL)
_SIMPLE = {b"n": b"\n", b"t": b"\t", b"r": b"\r", b"0": b"\0", b"\\": b"\\"}


def unescape(text: str) -> bytes:
    """kcat's delimiter syntax: \\n \\t \\r \\0 \\\\ and \\xNN; any other byte as it is."""

    def one(match: re.Match[bytes]) -> bytes:
        code = match[1]
        if code in _SIMPLE:
            return _SIMPLE[code]
        if code[:1] == b"x" and len(code) == 3:
            return bytes([int(code[1:], 16)])
        raise ValueError(
            f"unknown escape \\{code.decode(errors='replace')} (known: \\n \\t \\r \\0 \\\\ \\xNN)"
        )

    return _ESCAPE.sub(one, text.encode())


@dataclass(frozen=True, slots=True)
class TooLong:
    """A record longer than the limit, skipped: `size` is its whole length in bytes."""

    size: int


class LineSplitter:
    """`feed(chunk)` returns the records completed by that chunk, `finish()` the last one (a
    final record without a delimiter counts; an empty input has none)."""

    def __init__(self, delimiter: bytes = b"\n", max_bytes: int | None = None) -> None:
        if not delimiter:
            raise ValueError("the delimiter must not be empty")
        self.delimiter = delimiter
        self.max_bytes = max_bytes
        self._buffer = bytearray()
        self._search_from = 0  # bytes before this hold no delimiter start
        self._skipped: int | None = None  # the record being skipped: its bytes dropped so far

    def feed(self, chunk: bytes) -> list[bytes | TooLong]:
        buffer, delimiter = self._buffer, self.delimiter
        buffer += chunk
        out: list[bytes | TooLong] = []
        start = 0
        at = buffer.find(delimiter, self._search_from)
        while at >= 0:
            out.append(self._record(start, at))
            start = at + len(delimiter)
            at = buffer.find(delimiter, start)
        # The unfinished record, less what could begin a delimiter cut at the chunk's end.
        certain = len(buffer) - start - (len(delimiter) - 1)
        limit = self.max_bytes
        if self._skipped is not None or (limit is not None and certain > limit):
            drop = max(0, certain)
            self._skipped = (self._skipped or 0) + drop
            del buffer[: start + drop]
        else:
            del buffer[:start]
        self._search_from = max(0, len(buffer) - len(delimiter) + 1)
        return out

    def finish(self) -> list[bytes | TooLong]:
        if not self._buffer and self._skipped is None:
            return []
        record = self._record(0, len(self._buffer))
        self._buffer.clear()
        self._search_from = 0
        return [record]

    def _record(self, start: int, end: int) -> bytes | TooLong:
        if self._skipped is not None:
            size = self._skipped + end - start
            self._skipped = None
            return TooLong(size)
        if self.max_bytes is not None and end - start > self.max_bytes:
            return TooLong(end - start)
        with memoryview(self._buffer) as view:
            return bytes(view[start:end])
