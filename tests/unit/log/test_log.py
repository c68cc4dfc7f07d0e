"""Log: validation of producer and follower appends, timestamp lookup, truncation, retention."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.checkpoints import EpochEntry
from broker.log.errors import MessageTooLargeError, OffsetOutOfRangeError
from broker.log.log import LEADER_EPOCH_CHECKPOINT_FILE, Log
from protocol.compression import Compression
from protocol.errors import CorruptRecordError, ErrorCode, HighwaterError, InvalidRecordError
from protocol.records import build_batch_from_entries, decode_batches, read_header
from tests.unit.log.helpers import (
    ATTRIBUTES_AT,
    T0,
    consume_all,
    make_batch,
    open_log,
    read_headers,
    record_offsets_and_timestamps,
    rewrite_header,
    seg_file_names,
    segment_files,
    snapshot,
    stored_batches,
)


def E(epoch: int, start: int) -> EpochEntry:
    return EpochEntry(epoch, start)


@pytest.fixture
def log(tmp_path: Path):
    """A log holding offsets 0..4 in two appends of epoch 1."""
    log = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=400))
    log.append_as_leader(make_batch(2, tag=0), leader_epoch=1, now_ms=T0)
    log.append_as_leader(make_batch(3, tag=1), leader_epoch=1, now_ms=T0)
    yield log
    log.close()


# --- producer validation ----------------------------------------------------------------------


def bad_crc() -> bytes:
    batch = bytearray(make_batch(2, tag=5))
    batch[-1] ^= 0x01
    return bytes(batch)


def with_attributes(attributes: int) -> bytes:
    return rewrite_header(make_batch(2, tag=5), "h", ATTRIBUTES_AT, attributes)


BAD_BATCHES = {
    "bad-crc": (bad_crc, ErrorCode.CORRUPT_MESSAGE),
    "crc-field-flipped": (
        lambda: rewrite_header(
            make_batch(1), "I", 17, read_header(make_batch(1)).crc ^ 1, fix_crc=False
        ),
        ErrorCode.CORRUPT_MESSAGE,
    ),
    "nonzero-base-offset": (lambda: make_batch(2, base_offset=5), ErrorCode.INVALID_RECORD),
    "too-large": (lambda: make_batch(1, value=b"x" * 500), ErrorCode.MESSAGE_TOO_LARGE),
    "codec-5": (lambda: with_attributes(5), ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    "codec-6": (lambda: with_attributes(6), ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    "codec-7": (lambda: with_attributes(7), ErrorCode.UNSUPPORTED_FOR_MESSAGE_FORMAT),
    "transactional": (lambda: with_attributes(0x10), ErrorCode.INVALID_RECORD),
    "control": (lambda: with_attributes(0x20), ErrorCode.INVALID_RECORD),
    "transactional-control": (lambda: with_attributes(0x30), ErrorCode.INVALID_RECORD),
    "log-append-time": (lambda: with_attributes(0x08), ErrorCode.INVALID_RECORD),
    "record-count-mismatch": (
        lambda: rewrite_header(make_batch(2), "i", 57, 3),
        ErrorCode.INVALID_RECORD,
    ),
    "zero-records": (
        lambda: rewrite_header(rewrite_header(make_batch(1), "i", 57, 0), "i", 23, -1),
        ErrorCode.INVALID_RECORD,
    ),
    "emptied": (lambda: _emptied_batch(0, producer_id=-1), ErrorCode.INVALID_RECORD),
    "emptied-idempotent": (lambda: _emptied_batch(0), ErrorCode.INVALID_RECORD),
    "truncated": (lambda: make_batch(2)[:-3], ErrorCode.CORRUPT_MESSAGE),
    "short-header": (lambda: make_batch(2)[:40], ErrorCode.CORRUPT_MESSAGE),
    "bad-magic": (lambda: rewrite_header(make_batch(1), "b", 16, 1), ErrorCode.CORRUPT_MESSAGE),
}


@pytest.mark.parametrize("kind", sorted(BAD_BATCHES))
def test_bad_producer_batch_is_rejected_and_nothing_changes(log: Log, kind: str) -> None:
    make, code = BAD_BATCHES[kind]
    before = snapshot(log)
    with pytest.raises(HighwaterError) as info:
        log.append_as_leader(make(), leader_epoch=2, now_ms=T0)
    assert info.value.code == code
    assert snapshot(log) == before
    assert log.log_end_offset == 5
    # the log is still usable
    assert log.append_as_leader(make_batch(1, tag=9), 2, T0).first_offset == 5


@pytest.mark.parametrize(
    ("kind", "bad_first"),
    [
        (kind, bad_first)
        for kind in sorted(BAD_BATCHES)
        for bad_first in (False, True)
        if not (bad_first and kind in ("truncated", "short-header"))  # a cut batch is last
    ],
)
def test_one_bad_batch_rejects_the_whole_request(log: Log, kind: str, bad_first: bool) -> None:
    make, code = BAD_BATCHES[kind]
    good = make_batch(2, tag=8)
    request = make() + good if bad_first else good + make_batch(1, tag=7) + make()
    before = snapshot(log)
    with pytest.raises(HighwaterError) as info:
        log.append_as_leader(request, leader_epoch=2, now_ms=T0)
    assert info.value.code == code
    assert snapshot(log) == before


def test_error_classes(log: Log) -> None:
    with pytest.raises(CorruptRecordError):
        log.append_as_leader(bad_crc(), 1, T0)
    with pytest.raises(InvalidRecordError):
        log.append_as_leader(make_batch(1, base_offset=1), 1, T0)
    with pytest.raises(MessageTooLargeError):
        log.append_as_leader(make_batch(1, value=b"x" * 500), 1, T0)


def test_empty_request_is_invalid(log: Log) -> None:
    before = snapshot(log)
    with pytest.raises(InvalidRecordError) as info:
        log.append_as_leader(b"", 1, T0)
    assert info.value.code == 87
    with pytest.raises(InvalidRecordError):
        log.append_as_follower(b"", T0)
    assert snapshot(log) == before


def test_batch_of_exactly_max_message_bytes_is_accepted(tmp_path: Path) -> None:
    batch = make_batch(1, value=b"q" * 200)
    log = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=len(batch)))
    assert log.append_as_leader(batch, 0, T0).last_offset == 0
    with pytest.raises(MessageTooLargeError) as info:
        log.append_as_leader(make_batch(1, value=b"q" * 201), 0, T0)
    assert info.value.code == 10
    log.close()


@pytest.mark.parametrize("compression", list(Compression))
def test_supported_codecs_are_accepted(log: Log, compression: Compression) -> None:
    info = log.append_as_leader(make_batch(3, compression=compression), 1, T0)
    assert (info.first_offset, info.last_offset) == (5, 7)


def test_request_larger_than_a_segment_is_rejected(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=200))
    log.append_as_leader(make_batch(1), 0, T0)
    before = snapshot(log)
    with pytest.raises(HighwaterError) as info:
        log.append_as_leader(make_batch(1, value=b"y" * 300), 0, T0)
    assert info.value.code == ErrorCode.RECORD_LIST_TOO_LARGE
    assert snapshot(log) == before
    log.close()


def huge_batch(tag: int) -> bytes:
    """A batch (valid CRC) claiming 2**31 - 1 records: the broker never decodes records, so
    only the header's counts matter to it."""
    batch = make_batch(1, tag=tag)
    batch = rewrite_header(batch, "i", 23, 2**31 - 2)  # last_offset_delta
    return rewrite_header(batch, "i", 57, 2**31 - 1)  # record_count


