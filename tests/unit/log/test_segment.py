"""Segments: what the leader writes (stamped headers, producer bytes untouched), reads by offset,
sparse index entries, and the roll rules (size, time, full index, offset overflow)."""

from __future__ import annotations

import random
import struct
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.errors import OffsetOutOfRangeError
from protocol.compression import Compression
from protocol.errors import CorruptRecordError, ErrorCode
from protocol.records import decode_batches, read_header, validate_batch
from tests.unit.log.helpers import (
    T0,
    consume_all,
    make_batch,
    open_log,
    read_bytes,
    read_headers,
    rewrite_header,
    seg_file_names,
    segment_files,
    split_batches,
    stamped,
    stored_batches,
)

# --- append: offsets and stamping -------------------------------------------------------------


def test_leader_append_assigns_offsets_from_the_leo_and_stamps_the_epoch(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    sent = [make_batch(1, tag=0), make_batch(3, tag=1), make_batch(2, tag=2)]
    infos = [log.append_as_leader(b, leader_epoch=7, now_ms=T0) for b in sent]
    assert [(i.first_offset, i.last_offset) for i in infos] == [(0, 0), (1, 3), (4, 5)]
    assert [(i.batch_count, i.record_count, i.byte_count) for i in infos] == [
        (1, 1, len(sent[0])),
        (1, 3, len(sent[1])),
        (1, 2, len(sent[2])),
    ]
    assert log.log_end_offset == 6

    on_disk = (tmp_path / "t-0" / "00000000000000000000.log").read_bytes()
    assert on_disk == stamped(sent[0], 0, 7) + stamped(sent[1], 1, 7) + stamped(sent[2], 4, 7)
    batches = split_batches(on_disk)  # checks every CRC
    for batch, producer, base in zip(batches, sent, [0, 1, 4], strict=True):
        header = read_header(batch)
        assert header.base_offset == base
        assert header.partition_leader_epoch == 7
        assert header.crc == read_header(producer).crc
        validate_batch(batch, 0, header)
        assert batch[16:] == producer[16:]
    assert [[r.offset for r in b.records] for b in decode_batches(on_disk)] == [
        [0],
        [1, 2, 3],
        [4, 5],
    ]


def test_multiple_batches_in_one_append(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(make_batch(2, tag=9), leader_epoch=1, now_ms=T0)
    sent = [make_batch(1, tag=0, ts=T0 + 50), make_batch(4, tag=1), make_batch(2, tag=2)]
    info = log.append_as_leader(b"".join(sent), leader_epoch=3, now_ms=T0)
    assert (info.first_offset, info.last_offset) == (2, 8)
    assert (info.batch_count, info.record_count, info.byte_count) == (3, 7, sum(map(len, sent)))
    assert info.max_timestamp == T0 + 50
    assert log.log_end_offset == 9
    assert stored_batches(log)[1:] == [
        stamped(sent[0], 2, 3),
        stamped(sent[1], 3, 3),
        stamped(sent[2], 7, 3),
    ]
    assert [(e.epoch, e.start_offset) for e in log.leader_epoch_cache.entries()] == [(1, 0), (3, 2)]


@pytest.mark.parametrize("compression", list(Compression))
def test_compressed_batches_are_stored_as_sent(tmp_path: Path, compression: Compression) -> None:
    log = open_log(tmp_path / "t-0")
    sent = make_batch(5, compression=compression, value=b"z" * 100)
    log.append_as_leader(make_batch(1), leader_epoch=0, now_ms=T0)
    log.append_as_leader(sent, leader_epoch=0, now_ms=T0)
    assert stored_batches(log)[1] == stamped(sent, 1, 0)
    (batch,) = decode_batches(read_bytes(log, 3))
    assert [r.offset for r in batch.records] == [1, 2, 3, 4, 5]
    assert [r.value for r in batch.records] == [b"z" * 100 + f"/0/{i}".encode() for i in range(5)]


def test_leader_append_with_no_epoch_stamps_minus_one(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    sent = make_batch(2, partition_leader_epoch=5)
    log.append_as_leader(sent, leader_epoch=-1, now_ms=T0)
    assert stored_batches(log) == [stamped(sent, 0, -1)]
    assert log.leader_epoch_cache.entries() == []


# --- reads -----------------------------------------------------------------------------------


@pytest.fixture
def six(tmp_path: Path):
    """Batches [0], [1..3], [4..5], [6..9] in one segment."""
    log = open_log(tmp_path / "t-0")
    for tag, count in enumerate([1, 3, 2, 4]):
        log.append_as_leader(make_batch(count, tag=tag), leader_epoch=2, now_ms=T0)
    yield log
    log.close()


def test_read_returns_from_the_batch_holding_the_offset(six) -> None:
    stored = stored_batches(six)
    whole = b"".join(stored)
    starts = [0, 1, 1, 1, 2, 2, 3, 3, 3, 3]  # batch index holding each offset
    for offset, first in enumerate(starts):
        info = six.read(offset, 1 << 20)
        assert info.fetch_offset == offset
        assert info.read() == b"".join(stored[first:]), offset
    assert six.read(0, 1 << 20).read() == whole


def test_read_respects_max_bytes_with_a_partial_last_batch(six) -> None:
    stored = stored_batches(six)
    limit = len(stored[0]) + len(stored[1]) + 10
    data = read_bytes(six, 0, limit)
    assert data == b"".join(stored)[:limit]
    assert [h.base_offset for h in read_headers(six, 0, limit)] == [0, 1]
    exact = len(stored[0]) + len(stored[1])
    assert read_bytes(six, 0, exact) == stored[0] + stored[1]


def test_read_min_one_batch_returns_the_first_batch_whole(six) -> None:
    stored = stored_batches(six)
    assert read_bytes(six, 1, 1) == stored[1]
    assert read_bytes(six, 3, 0) == stored[1]
    assert read_bytes(six, 1, len(stored[1]) - 1) == stored[1]
    # without min_one_batch the slice stops at max_bytes, inside the batch
    partial = read_bytes(six, 1, 10, min_one_batch=False)
    assert partial == stored[1][:10]
    assert list(decode_batches(partial)) == []


def test_read_never_returns_a_batch_at_or_above_max_offset(six) -> None:
    stored = stored_batches(six)
    # HW on a batch boundary
    assert read_bytes(six, 0, max_offset=4) == stored[0] + stored[1]
    assert read_bytes(six, 1, max_offset=4) == stored[1]
    assert read_bytes(six, 4, max_offset=4) == b""
    assert read_bytes(six, 0, max_offset=0) == b""
    # HW inside a batch: that batch is not yet committed, so it is not returned
    assert read_bytes(six, 0, max_offset=2) == stored[0]
    assert read_bytes(six, 1, max_offset=2) == b""
    assert read_bytes(six, 4, max_offset=9) == stored[2]
    # min_one_batch does not override the HW
    assert read_bytes(six, 1, 1, max_offset=3) == b""
    # max_offset beyond the LEO is the LEO
    assert read_bytes(six, 0, max_offset=1000) == b"".join(stored)
    # max_offset below the fetch offset: nothing
    assert read_bytes(six, 5, max_offset=3) == b""


def test_read_with_random_high_watermarks_never_crosses_it(tmp_path: Path) -> None:
    rng = random.Random(1234)
    config = LogConfig(segment_bytes=900, index_interval_bytes=150)
    log = open_log(tmp_path / "t-0", config)
    for tag in range(60):
        log.append_as_leader(make_batch(rng.randint(1, 4), tag=tag), leader_epoch=0, now_ms=T0)
    assert len(log.segments) > 3
    leo = log.log_end_offset
    bases = [h.base_offset for h in (read_header(b) for b in stored_batches(log))]
    for _ in range(300):
        hw = rng.randint(0, leo)
        offset = rng.randint(0, leo)
        max_bytes = rng.choice([1, 100, 500, 1 << 20])
        headers = read_headers(log, offset, max_bytes, max_offset=hw)
        for h in headers:
            assert h.last_offset < hw, (offset, hw, h)
        if headers:
            assert headers[0].base_offset <= offset <= headers[0].last_offset
        elif offset < hw:
            # nothing returned although offset < hw: only when its batch straddles the HW
            holder = max(b for b in bases if b <= offset)
            nxt = [b for b in bases if b > holder]
            end = nxt[0] if nxt else leo
            assert end > hw, (offset, hw)
    # consumers reading up to the HW see exactly the batches below it
    hw = bases[len(bases) // 2]
    got = consume_all(log, 0, max_offset=hw)
    assert [read_header(b).base_offset for b in got] == [b for b in bases if b < hw]
    log.close()


def test_read_at_the_leo_is_empty(six) -> None:
    info = six.read(10, 1 << 20)
    assert info.slice is None
    assert info.read() == b""
    assert six.read(10, 1 << 20, max_offset=10).read() == b""


@pytest.mark.parametrize("offset", [11, 12, 1000, -1])
def test_read_outside_the_log_raises_offset_out_of_range(six, offset: int) -> None:
    with pytest.raises(OffsetOutOfRangeError) as info:
        six.read(offset, 1 << 20)
    assert info.value.code == ErrorCode.OFFSET_OUT_OF_RANGE == 1


def test_read_below_log_start_raises(six) -> None:
    six.maybe_increment_log_start_offset(4)
    with pytest.raises(OffsetOutOfRangeError):
        six.read(3, 1 << 20)
    assert read_headers(six, 4)[0].base_offset == 4


def test_read_of_an_empty_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.read(0, 100).read() == b""
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    log.close()


# --- sparse index entries and offset lookup ----------------------------------------------------


def test_index_entry_every_index_interval_bytes(tmp_path: Path) -> None:
    batch_size = len(make_batch(1))
    config = LogConfig(index_interval_bytes=2 * batch_size)
    log = open_log(tmp_path / "t-0", config)
    for tag in range(10):
        log.append_as_leader(make_batch(1, tag=tag, ts=T0 + tag), leader_epoch=0, now_ms=T0)
    seg = log.active_segment
    # an entry is made when more than index_interval_bytes were written since the last one:
    # batches 0,1,2 (3 sizes > 2 sizes) then entry at 3; 3,4,5 then entry at 6; 6,7,8 then 9.
    assert list(seg.offset_index.keys) == [3, 6, 9]
    assert list(seg.offset_index.values) == [3 * batch_size, 6 * batch_size, 9 * batch_size]
    assert list(seg.time_index.keys) == [T0 + 3, T0 + 6, T0 + 9]
    assert [seg.time_index.lookup(t)[1] for t in seg.time_index.keys] == [3, 6, 9]
    log.close()
    data = (tmp_path / "t-0" / "00000000000000000000.index").read_bytes()
    assert data == b"".join(struct.pack(">ii", o, o * batch_size) for o in (3, 6, 9))


def test_index_interval_zero_indexes_every_batch_but_the_first(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=0))
    for tag in range(5):
        log.append_as_leader(make_batch(2, tag=tag), leader_epoch=0, now_ms=T0)
    assert list(log.active_segment.offset_index.keys) == [2, 4, 6, 8]
    log.close()


def test_every_offset_is_found_through_the_sparse_index(tmp_path: Path) -> None:
    rng = random.Random(99)
    config = LogConfig(index_interval_bytes=120, segment_bytes=4000)
    log = open_log(tmp_path / "t-0", config)
    for tag in range(200):
        count = rng.randint(1, 3)
        log.append_as_leader(make_batch(count, tag=tag, value=b"v" * rng.randint(0, 40)), 0, T0)
    assert len(log.segments) >= 3
    for seg in log.segments:
        assert len(seg.offset_index) >= 10
        raw = seg.log_path.read_bytes()
        for key, pos in zip(seg.offset_index.keys, seg.offset_index.values, strict=True):
            assert read_header(raw, pos).base_offset == key  # entries point at batch starts
    for offset in range(log.log_end_offset):
        (first, *_) = read_headers(log, offset, 1)
        assert first.base_offset <= offset <= first.last_offset, offset
        assert first.partition_leader_epoch == 0
    log.close()


# --- roll --------------------------------------------------------------------------------------


def test_roll_by_size(tmp_path: Path) -> None:
    size = len(make_batch(1))
    config = LogConfig(segment_bytes=3 * size)
    log = open_log(tmp_path / "t-0", config)
    for tag in range(7):
        log.append_as_leader(make_batch(1, tag=tag), leader_epoch=0, now_ms=T0)
        if tag == 2:
            assert len(log.segments) == 1  # exactly segment_bytes: no roll yet
        if tag == 3:
            assert log.recovery_point == 3
    assert [s.base_offset for s in log.segments] == [0, 3, 6]
    assert [s.size for s in log.segments] == [3 * size, 3 * size, size]
    assert seg_file_names(tmp_path / "t-0") == segment_files(0, 3, 6)
    assert log.recovery_point == 6
    assert [read_header(b).base_offset for b in consume_all(log)] == list(range(7))
    log.close()


def test_roll_by_size_counts_the_whole_request(tmp_path: Path) -> None:
    size = len(make_batch(1))
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=4 * size))
    log.append_as_leader(make_batch(1), 0, T0)
    log.append_as_leader(make_batch(1, tag=1) * 1 + make_batch(1, tag=2), 0, T0)
    assert [s.base_offset for s in log.segments] == [0]
    log.append_as_leader(make_batch(1, tag=3) + make_batch(1, tag=4), 0, T0)  # 5 > 4 sizes
    assert [s.base_offset for s in log.segments] == [0, 3]
    assert log.segments[1].size == 2 * size
    log.close()


def test_roll_by_time_uses_batch_timestamps(tmp_path: Path) -> None:
    config = LogConfig(segment_ms=1000)
    log = open_log(tmp_path / "t-0", config)
    far_future = T0 + 10**9  # now_ms is ignored once the segment has a batch with a timestamp
    # the first batch's max timestamp (T0 + 400) is the segment's rolling base
    log.append_as_leader(make_batch(2, timestamps=[T0, T0 + 400]), 0, far_future)
    log.append_as_leader(make_batch(1, ts=T0 + 900), 0, far_future)
    log.append_as_leader(make_batch(1, ts=T0 + 1400), 0, far_future)  # waited 1000: no roll
    assert [s.base_offset for s in log.segments] == [0]
    log.append_as_leader(make_batch(1, ts=T0 + 1401), 0, T0)  # waited 1001: roll
    assert [s.base_offset for s in log.segments] == [0, 4]
    # a batch with an older timestamp does not roll, and the new segment's base is T0 + 1401
    log.append_as_leader(make_batch(1, ts=T0 + 5), 0, far_future)
    log.append_as_leader(make_batch(1, ts=T0 + 2401), 0, far_future)
    assert [s.base_offset for s in log.segments] == [0, 4]
    log.append_as_leader(make_batch(1, ts=T0 + 2402), 0, far_future)
    assert [s.base_offset for s in log.segments] == [0, 4, 7]
    assert seg_file_names(tmp_path / "t-0") == segment_files(0, 4, 7)
    assert log.recovery_point == 7
    log.close()


def test_roll_by_time_after_reopen_uses_the_first_batch(tmp_path: Path) -> None:
    config = LogConfig(segment_ms=1000)
    log = open_log(tmp_path / "t-0", config)
    log.append_as_leader(make_batch(1, ts=T0), 0, T0)
    log.append_as_leader(make_batch(1, ts=T0 + 800), 0, T0)
    log.close()
    log = open_log(tmp_path / "t-0", config, now_ms=T0 + 10**9)
    log.append_as_leader(make_batch(1, ts=T0 + 1000), 0, T0 + 10**9)
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(1, ts=T0 + 1001), 0, T0 + 10**9)
    assert [s.base_offset for s in log.segments] == [0, 3]
    log.close()


