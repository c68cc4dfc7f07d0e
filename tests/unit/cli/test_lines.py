"""Input splitting (client/cli/lines.py): kcat's delimiters, the length limit, linear time."""

from __future__ import annotations

import time

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


def _seconds_to_split(size: int) -> float:
    data = b"x" * size + b"\n"
    started = time.perf_counter()
    splitter = LineSplitter(b"\n")
    for i in range(0, len(data), 64 * 1024):
        splitter.feed(data[i : i + 64 * 1024])
    splitter.finish()
    return time.perf_counter() - started


def test_splitting_time_grows_linearly_with_the_line() -> None:
    # The old splitter joined pending + chunk per read: 8x the line took ~64x the time. Both
    # sizes are well past the CPU caches, so each is bound by memory bandwidth alone; the runs
    # alternate and the best of each counts, so a busy machine slows both alike (8 runs: with
    # 4, a CI machine shared with other test runs once read 34x).
    small, large = float("inf"), float("inf")
    for _ in range(8):
        small = min(small, _seconds_to_split(8 << 20))
        large = min(large, _seconds_to_split(64 << 20))
    assert large / small < 8 * 4