def test_request_overflowing_relative_offsets_is_all_or_nothing(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=0)
    log = open_log(tmp_path / "t-0", config)
    log.append_as_leader(make_batch(2), 0, T0)
    before = snapshot(log)
    request = huge_batch(1) + huge_batch(2) + make_batch(1, tag=3)
    try:
        info = log.append_as_leader(request, 0, T0)
    except HighwaterError:
        assert snapshot(log) == before
        expected_leo = 2
    else:
        expected_leo = 2 + 2 * (2**31 - 1) + 1
        assert info.last_offset == expected_leo - 1
    assert log.log_end_offset == expected_leo
    log.close()
    for clean in (True, False):
        log = open_log(tmp_path / "t-0", config, clean_shutdown=clean)
        assert log.log_end_offset == expected_leo
        log.close()


# --- follower append --------------------------------------------------------------------------


def leader_with_epochs(directory: Path) -> Log:
    leader = open_log(directory, LogConfig(segment_bytes=600))
    leader.append_as_leader(make_batch(2, tag=0), leader_epoch=1, now_ms=T0)
    leader.append_as_leader(make_batch(1, tag=1), leader_epoch=1, now_ms=T0)
    leader.append_as_leader(make_batch(3, tag=2), leader_epoch=3, now_ms=T0)
    leader.append_as_leader(make_batch(2, tag=3) + make_batch(1, tag=4), 4, T0)
    return leader


def test_follower_appends_the_leaders_batches_byte_for_byte(tmp_path: Path) -> None:
    leader = leader_with_epochs(tmp_path / "leader" / "t-0")
    follower = open_log(tmp_path / "follower" / "t-0", LogConfig(segment_bytes=600))
    offset = 0
    while offset < leader.log_end_offset:
        data = leader.read(offset, 250).read()  # partial batches at the end are cut off
        whole = stored_prefix(data)
        info = follower.append_as_follower(whole, T0)
        assert info.first_offset == offset
        offset = info.last_offset + 1
    assert follower.log_end_offset == leader.log_end_offset == 9
    assert stored_batches(follower) == stored_batches(leader)
    assert follower.leader_epoch_cache.entries() == [E(1, 0), E(3, 3), E(4, 6)]
    assert follower.leader_epoch_cache.entries() == leader.leader_epoch_cache.entries()
    follower.close()
    leader.close()