def test_roll_when_the_time_index_is_full(tmp_path: Path) -> None:
    # 64 bytes: 8 offset entries (8 bytes each) but only 5 time entries (12 bytes each)
    config = LogConfig(segment_index_bytes=64, index_interval_bytes=0)
    log = open_log(tmp_path / "t-0", config)
    for i in range(14):
        log.append_as_leader(make_batch(1, tag=i, ts=T0 + i), 0, T0)
    # batch 0 makes no entry; batches 1..5 make 5 entries: full; batch 6 rolls
    assert [s.base_offset for s in log.segments] == [0, 6, 12]
    assert [len(s.time_index) for s in log.segments] == [5, 5, 1]
    assert [len(s.offset_index) for s in log.segments] == [5, 5, 1]
    assert seg_file_names(tmp_path / "t-0") == segment_files(0, 6, 12)
    log.close()


def test_roll_when_the_offset_index_is_full(tmp_path: Path) -> None:
    config = LogConfig(segment_index_bytes=64, index_interval_bytes=0)
    log = open_log(tmp_path / "t-0", config)
    for i in range(20):
        log.append_as_leader(make_batch(1, tag=i, ts=T0), 0, T0)  # one time entry only
    assert [s.base_offset for s in log.segments] == [0, 9, 18]
    assert [len(s.offset_index) for s in log.segments] == [8, 8, 1]
    log.close()


