"""The sparse `.index` (offset -> position) and `.timeindex` (timestamp -> offset) files."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from broker.log.errors import CorruptIndexError, LogStorageError
from broker.log.offset_index import OffsetIndex
from broker.log.segment import segment_file_name
from broker.log.time_index import TimeIndex
from protocol.errors import ErrorCode

OFF = struct.Struct(">ii")
TIME = struct.Struct(">qi")
BASE = 100


def offset_index(tmp_path: Path, base: int = BASE, max_bytes: int = 1024) -> OffsetIndex:
    return OffsetIndex(tmp_path / segment_file_name(base, ".index"), base, max_bytes)


def time_index(tmp_path: Path, base: int = BASE, max_bytes: int = 1024) -> TimeIndex:
    return TimeIndex(tmp_path / segment_file_name(base, ".timeindex"), base, max_bytes)


def test_segment_file_names_are_20_digit_base_offsets() -> None:
    assert segment_file_name(0, ".log") == "00000000000000000000.log"
    assert segment_file_name(1234, ".index") == "00000000000000001234.index"
    assert segment_file_name(2**63 - 1, ".timeindex") == "09223372036854775807.timeindex"


# --- OffsetIndex ------------------------------------------------------------------------------


def filled_offset_index(tmp_path: Path) -> OffsetIndex:
    idx = offset_index(tmp_path)
    idx.append(103, 50)
    idx.append(107, 120)
    idx.append(110, 300)
    return idx


def test_offset_index_append_writes_relative_big_endian_entries(tmp_path: Path) -> None:
    idx = filled_offset_index(tmp_path)
    idx.close()
    data = (tmp_path / "00000000000000000100.index").read_bytes()
    assert data == OFF.pack(3, 50) + OFF.pack(7, 120) + OFF.pack(10, 300)


def test_offset_index_lookup(tmp_path: Path) -> None:
    idx = filled_offset_index(tmp_path)
    assert len(idx) == 3
    assert idx.lookup(100) == (100, 0)  # below the first entry: the segment start
    assert idx.lookup(102) == (100, 0)
    assert idx.lookup(103) == (103, 50)
    assert idx.lookup(106) == (103, 50)
    assert idx.lookup(107) == (107, 120)
    assert idx.lookup(109) == (107, 120)
    assert idx.lookup(110) == (110, 300)
    assert idx.lookup(10**12) == (110, 300)
    assert idx.last_position() == 300
    idx.close()


def test_empty_offset_index_lookup(tmp_path: Path) -> None:
    idx = offset_index(tmp_path)
    assert idx.lookup(100) == (100, 0)
    assert idx.lookup(5000) == (100, 0)
    assert idx.last_position() == 0
    idx.close()


@pytest.mark.parametrize(("offset", "position"), [(107, 400), (111, 300), (109, 400), (105, 10)])
def test_offset_index_rejects_entries_not_after_the_last(
    tmp_path: Path, offset: int, position: int
) -> None:
    idx = filled_offset_index(tmp_path)
    with pytest.raises(ValueError):
        idx.append(offset, position)
    assert list(idx.keys) == [103, 107, 110]
    assert list(idx.values) == [50, 120, 300]
    idx.close()
    assert (tmp_path / "00000000000000000100.index").stat().st_size == 24


@pytest.mark.parametrize(
    ("truncate_to", "kept"),
    [(111, 3), (110, 2), (108, 2), (107, 1), (104, 1), (103, 0), (100, 0)],
)
def test_offset_index_truncate_to(tmp_path: Path, truncate_to: int, kept: int) -> None:
    idx = filled_offset_index(tmp_path)
    idx.truncate_to(truncate_to)
    entries = [(103, 50), (107, 120), (110, 300)][:kept]
    assert list(zip(idx.keys, idx.values, strict=True)) == entries
    idx.close()
    data = (tmp_path / "00000000000000000100.index").read_bytes()
    assert data == b"".join(OFF.pack(o - BASE, p) for o, p in entries)


def test_offset_index_append_after_truncate(tmp_path: Path) -> None:
    idx = filled_offset_index(tmp_path)
    idx.truncate_to(107)
    idx.append(105, 90)
    idx.close()
    data = (tmp_path / "00000000000000000100.index").read_bytes()
    assert data == OFF.pack(3, 50) + OFF.pack(5, 90)


def test_offset_index_reset(tmp_path: Path) -> None:
    idx = filled_offset_index(tmp_path)
    idx.reset()
    assert len(idx) == 0
    assert idx.lookup(110) == (100, 0)
    idx.close()
    assert (tmp_path / "00000000000000000100.index").read_bytes() == b""


def test_offset_index_reopen_gives_the_same_entries(tmp_path: Path) -> None:
    idx = filled_offset_index(tmp_path)
    idx.flush()
    idx.close()
    again = offset_index(tmp_path)
    again.load()
    assert list(again.keys) == [103, 107, 110]
    assert list(again.values) == [50, 120, 300]
    assert again.lookup(108) == (107, 120)
    # appends continue after the loaded entries
    again.append(111, 301)
    again.close()
    third = offset_index(tmp_path)
    third.load()
    assert list(third.keys) == [103, 107, 110, 111]
    third.close()


def test_offset_index_is_full_at_max_bytes(tmp_path: Path) -> None:
    idx = offset_index(tmp_path, max_bytes=20)  # 20 // 8 = 2 entries
    assert idx.max_entries == 2
    assert not idx.is_full
    idx.append(101, 10)
    assert not idx.is_full
    idx.append(102, 20)
    assert idx.is_full
    idx.close()


def test_offset_index_is_full_follows_truncation_reset_and_reload(tmp_path: Path) -> None:
    # is_full is a plain attribute (read on every append): every change must keep it current.
    idx = offset_index(tmp_path, max_bytes=24)  # 3 entries
    for i in range(3):
        idx.append(101 + i, 10 * (i + 1))
    assert idx.is_full
    idx.truncate_to(103)
    assert not idx.is_full
    idx.append(103, 30)
    assert idx.is_full
    idx.close()
    again = offset_index(tmp_path, max_bytes=24)
    assert not again.is_full
    again.load()
    assert again.is_full
    again.reset()
    assert not again.is_full
    again.close()
    smaller = offset_index(tmp_path, max_bytes=8)  # a file holding more than max entries
    smaller.append(101, 10)
    assert smaller.is_full
    smaller.close()


@pytest.mark.parametrize("size", [1, 7, 9, 15, 17])
def test_offset_index_load_rejects_partial_entry(tmp_path: Path, size: int) -> None:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes((OFF.pack(1, 8) + OFF.pack(2, 16) + OFF.pack(3, 24))[:size])
    idx = offset_index(tmp_path)
    with pytest.raises(CorruptIndexError) as info:
        idx.load()
    assert isinstance(info.value, LogStorageError)
    assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert len(idx) == 0
    idx.close()


@pytest.mark.parametrize(
    "entries",
    [
        [(1, 8), (1, 16)],  # repeated offset
        [(2, 8), (1, 16)],  # decreasing offset
        [(1, 16), (2, 16)],  # repeated position
        [(1, 16), (2, 8)],  # decreasing position
        [(-1, 8)],  # below the segment base
        [(1, -8)],  # negative position
        [(1, 8), (2, 16), (3, 24), (3, 32)],
    ],
)
def test_offset_index_load_rejects_bad_entries(
    tmp_path: Path, entries: list[tuple[int, int]]
) -> None:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(b"".join(OFF.pack(*e) for e in entries))
    idx = offset_index(tmp_path)
    with pytest.raises(CorruptIndexError):
        idx.load()
    assert len(idx) == 0
    idx.close()


def test_offset_index_load_accepts_an_entry_at_the_base(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(OFF.pack(0, 0) + OFF.pack(4, 70))
    idx = offset_index(tmp_path)
    idx.load()
    assert list(idx.keys) == [100, 104]
    assert list(idx.values) == [0, 70]
    idx.close()


def test_reset_after_failed_load_empties_the_file(tmp_path: Path) -> None:
    # the keys were never loaded, but the file must still be cut (recovery rebuilds on it)
    path = tmp_path / "00000000000000000100.index"
    path.write_bytes(b"\x01" * 13)  # not a multiple of 8
    idx = offset_index(tmp_path)
    with pytest.raises(CorruptIndexError):
        idx.load()
    idx.reset()
    idx.append(101, 10)
    idx.close()
    assert path.read_bytes() == OFF.pack(1, 10)


# --- TimeIndex --------------------------------------------------------------------------------


def filled_time_index(tmp_path: Path) -> TimeIndex:
    idx = time_index(tmp_path)
    idx.maybe_append(1000, 102)
    idx.maybe_append(1000, 104)  # not larger: ignored
    idx.maybe_append(999, 105)  # smaller: ignored
    idx.maybe_append(2000, 105)
    idx.maybe_append(2500, 105)  # same offset, larger timestamp: kept (offsets non-decreasing)
    idx.maybe_append(3000, 120)
    return idx


def test_time_index_maybe_append_keeps_only_growing_timestamps(tmp_path: Path) -> None:
    idx = filled_time_index(tmp_path)
    assert list(idx.keys) == [1000, 2000, 2500, 3000]
    assert [idx.lookup(t)[1] for t in (1000, 2000, 2500, 3000)] == [102, 105, 105, 120]
    idx.close()
    data = (tmp_path / "00000000000000000100.timeindex").read_bytes()
    assert data == TIME.pack(1000, 2) + TIME.pack(2000, 5) + TIME.pack(2500, 5) + TIME.pack(
        3000, 20
    )


def test_time_index_lookup(tmp_path: Path) -> None:
    idx = filled_time_index(tmp_path)
    assert idx.lookup(0) == (-1, 100)
    assert idx.lookup(999) == (-1, 100)
    assert idx.lookup(1000) == (1000, 102)
    assert idx.lookup(1999) == (1000, 102)
    assert idx.lookup(2000) == (2000, 105)
    assert idx.lookup(2700) == (2500, 105)
    assert idx.lookup(3000) == (3000, 120)
    assert idx.lookup(10**15) == (3000, 120)
    assert idx.last_entry() == (3000, 120)
    idx.close()


def test_empty_time_index(tmp_path: Path) -> None:
    idx = time_index(tmp_path)
    assert idx.lookup(5) == (-1, 100)
    assert idx.last_entry() == (-1, 100)
    idx.close()


def test_time_index_rejects_offsets_going_backwards(tmp_path: Path) -> None:
    idx = filled_time_index(tmp_path)
    with pytest.raises(ValueError):
        idx.maybe_append(4000, 119)
    assert list(idx.keys) == [1000, 2000, 2500, 3000]
    idx.close()


@pytest.mark.parametrize(
    ("truncate_to", "kept"),
    [(121, 4), (120, 3), (106, 3), (105, 1), (103, 1), (102, 0), (100, 0)],
)
def test_time_index_truncate_to(tmp_path: Path, truncate_to: int, kept: int) -> None:
    idx = filled_time_index(tmp_path)
    idx.truncate_to(truncate_to)
    entries = [(1000, 102), (2000, 105), (2500, 105), (3000, 120)][:kept]
    assert [(t, idx.lookup(t)[1]) for t in idx.keys] == entries
    idx.close()
    data = (tmp_path / "00000000000000000100.timeindex").read_bytes()
    assert data == b"".join(TIME.pack(t, o - BASE) for t, o in entries)


def test_time_index_reopen_gives_the_same_entries(tmp_path: Path) -> None:
    idx = filled_time_index(tmp_path)
    idx.flush()
    idx.close()
    again = time_index(tmp_path)
    again.load()
    assert list(again.keys) == [1000, 2000, 2500, 3000]
    assert list(again.values) == [2, 5, 5, 20]
    assert again.last_entry() == (3000, 120)
    again.close()


def test_time_index_is_full_at_max_bytes(tmp_path: Path) -> None:
    idx = time_index(tmp_path, max_bytes=64)  # 64 // 12 = 5
    assert idx.max_entries == 5
    for i in range(5):
        assert not idx.is_full
        idx.maybe_append(1000 + i, 100 + i)
    assert idx.is_full
    idx.close()


def test_time_index_is_full_follows_truncation_and_reload(tmp_path: Path) -> None:
    idx = time_index(tmp_path, max_bytes=24)  # 2 entries
    idx.maybe_append(1000, 101)
    idx.maybe_append(1000, 102)  # not a new largest timestamp: no entry
    assert not idx.is_full
    idx.maybe_append(2000, 103)
    assert idx.is_full
    idx.truncate_to(103)
    assert not idx.is_full
    idx.maybe_append(3000, 104)
    idx.close()
    again = time_index(tmp_path, max_bytes=24)
    again.load()
    assert again.is_full
    again.close()


@pytest.mark.parametrize("size", [1, 11, 13, 23, 25])
def test_time_index_load_rejects_partial_entry(tmp_path: Path, size: int) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes((TIME.pack(1, 1) + TIME.pack(2, 2) + TIME.pack(3, 3))[:size])
    idx = time_index(tmp_path)
    with pytest.raises(CorruptIndexError):
        idx.load()
    assert len(idx) == 0
    idx.close()


@pytest.mark.parametrize(
    "entries",
    [
        [(1000, 1), (1000, 2)],  # repeated timestamp
        [(2000, 1), (1000, 2)],  # decreasing timestamp
        [(1000, 2), (2000, 1)],  # decreasing offset
        [(1000, -1)],  # offset below the base
    ],
)
def test_time_index_load_rejects_bad_entries(
    tmp_path: Path, entries: list[tuple[int, int]]
) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(b"".join(TIME.pack(*e) for e in entries))
    idx = time_index(tmp_path)
    with pytest.raises(CorruptIndexError):
        idx.load()
    assert len(idx) == 0
    idx.close()


def test_time_index_load_accepts_repeated_offsets(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.timeindex"
    path.write_bytes(TIME.pack(1000, 3) + TIME.pack(2000, 3))
    idx = time_index(tmp_path)
    idx.load()
    assert idx.lookup(1500) == (1000, 103)
    assert idx.last_entry() == (2000, 103)
    idx.close()


def test_delete_and_rename(tmp_path: Path) -> None:
    idx = filled_offset_index(tmp_path)
    new_path = tmp_path / "renamed.index"
    idx.rename(new_path)
    assert not (tmp_path / "00000000000000000100.index").exists()
    assert new_path.read_bytes() == OFF.pack(3, 50) + OFF.pack(7, 120) + OFF.pack(10, 300)
    idx.delete()
    assert not new_path.exists()