def test_follower_takes_batches_written_before_segment_bytes_was_lowered(
    tmp_path: Path,
) -> None:
    leader = leader_with_epochs(tmp_path / "leader" / "t-0")
    data = leader.read(0, 1 << 20).read()
    follower = open_log(tmp_path / "follower" / "t-0", LogConfig(segment_bytes=600))
    follower.append_as_follower(data[: read_header(data, 0).size], T0)
    follower.config = LogConfig(segment_bytes=128)  # lowered: the rest is larger than that
    rest = data[read_header(data, 0).size :]
    assert len(rest) > 128
    info = follower.append_as_follower(rest, T0)
    assert info.last_offset + 1 == follower.log_end_offset == leader.log_end_offset
    assert stored_batches(follower) == stored_batches(leader)
    with pytest.raises(HighwaterError):  # a producer's request is still held to the limit
        follower.append_as_leader(make_batch(9, tag=5), leader_epoch=4, now_ms=T0)
    follower.close()
    leader.close()


def stored_prefix(data: bytes) -> bytes:
    """The whole batches at the start of `data`."""
    pos = 0
    while len(data) - pos >= 61:
        size = read_header(data, pos).size
        if pos + size > len(data):
            break
        pos += size
    return data[:pos]


def follower_batch(base: int, count: int, epoch: int, tag: int = 0) -> bytes:
    return make_batch(count, tag=tag, base_offset=base, partition_leader_epoch=epoch)


@pytest.mark.parametrize(
    "request_batches",
    [
        [(1, 2, 5)],  # starts before the LEO
        [(2, 2, 5), (3, 1, 6)],  # overlapping batches
        [(2, 2, 5), (4, 1, 6), (4, 1, 7)],
    ],
)
def test_follower_batches_must_not_go_back_below_the_leo(
    tmp_path: Path, request_batches: list[tuple[int, int, int]]
) -> None:
    follower = open_log(tmp_path / "t-0")
    follower.append_as_follower(follower_batch(0, 2, epoch=4), T0)
    before = snapshot(follower)
    request = b"".join(
        follower_batch(b, c, e, tag=i) for i, (b, c, e) in enumerate(request_batches)
    )
    with pytest.raises(InvalidRecordError) as info:
        follower.append_as_follower(request, T0)
    assert info.value.code == 87
    assert snapshot(follower) == before
    assert follower.leader_epoch_cache.entries() == [E(4, 0)]
    follower.close()


def test_follower_keeps_the_leaders_offsets_across_compacted_gaps(tmp_path: Path) -> None:
    """A compacted leader's log has offsets with no record: the follower appends past the
    gap, keeps every offset as the leader has it, and reads skip the gap."""
    follower = open_log(tmp_path / "t-0")
    follower.append_as_follower(follower_batch(0, 2, epoch=4), T0)
    follower.append_as_follower(follower_batch(5, 2, epoch=4) + follower_batch(9, 1, epoch=5), T0)
    assert follower.log_end_offset == 10
    assert [(h.base_offset, h.next_offset) for h in follower.iter_batch_headers()] == [
        (0, 2),
        (5, 7),
        (9, 10),
    ]
    data = follower.read(3, 1 << 20).read()
    assert [b.header.base_offset for b in decode_batches(data)] == [5, 9]
    follower.close()
    reopened = open_log(tmp_path / "t-0", clean_shutdown=False)
    assert reopened.log_end_offset == 10
    reopened.close()


def _gapped_batch(base_offset: int) -> bytes:
    """Two records at deltas 0 and 2 of a batch spanning three offsets (a cleaned batch)."""
    entries = [(0, 0, b"a", b"1", ()), (0, 2, b"b", b"2", ())]
    return build_batch_from_entries(
        entries, base_timestamp=T0, max_timestamp=T0, base_offset=base_offset,
        partition_leader_epoch=4, last_offset_delta=2,
    )  # fmt: skip


def _emptied_batch(base_offset: int, producer_id: int = 8) -> bytes:
    """A producer's last batch the cleaner emptied: two offsets, sequences 5-6, no records."""
    return build_batch_from_entries(
        (), base_timestamp=T0, max_timestamp=T0, base_offset=base_offset,
        producer_id=producer_id, producer_epoch=0 if producer_id >= 0 else -1,
        base_sequence=5 if producer_id >= 0 else -1, partition_leader_epoch=4,
        last_offset_delta=1,
    )  # fmt: skip