def test_roll_when_offsets_would_overflow_the_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=0))
    log.append_as_leader(make_batch(2), 0, T0)
    # a batch claiming 2**31 - 1 records: its last offset, 2**31, is past what a segment based
    # at 0 can index (relative offsets are int32), so the log rolls first. A leader refuses
    # it (its records section holds one record); a follower takes the leader's bytes as they are.
    huge = make_batch(1, tag=1)
    huge = rewrite_header(huge, "i", 23, 2**31 - 2)  # last_offset_delta
    huge = rewrite_header(huge, "i", 57, 2**31 - 1)  # record_count
    with pytest.raises(CorruptRecordError, match="record_count 2147483647"):
        log.append_as_leader(huge, 0, T0)
    info = log.append_as_follower(rewrite_header(huge, "q", 0, 2), T0)
    assert (info.first_offset, info.last_offset) == (2, 2**31)
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert log.log_end_offset == 2**31 + 1
    log.append_as_leader(make_batch(1, tag=2), 0, T0)
    assert [s.base_offset for s in log.segments] == [0, 2]
    assert [h.base_offset for h in read_headers(log, 2**31 + 1)] == [2**31 + 1]
    assert [h.base_offset for h in read_headers(log, 5)] == [2, 2**31 + 1]
    log.close()
    log = open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=0))
    assert log.log_end_offset == 2**31 + 2
    log.close()


