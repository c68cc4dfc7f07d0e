"""Input splitting (client/cli/lines.py): kcat's delimiters, the length limit, linear time."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from client.cli.lines import LineSplitter, TooLong, unescape


def _split(data: bytes, delimiter: bytes, max_bytes: int | None, chunk: int) -> list[object]:
    splitter = LineSplitter(delimiter, max_bytes)
    out: list[object] = []
    for i in range(0, len(data), chunk):
        out += splitter.feed(data[i : i + chunk])
    return out + splitter.finish()


def _expected(data: bytes, delimiter: bytes, max_bytes: int | None) -> list[object]:
    if not data:
        return []
    parts = data.split(delimiter)
    if parts[-1] == b"":
        parts.pop()  # a final delimiter ends the last record; it does not start another
    return [TooLong(len(p)) if max_bytes is not None and len(p) > max_bytes else p for p in parts]


@given(
    data=st.binary(max_size=80).map(lambda b: bytes(c % 6 + 97 for c in b)),
    delimiter=st.sampled_from([b"a", b"ab", b"fed", b"\n"]),
    max_bytes=st.none() | st.integers(0, 12),
    chunk=st.integers(1, 9),
)
def test_any_chunking_gives_what_a_whole_split_gives(
    data: bytes, delimiter: bytes, max_bytes: int | None, chunk: int
) -> None:
    assert _split(data, delimiter, max_bytes, chunk) == _expected(data, delimiter, max_bytes)


def test_a_record_over_the_limit_is_skipped_without_being_kept() -> None:
    splitter = LineSplitter(b"\n", max_bytes=10)
    assert splitter.feed(b"short\n" + b"x" * 100) == [b"short"]
    assert len(splitter._buffer) == 0  # the long record's bytes are not kept
    assert splitter.feed(b"x" * 100_000) == []
    assert splitter.feed(b"xx\nnext") == [TooLong(100_102)]
    assert splitter.finish() == [b"next"]


def test_escapes() -> None:
    assert unescape(r"\n\t\r\0\\\x1e|") == b"\n\t\r\0\\\x1e|"
    with pytest.raises(ValueError, match="unknown escape"):
        unescape(r"\q")


class _CountingBuffer(bytearray):
    """The splitter's buffer, counting the bytes each `find` may scan (from its start)."""

    scanned = 0

    def find(self, sub: object, start: int = 0, *args: object) -> int:  # type: ignore[override]
        _CountingBuffer.scanned += len(self) - start
        return super().find(sub, start, *args)  # type: ignore[arg-type]


def test_splitting_scans_each_byte_about_once() -> None:
    # The old splitter joined pending + chunk per read and searched from the start: a line
    # of n bytes in c-byte chunks cost about n * n / (2 c) bytes of scanning. Counted, not
    # timed: each byte of a long line is searched once, plus a delimiter's length per chunk.
    size, chunk = 8 << 20, 64 * 1024
    data = b"x" * size + b"\n" + b"y" * 100 + b"\n"
    splitter = LineSplitter(b"\n")
    splitter._buffer = _CountingBuffer()
    _CountingBuffer.scanned = 0
    out: list[object] = []
    for i in range(0, len(data), chunk):
        out += splitter.feed(data[i : i + chunk])
    out += splitter.finish()
    assert out == [b"x" * size, b"y" * 100]
    assert _CountingBuffer.scanned <= 2 * len(data)