def test_an_emptied_batch_is_a_followers_not_a_producers(tmp_path: Path) -> None:
    """Kafka's BatchRetention.RETAIN_EMPTY: the leader's cleaner keeps a producer's last batch
    with no records; a follower takes it (offsets, producer state), reads and recovers past
    it. A producer's batch with no records is refused (the BAD_BATCHES cases "emptied")."""
    follower = open_log(tmp_path / "t-0")
    follower.append_as_follower(_gapped_batch(0) + _emptied_batch(3), T0)
    follower.append_as_follower(make_batch(1, base_offset=5, partition_leader_epoch=4), T0)
    assert follower.log_end_offset == 6
    entry = follower.producer_state.producers[8]
    assert (entry.last_seq, entry.last_offset) == (6, 4)
    batches = list(decode_batches(follower.read(0, 1 << 20).read()))
    assert [(b.header.base_offset, len(b.records)) for b in batches] == [(0, 2), (3, 0), (5, 1)]
    assert [read_header(b).base_offset for b in consume_all(follower, 4)] == [3, 5]
    follower.close()
    reopened = open_log(tmp_path / "t-0", clean_shutdown=False)  # recovery re-validates all
    assert reopened.log_end_offset == 6
    assert [h.record_count for h in reopened.iter_batch_headers()] == [2, 0, 1]
    assert reopened.producer_state.producers[8].last_seq == 6
    reopened.close()


def test_a_cleaned_batch_with_gaps_is_a_followers_not_a_producers(tmp_path: Path) -> None:
    """Kafka's LogValidator: a producer's batch is dense; the leader's cleaned batches reach
    followers with gaps inside and keep their offsets."""
    log = open_log(tmp_path / "t-0")
    with pytest.raises(InvalidRecordError, match="dense"):
        log.append_as_leader(_gapped_batch(0), 4, T0)
    assert log.log_end_offset == 0
    log.append_as_follower(_gapped_batch(0), T0)
    assert log.log_end_offset == 3
    records = [r for b in decode_batches(log.read(0, 1 << 20).read()) for r in b.records]
    assert [(r.offset, r.key) for r in records] == [(0, b"a"), (2, b"b")]
    log.close()


def test_follower_rejects_corrupt_batches(tmp_path: Path) -> None:
    follower = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=300))
    follower.append_as_follower(follower_batch(0, 2, epoch=4), T0)
    before = snapshot(follower)
    good = follower_batch(2, 1, epoch=5)
    corrupt = bytearray(follower_batch(3, 1, epoch=6))
    corrupt[-2] ^= 0x40
    with pytest.raises(CorruptRecordError):
        follower.append_as_follower(good + bytes(corrupt), T0)
    assert snapshot(follower) == before
    follower.close()


def test_follower_takes_batches_over_its_max_message_bytes(tmp_path: Path) -> None:
    """The leader accepted them, maybe under a larger max.message.bytes (a change reaches the
    replicas one by one; batches written before it was lowered stay): as Kafka's
    appendAsFollower, a follower does not check their size."""
    follower = open_log(tmp_path / "t-0", LogConfig(max_message_bytes=300))
    large = make_batch(1, value=b"x" * 400, base_offset=0)
    assert follower.append_as_follower(large, T0).last_offset == 0
    assert follower.log_end_offset == 1
    follower.close()


def test_follower_keeps_the_leaders_epoch_and_offsets(tmp_path: Path) -> None:
    follower = open_log(tmp_path / "t-0")
    batches = [follower_batch(0, 2, 2), follower_batch(2, 1, 2, tag=1), follower_batch(3, 1, -1)]
    follower.append_as_follower(b"".join(batches), T0)
    assert stored_batches(follower) == batches
    assert follower.leader_epoch_cache.entries() == [E(2, 0)]
    follower.append_as_follower(follower_batch(4, 3, 7, tag=3), T0)
    assert follower.leader_epoch_cache.entries() == [E(2, 0), E(7, 4)]
    assert follower.log_end_offset == 7
    follower.close()


# --- fetch_offset_by_timestamp -------------------------------------------------------------------


def test_fetch_offset_by_timestamp_exact(tmp_path: Path) -> None:
    size = len(make_batch(3))
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=2 * size + 10, index_interval_bytes=0))
    log.append_as_leader(make_batch(3, timestamps=[T0 + 100, T0 + 105, T0 + 110]), 0, T0)  # 0-2
    log.append_as_leader(make_batch(2, timestamps=[T0 + 120, T0 + 115]), 0, T0)  # 3-4
    log.append_as_leader(make_batch(1, timestamps=[T0 + 130]), 0, T0)  # 5
    log.append_as_leader(make_batch(3, timestamps=[T0 + 125, T0 + 140, T0 + 90]), 0, T0)  # 6-8
    assert [s.base_offset for s in log.segments] == [0, 5]
    expectations = {
        0: (0, T0 + 100),
        T0: (0, T0 + 100),
        T0 + 100: (0, T0 + 100),
        T0 + 101: (1, T0 + 105),
        T0 + 110: (2, T0 + 110),
        T0 + 111: (3, T0 + 120),
        T0 + 116: (3, T0 + 120),
        T0 + 120: (3, T0 + 120),
        T0 + 121: (5, T0 + 130),
        T0 + 126: (5, T0 + 130),
        T0 + 130: (5, T0 + 130),
        T0 + 131: (7, T0 + 140),
        T0 + 140: (7, T0 + 140),
    }
    for target, expected in expectations.items():
        assert log.fetch_offset_by_timestamp(target) == expected, target
    assert log.fetch_offset_by_timestamp(T0 + 141) is None
    log.close()