def test_explicit_roll_and_empty_active_segment(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    assert log.roll(T0) is log.active_segment  # nothing to roll
    assert len(log.segments) == 1
    log.append_as_leader(make_batch(3), 0, T0)
    new = log.roll(T0)
    assert new.base_offset == 3
    assert log.recovery_point == 3
    assert log.roll(T0) is new  # empty again
    assert seg_file_names(tmp_path / "t-0") == segment_files(0, 3)
    log.append_as_leader(make_batch(1, tag=1), 0, T0)
    assert [read_header(b).base_offset for b in consume_all(log)] == [0, 3]
    log.close()


def test_read_across_a_segment_boundary(tmp_path: Path) -> None:
    size = len(make_batch(2))
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=2 * size))
    for tag in range(5):
        log.append_as_leader(make_batch(2, tag=tag), 0, T0)
    assert [s.base_offset for s in log.segments] == [0, 4, 8]
    stored = stored_batches(log)
    # a read returns data from one segment only (as Kafka): the rest of the segment
    assert read_bytes(log, 2) == stored[1]
    assert read_bytes(log, 3) == stored[1]
    assert read_bytes(log, 4) == stored[2] + stored[3]
    assert read_bytes(log, 1) == stored[0] + stored[1]
    # HW at a segment base: the read stops at the end of the previous segment
    assert read_bytes(log, 2, max_offset=4) == stored[1]
    assert read_bytes(log, 4, max_offset=4) == b""
    assert read_bytes(log, 4, max_offset=7) == stored[2]
    assert read_bytes(log, 9) == stored[4]
    assert consume_all(log) == stored
    log.close()