def brute_force(records: list[tuple[int, int]], target: int, start: int = 0):
    for offset, ts in records:
        if offset >= start and ts >= target:
            return offset, ts
    return None


@pytest.mark.parametrize("seed", range(3))
def test_fetch_offset_by_timestamp_matches_a_scan(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=1500, index_interval_bytes=rng.choice([0, 100, 400]))
    log = open_log(tmp_path / "t-0", config)
    ts = T0
    for tag in range(60):
        count = rng.randint(1, 4)
        stamps = []
        for _ in range(count):
            ts += rng.randint(-20, 40)
            stamps.append(ts)
        log.append_as_leader(make_batch(count, tag=tag, timestamps=stamps), 0, T0)
    assert len(log.segments) >= 3
    records = record_offsets_and_timestamps(log)
    assert [o for o, _ in records] == list(range(log.log_end_offset))
    lo, hi = min(t for _, t in records), max(t for _, t in records)
    for target in range(lo - 5, hi + 6):
        assert log.fetch_offset_by_timestamp(target) == brute_force(records, target), target
    # and after a reopen (indexes loaded from disk)
    log.close()
    log = open_log(tmp_path / "t-0", config)
    for target in range(lo - 5, hi + 6, 7):
        assert log.fetch_offset_by_timestamp(target) == brute_force(records, target), target
    log.close()


def test_fetch_offset_by_timestamp_skips_deleted_segments(tmp_path: Path) -> None:
    size = len(make_batch(2))
    log = open_log(tmp_path / "t-0", LogConfig(segment_bytes=2 * size))
    for i in range(6):
        log.append_as_leader(make_batch(2, tag=i, ts=T0 + 10 * i), 0, T0)
    log.maybe_increment_log_start_offset(4)
    assert [s.base_offset for s in log.segments] == [4, 8]
    assert log.fetch_offset_by_timestamp(T0) == (4, T0 + 20)
    assert log.fetch_offset_by_timestamp(T0 + 41) == (9, T0 + 41)
    log.close()


def test_fetch_offset_by_timestamp_starts_at_the_log_start_offset(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    for i in range(10):
        log.append_as_leader(make_batch(1, tag=i, ts=T0 + i), 0, T0)
    log.maybe_increment_log_start_offset(5)
    assert log.fetch_offset_by_timestamp(T0) == (5, T0 + 5)
    log.close()


# --- truncation -------------------------------------------------------------------------------


def build_three_segments(directory: Path) -> tuple[Log, list[bytes]]:
    """Offsets 0..17 in batches of 2, 3 batches (6 offsets) per segment, epochs 1, 2, 3
    starting at 0, 8, 14; small index interval so every batch but the first is indexed."""
    size = len(make_batch(2))
    config = LogConfig(segment_bytes=3 * size, index_interval_bytes=0)
    log = open_log(directory, config)
    for i in range(9):
        epoch = 1 if i < 4 else 2 if i < 7 else 3
        log.append_as_leader(make_batch(2, tag=i, ts=T0 + i), epoch, T0)
    assert [s.base_offset for s in log.segments] == [0, 6, 12]
    assert log.leader_epoch_cache.entries() == [E(1, 0), E(2, 8), E(3, 14)]
    return log, stored_batches(log)


def epoch_checkpoint(log: Log) -> str:
    return (log.directory / LEADER_EPOCH_CHECKPOINT_FILE).read_text()


def test_truncate_to_a_batch_boundary_in_the_active_segment(tmp_path: Path) -> None:
    log, stored = build_three_segments(tmp_path / "t-0")
    assert log.truncate_to(16) is True
    assert log.log_end_offset == 16
    assert stored_batches(log) == stored[:8]
    assert log.active_segment.offset_index.keys.tolist() == [14]
    assert log.leader_epoch_cache.entries() == [E(1, 0), E(2, 8), E(3, 14)]
    info = log.append_as_leader(make_batch(3, tag=50), 3, T0)
    assert (info.first_offset, info.last_offset) == (16, 18)
    assert [read_header(b).base_offset for b in consume_all(log)] == [0, 2, 4, 6, 8, 10, 12, 14, 16]
    log.close()


def test_truncate_inside_a_batch_removes_the_whole_batch(tmp_path: Path) -> None:
    log, stored = build_three_segments(tmp_path / "t-0")
    assert log.truncate_to(15) is True
    assert log.log_end_offset == 14
    assert stored_batches(log) == stored[:7]
    assert log.leader_epoch_cache.entries() == [E(1, 0), E(2, 8)]
    assert epoch_checkpoint(log) == "0\n2\n1 0\n2 8\n"
    assert log.active_segment.offset_index.keys.tolist() == []  # entry for 14 dropped
    assert log.active_segment.time_index.keys.tolist() == []
    log.close()


def test_truncate_to_a_segment_boundary_deletes_later_segments(tmp_path: Path) -> None:
    log, stored = build_three_segments(tmp_path / "t-0")
    assert log.truncate_to(12) is True
    assert log.log_end_offset == 12
    assert [s.base_offset for s in log.segments] == [0, 6]
    assert seg_file_names(tmp_path / "t-0") == segment_files(0, 6)
    assert stored_batches(log) == stored[:6]
    assert log.leader_epoch_cache.entries() == [E(1, 0), E(2, 8)]
    assert log.recovery_point <= 12
    with pytest.raises(OffsetOutOfRangeError):
        log.read(13, 100)
    info = log.append_as_leader(make_batch(2, tag=70), 5, T0)
    assert info.first_offset == 12
    assert log.leader_epoch_cache.entries() == [E(1, 0), E(2, 8), E(5, 12)]
    assert [read_header(b).base_offset for b in consume_all(log)] == [0, 2, 4, 6, 8, 10, 12]
    log.close()


def test_truncate_into_an_earlier_segment(tmp_path: Path) -> None:
    log, stored = build_three_segments(tmp_path / "t-0")
    assert log.truncate_to(5) is True
    assert log.log_end_offset == 4
    assert [s.base_offset for s in log.segments] == [0]
    assert seg_file_names(tmp_path / "t-0") == segment_files(0)
    assert stored_batches(log) == stored[:2]
    assert log.active_segment.offset_index.keys.tolist() == [2]
    assert log.leader_epoch_cache.entries() == [E(1, 0)]
    assert log.recovery_point == 4
    log.append_as_leader(make_batch(1, tag=80), 1, T0)
    assert log.log_end_offset == 5
    log.close()
    reopened = open_log(tmp_path / "t-0", log.config)
    assert reopened.log_end_offset == 5
    assert reopened.leader_epoch_cache.entries() == [E(1, 0)]
    assert len(stored_batches(reopened)) == 3
    reopened.close()


def test_truncate_at_or_past_the_leo_does_nothing(tmp_path: Path) -> None:
    log, _ = build_three_segments(tmp_path / "t-0")
    before = snapshot(log)
    assert log.truncate_to(18) is False
    assert log.truncate_to(100) is False
    assert snapshot(log) == before
    with pytest.raises(ValueError):
        log.truncate_to(-1)
    log.close()


@pytest.mark.parametrize("offset", [0, 3])
def test_truncate_at_or_below_log_start_truncates_fully(tmp_path: Path, offset: int) -> None:
    log, _ = build_three_segments(tmp_path / "t-0")
    log.maybe_increment_log_start_offset(3)
    assert log.truncate_to(offset) is True
    assert log.log_start_offset == offset
    assert log.log_end_offset == offset
    assert [s.base_offset for s in log.segments] == [offset]
    assert seg_file_names(tmp_path / "t-0") == segment_files(offset)
    assert log.leader_epoch_cache.entries() == []
    assert epoch_checkpoint(log) == "0\n0\n"
    assert log.append_as_leader(make_batch(1), 9, T0).first_offset == offset
    log.close()


def test_truncate_fully_and_start_at(tmp_path: Path) -> None:
    log, _ = build_three_segments(tmp_path / "t-0")
    log.truncate_fully_and_start_at(100, now_ms=T0)
    assert (log.log_start_offset, log.log_end_offset, log.recovery_point) == (100, 100, 100)
    assert seg_file_names(tmp_path / "t-0") == segment_files(100)
    assert log.leader_epoch_cache.entries() == []
    info = log.append_as_leader(make_batch(2), 6, T0)
    assert (info.first_offset, info.last_offset) == (100, 101)
    assert log.leader_epoch_cache.entries() == [E(6, 100)]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(99, 100)
    assert read_headers(log, 100)[0].base_offset == 100
    log.close()
    log = open_log(tmp_path / "t-0", log.config, log_start_offset=100)
    assert (log.log_start_offset, log.log_end_offset) == (100, 102)
    log.close()


def test_truncate_everything_then_reopen(tmp_path: Path) -> None:
    log, _ = build_three_segments(tmp_path / "t-0")
    log.truncate_to(0)
    log.close()
    log = open_log(tmp_path / "t-0", log.config)
    assert (log.log_start_offset, log.log_end_offset) == (0, 0)
    assert log.leader_epoch_cache.entries() == []
    log.close()


@pytest.mark.parametrize("seed", range(4))
def test_random_truncations_keep_a_consistent_log(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    config = LogConfig(segment_bytes=700, index_interval_bytes=rng.choice([0, 90, 250]))
    log = open_log(tmp_path / "t-0", config)
    model: list[tuple[int, int, int]] = []  # (base, count, epoch) of each batch
    epoch = 0
    for step in range(40):
        if model and rng.random() < 0.2:
            leo = log.log_end_offset
            target = rng.randint(0, leo)
            log.truncate_to(target)
            model = [m for m in model if m[0] + m[1] <= target]
            epoch += 1
        count = rng.randint(1, 3)
        if rng.random() < 0.3:
            epoch += 1
        base = log.log_end_offset
        assert base == (model[-1][0] + model[-1][1] if model else 0)
        ts = T0 + rng.randint(0, 500)
        log.append_as_leader(make_batch(count, tag=step, ts=ts, step=7), epoch, T0)
        model.append((base, count, epoch))
    got = [
        (h.base_offset, h.record_count, h.partition_leader_epoch) for h in log.iter_batch_headers()
    ]
    assert got == model
    for offset in range(log.log_end_offset):
        first = read_headers(log, offset, 1)[0]
        assert first.base_offset <= offset <= first.last_offset
    # the epoch cache holds the first offset of each epoch still in the log
    firsts: dict[int, int] = {}
    for base, _, ep in model:
        firsts.setdefault(ep, base)
    assert log.leader_epoch_cache.entries() == [E(e, o) for e, o in sorted(firsts.items())]
    # timestamp lookups see exactly the records left
    records = record_offsets_and_timestamps(log)
    for target in range(T0 - 1, T0 + 530, 3):
        assert log.fetch_offset_by_timestamp(target) == brute_force(records, target), target
    batches = stored_batches(log)
    log.close()
    log = open_log(tmp_path / "t-0", config)
    assert stored_batches(log) == batches
    for target in range(T0 - 1, T0 + 530, 11):
        assert log.fetch_offset_by_timestamp(target) == brute_force(records, target), target
    log.close()


# --- retention --------------------------------------------------------------------------------


def retention_log(directory: Path, **config: int) -> Log:
    """Three full segments (bases 0, 4, 8) and an active one (12); segment k's records have
    timestamps T0 + 1000*k .. T0 + 1000*k + 3; epochs 1 then 2 from offset 6."""
    size = len(make_batch(2))
    log = open_log(directory, LogConfig(segment_bytes=2 * size, **config))
    for i in range(7):
        epoch = 1 if i < 3 else 2
        log.append_as_leader(make_batch(2, tag=i, ts=T0 + 1000 * (i // 2) + 2 * (i % 2)), epoch, T0)
    assert [s.base_offset for s in log.segments] == [0, 4, 8, 12]
    assert log.leader_epoch_cache.entries() == [E(1, 0), E(2, 6)]
    return log


def test_retention_by_time_deletes_expired_segments_oldest_first(tmp_path: Path) -> None:
    log = retention_log(tmp_path / "t-0", retention_ms=10_000)
    assert log.delete_retention_breached_segments(T0 + 10_003) == 0  # all within 10 s
    # segment 0's largest timestamp is T0 + 3; segment 1's is T0 + 1003
    assert log.delete_retention_breached_segments(T0 + 10_004) == 1
    assert [s.base_offset for s in log.segments] == [4, 8, 12]
    assert log.log_start_offset == 4
    assert seg_file_names(tmp_path / "t-0") == segment_files(4, 8, 12)
    assert log.leader_epoch_cache.entries() == [E(1, 4), E(2, 6)]
    assert log.delete_retention_breached_segments(T0 + 12_004) == 2
    assert log.log_start_offset == 12
    assert log.leader_epoch_cache.entries() == [E(2, 12)]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(11, 100)
    assert read_headers(log, 12)[0].base_offset == 12
    assert log.log_end_offset == 14
    log.close()


def test_retention_by_time_rolls_an_expired_active_segment(tmp_path: Path) -> None:
    log = retention_log(tmp_path / "t-0", retention_ms=10_000)
    now = T0 + 100_000
    assert log.delete_retention_breached_segments(now) == 4
    assert [s.base_offset for s in log.segments] == [14]
    assert (log.log_start_offset, log.log_end_offset) == (14, 14)
    assert seg_file_names(tmp_path / "t-0") == segment_files(14)
    assert log.leader_epoch_cache.entries() == [E(2, 14)]
    assert log.read(14, 100).read() == b""
    assert log.append_as_leader(make_batch(1, ts=now), 3, now).first_offset == 14
    assert log.delete_retention_breached_segments(now) == 0
    log.close()


def test_retention_ms_minus_one_keeps_everything(tmp_path: Path) -> None:
    log = retention_log(tmp_path / "t-0", retention_ms=-1)
    assert log.delete_retention_breached_segments(T0 + 10**12) == 0
    assert len(log.segments) == 4
    log.close()


def test_retention_by_bytes(tmp_path: Path) -> None:
    log = retention_log(tmp_path / "t-0", retention_ms=-1, retention_bytes=10**9)
    sizes = [s.size for s in log.segments]
    total = sum(sizes)
    assert log.delete_retention_breached_segments(T0) == 0
    log.close()
    # keeping total - sizes[0] bytes: exactly the first segment goes
    log = open_log(
        tmp_path / "t-0",
        LogConfig(
            segment_bytes=log.config.segment_bytes,
            retention_ms=-1,
            retention_bytes=total - sizes[0],
        ),
    )
    assert log.delete_retention_breached_segments(T0) == 1
    assert [s.base_offset for s in log.segments] == [4, 8, 12]
    assert log.log_start_offset == 4
    assert log.leader_epoch_cache.entries() == [E(1, 4), E(2, 6)]
    log.close()
    # Kafka's rule: a segment goes only if the log is still >= retention.bytes without it.
    # One byte under "without segments 4 and 8": only segment 4 can go.
    config = LogConfig(
        segment_bytes=log.config.segment_bytes,
        retention_ms=-1,
        retention_bytes=total - sizes[0] - sizes[1] - sizes[2] + 1,
    )
    log = open_log(tmp_path / "t-0", config, log_start_offset=4)
    assert log.delete_retention_breached_segments(T0) == 1
    assert [s.base_offset for s in log.segments] == [8, 12]
    assert log.log_start_offset == 8
    log.close()
    # exactly "without segment 8": it goes
    config = LogConfig(
        segment_bytes=log.config.segment_bytes,
        retention_ms=-1,
        retention_bytes=total - sizes[0] - sizes[1] - sizes[2],
    )
    log = open_log(tmp_path / "t-0", config, log_start_offset=8)
    assert log.delete_retention_breached_segments(T0) == 1
    assert [s.base_offset for s in log.segments] == [12]
    assert log.log_start_offset == 12
    assert log.size_bytes == sizes[3]
    assert log.leader_epoch_cache.entries() == [E(2, 12)]
    log.close()


def test_retention_by_bytes_never_deletes_the_active_segment(tmp_path: Path) -> None:
    log = retention_log(tmp_path / "t-0", retention_ms=-1, retention_bytes=0)
    assert log.delete_retention_breached_segments(T0) == 3
    assert [s.base_offset for s in log.segments] == [12]
    assert (log.log_start_offset, log.log_end_offset) == (12, 14)
    assert log.delete_retention_breached_segments(T0) == 0
    log.close()


def test_maybe_increment_log_start_offset(tmp_path: Path) -> None:
    log = retention_log(tmp_path / "t-0")
    log.maybe_increment_log_start_offset(2)
    assert log.log_start_offset == 2
    assert [s.base_offset for s in log.segments] == [0, 4, 8, 12]  # 0..1 still in segment 0
    assert log.leader_epoch_cache.entries() == [E(1, 2), E(2, 6)]
    with pytest.raises(OffsetOutOfRangeError):
        log.read(1, 100)
    log.maybe_increment_log_start_offset(1)  # never backwards
    assert log.log_start_offset == 2
    log.maybe_increment_log_start_offset(9)
    assert log.log_start_offset == 9
    assert [s.base_offset for s in log.segments] == [8, 12]
    assert seg_file_names(tmp_path / "t-0") == segment_files(8, 12)
    assert log.leader_epoch_cache.entries() == [E(2, 9)]
    assert read_headers(log, 9)[0].base_offset == 8  # the batch holding 9
    with pytest.raises(OffsetOutOfRangeError):
        log.maybe_increment_log_start_offset(15)
    assert log.log_start_offset == 9
    log.maybe_increment_log_start_offset(14)
    assert [s.base_offset for s in log.segments] == [12]
    assert (log.log_start_offset, log.log_end_offset) == (14, 14)
    log.close()
    log = open_log(tmp_path / "t-0", log.config, log_start_offset=14)
    assert (log.log_start_offset, log.log_end_offset) == (14, 14)
    log.close()


def test_reads_at_recent_batch_boundaries_match_the_index_path_and_survive_truncation(
    tmp_path: Path,
) -> None:
    """Reads at a just-appended batch's base offset (and an HW there) use the segment's
    remembered positions; they must agree with the index lookup, also after a truncation
    puts a batch of another size at the same offset."""
    log = open_log(tmp_path / "t-0", LogConfig())
    for tag in range(5):
        log.append_as_leader(make_batch(tag + 1, tag=tag), 1, T0)  # offsets 0, 1, 3, 6, 10
    segment = log.active_segment
    for offset in (0, 1, 3, 6, 10):
        found = segment.translate_offset(offset)
        assert found is not None
        assert segment.position_of(offset) == found[0]
        whole = log.read(offset, 1 << 20).read()
        assert read_header(whole).base_offset == offset
        below_hw = read_headers(log, offset, max_offset=10)
        assert [h.base_offset for h in below_hw] == [o for o in (0, 1, 3, 6) if o >= offset]
    assert log.truncate_to(3) is True
    log.append_as_leader(make_batch(7, tag=9, value=b"v" * 50), 2, T0)  # 3..9, bigger
    again = log.read(3, 1).read()  # at least one whole batch: its size must be the new one
    assert read_header(again).base_offset == 3 and read_header(again).last_offset == 9
    assert again == stored_batches(log)[2]
    assert log.read(6, 1).read() == again  # 6 is inside it now, no longer a batch's base
    log.close()
