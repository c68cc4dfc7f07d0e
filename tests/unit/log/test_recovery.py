"""Crash recovery in Log.open: after damage to segment, index or checkpoint files the log must
hold exactly the longest valid prefix of what was written, with working indexes, a consistent
leader-epoch cache, and must accept appends again.

Each scenario is a seeded loop (the seed is in the test id, so a failure replays exactly)."""

from __future__ import annotations

import os
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.checkpoints import EpochEntry
from broker.log.log import LEADER_EPOCH_CHECKPOINT_FILE, Log
from protocol.records import read_header
from tests.unit.log.helpers import (
    T0,
    dir_batches,
    make_batch,
    open_log,
    read_bytes,
    read_headers,
    seg_file_names,
    segment_files,
    split_batches,
    stored_batches,
)

CONFIG = LogConfig(segment_bytes=1200, index_interval_bytes=100)
SEEDS = range(6)


@dataclass
class Written:
    directory: Path
    batches: list[bytes]  # every stored batch, in order
    segments: dict[int, list[bytes]]  # base offset -> its batches
    epochs: list[EpochEntry]
    indexes: dict[int, tuple[bytes, bytes]] = field(default_factory=dict)  # base -> file bytes

    @property
    def bases(self) -> list[int]:
        return sorted(self.segments)

    def log_path(self, base: int, suffix: str = ".log") -> Path:
        return self.directory / f"{base:020d}{suffix}"


def write_log(directory: Path, seed: int, count: int = 30) -> Written:
    """`count` single-batch leader appends of 1-4 records, epochs 1, 2, ... changing every 8
    batches; closed cleanly."""
    rng = random.Random(seed)
    log = open_log(directory, CONFIG)
    epochs: list[EpochEntry] = []
    for i in range(count):
        epoch = 1 + i // 8
        n = rng.randint(1, 4)
        info = log.append_as_leader(
            make_batch(
                n, tag=i, ts=T0 + 10 * i, value=os.urandom(rng.randint(0, 60)).hex().encode()
            ),
            epoch,
            T0,
        )
        if not epochs or epochs[-1].epoch != epoch:
            epochs.append(EpochEntry(epoch, info.first_offset))
    assert log.leader_epoch_cache.entries() == epochs
    segments = {s.base_offset: split_batches(s.log_path.read_bytes()) for s in log.segments}
    assert len(segments) >= 4, "the scenarios need several segments"
    log.flush()
    log.close()
    written = Written(directory, stored_batches_of(directory), segments, epochs)
    for base in written.bases:
        written.indexes[base] = (
            written.log_path(base, ".index").read_bytes(),
            written.log_path(base, ".timeindex").read_bytes(),
        )
    return written


def stored_batches_of(directory: Path) -> list[bytes]:
    return dir_batches(directory)


def next_offset(batch: bytes) -> int:
    return read_header(batch).next_offset


def replay(directory: Path, batches: list[bytes]) -> Log:
    """A log built from scratch from `batches`, one follower append each: the same segments and
    indexes the original appends made (the same roll and index decisions)."""
    log = open_log(directory, CONFIG)
    for batch in batches:
        log.append_as_follower(batch, T0)
    return log


def check_recovered(
    tmp_path: Path,
    written: Written,
    expected: list[bytes],
    *,
    clean_shutdown: bool = False,
    recovery_point: int = 0,
    expected_bases: list[int] | None = None,
) -> None:
    log = Log.open(
        written.directory,
        CONFIG,
        now_ms=T0,
        clean_shutdown=clean_shutdown,
        recovery_point=recovery_point,
    )
    leo = next_offset(expected[-1]) if expected else 0
    try:
        # exactly the valid prefix, byte for byte
        assert stored_batches(log) == expected
        assert log.log_end_offset == leo
        assert log.log_start_offset == 0
        assert log.recovery_point == leo
        if expected_bases is not None:
            assert [s.base_offset for s in log.segments] == expected_bases
            assert seg_file_names(written.directory) == segment_files(*expected_bases)

        # every offset is found through the (rebuilt) indexes
        holder = {}
        for batch in expected:
            h = read_header(batch)
            for o in range(h.base_offset, h.next_offset):
                holder[o] = batch
        assert sorted(holder) == list(range(leo))
        for offset in range(leo):
            data = read_bytes(log, offset, 1)
            assert data == holder[offset], offset
        assert log.read(leo, 100).read() == b""

        # indexes equal those of a log built from scratch from the same batches
        fresh = replay(tmp_path / "fresh" / "t-0", expected)
        fresh_segments = {s.base_offset: s for s in fresh.segments if s.size}
        for seg in log.segments:
            if not seg.size:
                continue
            twin = fresh_segments.pop(seg.base_offset)
            assert seg.size == twin.size
            assert seg.next_offset == twin.next_offset
            assert seg.offset_index.keys.tolist() == twin.offset_index.keys.tolist()
            assert seg.offset_index.values.tolist() == twin.offset_index.values.tolist()
            assert seg.time_index.keys.tolist() == twin.time_index.keys.tolist()
            assert seg.time_index.values.tolist() == twin.time_index.values.tolist()
            assert seg.max_timestamp == twin.max_timestamp
        assert fresh_segments == {}
        fresh.close()

        # the epoch cache: the written entries that start below the LEO, and the same on disk
        epochs = [e for e in written.epochs if e.start_offset < leo]
        assert log.leader_epoch_cache.entries() == epochs
        checkpoint = written.directory / LEADER_EPOCH_CHECKPOINT_FILE
        assert checkpoint.read_text() == f"0\n{len(epochs)}\n" + "".join(
            f"{e.epoch} {e.start_offset}\n" for e in epochs
        )

        # appending works and continues at the LEO
        info = log.append_as_leader(make_batch(2, tag=999, ts=T0 + 99_999), 77, T0)
        assert (info.first_offset, info.last_offset) == (leo, leo + 1)
        assert log.leader_epoch_cache.entries() == [*epochs, EpochEntry(77, leo)]
        new_batch = stored_batches(log)[-1]
    finally:
        log.close()

    # and a clean reopen sees the same log
    again = Log.open(written.directory, CONFIG, now_ms=T0)
    try:
        assert stored_batches(again) == [*expected, new_batch]
        assert again.log_end_offset == leo + 2
        assert read_headers(again, leo)[0].base_offset == leo
    finally:
        again.close()


def batch_spans(batches: list[bytes]) -> list[tuple[int, int]]:
    spans, pos = [], 0
    for b in batches:
        spans.append((pos, pos + len(b)))
        pos += len(b)
    return spans


# --- (a) torn active segment ---------------------------------------------------------------------


@pytest.mark.parametrize("clean_shutdown", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_cut_active_segment_at_a_random_byte(
    tmp_path: Path, seed: int, clean_shutdown: bool
) -> None:
    written = write_log(tmp_path / "t-0", seed)
    rng = random.Random(1000 + seed)
    active = written.bases[-1]
    path = written.log_path(active)
    cut = rng.randrange(path.stat().st_size)
    os.truncate(path, cut)
    survivors = [
        b
        for b, (_, end) in zip(
            written.segments[active], batch_spans(written.segments[active]), strict=True
        )
        if end <= cut
    ]
    expected = [b for base in written.bases[:-1] for b in written.segments[base]] + survivors
    check_recovered(
        tmp_path, written, expected, clean_shutdown=clean_shutdown, expected_bases=written.bases
    )


@pytest.mark.parametrize("clean_shutdown", [False, True])
def test_cut_active_segment_inside_the_first_header(tmp_path: Path, clean_shutdown: bool) -> None:
    written = write_log(tmp_path / "t-0", 0)
    active = written.bases[-1]
    os.truncate(written.log_path(active), 30)
    expected = [b for base in written.bases[:-1] for b in written.segments[base]]
    check_recovered(
        tmp_path, written, expected, clean_shutdown=clean_shutdown, expected_bases=written.bases
    )


# --- (b) a flipped bit in the last batch --------------------------------------------------------


@pytest.mark.parametrize("clean_shutdown", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_bit_flip_in_the_last_batch(tmp_path: Path, seed: int, clean_shutdown: bool) -> None:
    written = write_log(tmp_path / "t-0", seed)
    rng = random.Random(2000 + seed)
    active = written.bases[-1]
    path = written.log_path(active)
    data = bytearray(path.read_bytes())
    last_start = len(data) - len(written.segments[active][-1])
    # any byte the batch's checks cover: batch_length (8-11), magic, CRC and everything after
    # it. (Bytes 0-7 and 12-15, base offset and leader epoch, are outside the CRC by design.)
    choices = [*range(8, 12), *range(16, len(written.segments[active][-1]))]
    at = last_start + rng.choice(choices)
    data[at] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    check_recovered(
        tmp_path,
        written,
        written.batches[:-1],
        clean_shutdown=clean_shutdown,
        expected_bases=written.bases,
    )


@pytest.mark.parametrize("byte", [8, 11, 16, 17, 20, 21, 22, 30, 40, 57, 60, 61, -1])
def test_each_checked_header_field_is_detected(tmp_path: Path, byte: int) -> None:
    written = write_log(tmp_path / "t-0", 7)
    path = written.log_path(written.bases[-1])
    data = bytearray(path.read_bytes())
    last_start = len(data) - len(written.batches[-1])
    data[last_start + byte if byte >= 0 else byte] ^= 0x10
    path.write_bytes(bytes(data))
    check_recovered(tmp_path, written, written.batches[:-1], expected_bases=written.bases)


def test_batch_with_an_offset_going_backwards_is_cut(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 3)
    path = written.log_path(written.bases[-1])
    with open(path, "ab") as f:  # the last batch again: valid CRC, but offsets repeat
        f.write(written.batches[-1])
    check_recovered(tmp_path, written, written.batches, expected_bases=written.bases)


# --- (c) garbage after the last batch ----------------------------------------------------------


@pytest.mark.parametrize("clean_shutdown", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_garbage_appended_to_the_active_segment(
    tmp_path: Path, seed: int, clean_shutdown: bool
) -> None:
    written = write_log(tmp_path / "t-0", seed)
    rng = random.Random(3000 + seed)
    garbage = rng.randbytes(rng.choice([1, 12, 60, 61, 62, rng.randint(1, 400)]))
    with open(written.log_path(written.bases[-1]), "ab") as f:
        f.write(garbage)
    check_recovered(
        tmp_path,
        written,
        written.batches,
        clean_shutdown=clean_shutdown,
        expected_bases=written.bases,
    )


def test_zeros_appended_to_the_active_segment(tmp_path: Path) -> None:
    # a preallocated or partially flushed tail reads as zeros
    written = write_log(tmp_path / "t-0", 1)
    with open(written.log_path(written.bases[-1]), "ab") as f:
        f.write(bytes(4096))
    check_recovered(
        tmp_path, written, written.batches, clean_shutdown=True, expected_bases=written.bases
    )


# --- (d) missing index files -------------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_missing_index_files_are_rebuilt(tmp_path: Path, seed: int) -> None:
    written = write_log(tmp_path / "t-0", seed)
    rng = random.Random(4000 + seed)
    victims = rng.sample(written.bases, rng.randint(1, len(written.bases)))
    for base in victims:
        for suffix in rng.choice([(".index",), (".timeindex",), (".index", ".timeindex")]):
            written.log_path(base, suffix).unlink()
    check_recovered(tmp_path, written, written.batches, expected_bases=written.bases)


# --- (e) garbage in an index file ----------------------------------------------------------------


@pytest.mark.parametrize("seed", SEEDS)
def test_garbage_index_files_are_rebuilt(tmp_path: Path, seed: int) -> None:
    written = write_log(tmp_path / "t-0", seed)
    rng = random.Random(5000 + seed)
    for base in rng.sample(written.bases, rng.randint(1, len(written.bases))):
        suffix = rng.choice([".index", ".timeindex"])
        path = written.log_path(base, suffix)
        original = path.read_bytes()
        kind = rng.randrange(3)
        if kind == 0:
            path.write_bytes(rng.randbytes(rng.randint(1, 100)))
        elif kind == 1 and original:
            data = bytearray(original)
            data[rng.randrange(len(data))] ^= 0xFF
            path.write_bytes(bytes(data))
        else:
            path.write_bytes(original + rng.randbytes(rng.randint(1, 30)))
    check_recovered(tmp_path, written, written.batches, expected_bases=written.bases)


@pytest.mark.parametrize(
    "garbage",
    [
        b"\x00\x00\x00\x05\x00\x00\x00",  # a partial entry
        (5).to_bytes(4, "big") + (10**6).to_bytes(4, "big"),  # points past the end of the log
        (5).to_bytes(4, "big") + (90).to_bytes(4, "big") + (3).to_bytes(4, "big") + bytes(4),
    ],
    ids=["partial", "past-end", "decreasing"],
)
@pytest.mark.parametrize("clean_shutdown", [False, True])
def test_bad_offset_index_is_rebuilt(tmp_path: Path, garbage: bytes, clean_shutdown: bool) -> None:
    written = write_log(tmp_path / "t-0", 2)
    for base in written.bases:
        written.log_path(base, ".index").write_bytes(garbage)
    check_recovered(
        tmp_path,
        written,
        written.batches,
        clean_shutdown=clean_shutdown,
        expected_bases=written.bases,
    )


def test_unclean_open_of_an_intact_log_leaves_index_files_as_they_were(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 4)
    log = Log.open(written.directory, CONFIG, now_ms=T0, clean_shutdown=False)
    assert stored_batches(log) == written.batches
    log.close()
    for base in written.bases:
        assert written.log_path(base, ".index").read_bytes() == written.indexes[base][0]
        assert written.log_path(base, ".timeindex").read_bytes() == written.indexes[base][1]
    # twice in a row (a crash loop) changes nothing either
    log = Log.open(written.directory, CONFIG, now_ms=T0, clean_shutdown=False)
    log.close()
    for base in written.bases:
        assert written.log_path(base, ".index").read_bytes() == written.indexes[base][0]


def test_recovered_index_files_are_written_correctly(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 5)
    for base in written.bases:
        written.log_path(base, ".index").write_bytes(b"\xff" * 13)
        written.log_path(base, ".timeindex").write_bytes(b"\xff" * 7)
    Log.open(written.directory, CONFIG, now_ms=T0, clean_shutdown=False).close()
    for base in written.bases:
        assert written.log_path(base, ".index").read_bytes() == written.indexes[base][0]
        assert written.log_path(base, ".timeindex").read_bytes() == written.indexes[base][1]


def test_missing_time_index_after_clean_shutdown(tmp_path: Path) -> None:
    config = LogConfig(index_interval_bytes=0)
    log = open_log(tmp_path / "t-0", config)
    log.append_as_leader(make_batch(1, ts=T0 + 5000), 0, T0)
    for i in range(10):
        log.append_as_leader(make_batch(1, tag=i, ts=T0 + i), 0, T0)
    assert log.fetch_offset_by_timestamp(T0 + 4000) == (0, T0 + 5000)
    log.close()
    (tmp_path / "t-0" / "00000000000000000000.timeindex").unlink()
    log = open_log(tmp_path / "t-0", config)  # clean shutdown
    try:
        assert log.active_segment.max_timestamp == T0 + 5000
        assert log.fetch_offset_by_timestamp(T0 + 4000) == (0, T0 + 5000)
    finally:
        log.close()


def test_missing_offset_index_after_clean_shutdown_is_rebuilt(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 0)
    for base in written.bases:
        written.log_path(base, ".index").unlink()
    log = Log.open(written.directory, CONFIG, now_ms=T0)  # clean shutdown
    try:
        assert stored_batches(log) == written.batches
        fresh = replay(tmp_path / "fresh" / "t-0", written.batches)
        for seg, twin in zip(log.segments, fresh.segments, strict=True):
            assert seg.offset_index.keys.tolist() == twin.offset_index.keys.tolist()
        fresh.close()
    finally:
        log.close()


# --- (f) corrupt leader-epoch checkpoint -------------------------------------------------------


EPOCH_GARBAGE: dict[str, Callable[[bytes, random.Random], bytes]] = {
    "random": lambda data, rng: rng.randbytes(rng.randint(1, 40)),
    "truncated": lambda data, rng: data[: rng.randrange(1, len(data) - 1)],
    "empty": lambda data, rng: b"",
    "bad-version": lambda data, rng: b"1" + data[1:],
    "wrong-count": lambda data, rng: data.replace(b"\n", b"\n9", 1)[: len(data) + 1],
    "not-increasing": lambda data, rng: b"0\n2\n5 10\n4 20\n",
    "negative": lambda data, rng: b"0\n1\n-1 0\n",
    "bit-flip": lambda data, rng: bytes([data[0] ^ 0x40]) + data[1:],
}


@pytest.mark.parametrize("clean_shutdown", [False, True])
@pytest.mark.parametrize("kind", sorted(EPOCH_GARBAGE))
def test_corrupt_epoch_checkpoint_is_rebuilt(
    tmp_path: Path, kind: str, clean_shutdown: bool
) -> None:
    written = write_log(tmp_path / "t-0", 11)
    path = written.directory / LEADER_EPOCH_CHECKPOINT_FILE
    data = path.read_bytes()
    assert (
        data
        == ("0\n4\n" + "".join(f"{e.epoch} {e.start_offset}\n" for e in written.epochs)).encode()
    )
    path.write_bytes(EPOCH_GARBAGE[kind](data, random.Random(kind)))
    check_recovered(
        tmp_path,
        written,
        written.batches,
        clean_shutdown=clean_shutdown,
        expected_bases=written.bases,
    )


def test_missing_epoch_checkpoint_is_rebuilt(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 12)
    (written.directory / LEADER_EPOCH_CHECKPOINT_FILE).unlink()
    check_recovered(
        tmp_path, written, written.batches, clean_shutdown=True, expected_bases=written.bases
    )


def test_epoch_entries_past_a_torn_tail_are_dropped(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 13)
    # cut inside the batch where the last epoch starts: that epoch disappears
    last_epoch_start = written.epochs[-1].start_offset
    index = next(
        i for i, b in enumerate(written.batches) if read_header(b).base_offset == last_epoch_start
    )
    base = max(b for b in written.bases if b <= last_epoch_start)
    position = sum(len(b) for b in written.batches[:index]) - sum(
        len(b) for s in written.bases if s < base for b in written.segments[s]
    )
    os.truncate(written.log_path(base), position + 5)
    expected_bases = [b for b in written.bases if b <= base]
    check_recovered(tmp_path, written, written.batches[:index], expected_bases=expected_bases)


# --- (g) damage in a middle segment ---------------------------------------------------------


@pytest.mark.parametrize("clean_shutdown", [False, True])
@pytest.mark.parametrize("seed", SEEDS)
def test_cut_middle_segment_deletes_later_segments(
    tmp_path: Path, seed: int, clean_shutdown: bool
) -> None:
    written = write_log(tmp_path / "t-0", seed)
    rng = random.Random(6000 + seed)
    victim = rng.choice(written.bases[:-1])
    batches = written.segments[victim]
    spans = batch_spans(batches)
    k = rng.randrange(len(batches))
    start, end = spans[k]
    cut = rng.randrange(start + 1, end)  # strictly inside batch k
    os.truncate(written.log_path(victim), cut)
    expected = [b for base in written.bases if base < victim for b in written.segments[base]]
    expected += batches[:k]
    bases = [b for b in written.bases if b <= victim]
    check_recovered(
        tmp_path, written, expected, clean_shutdown=clean_shutdown, expected_bases=bases
    )


@pytest.mark.parametrize("seed", SEEDS)
def test_bit_flip_in_a_middle_segment_deletes_later_segments(tmp_path: Path, seed: int) -> None:
    written = write_log(tmp_path / "t-0", seed)
    rng = random.Random(7000 + seed)
    victim = rng.choice(written.bases[:-1])
    batches = written.segments[victim]
    k = rng.randrange(len(batches))
    start = batch_spans(batches)[k][0]
    path = written.log_path(victim)
    data = bytearray(path.read_bytes())
    data[start + rng.randrange(21, len(batches[k]))] ^= 1 << rng.randrange(8)
    path.write_bytes(bytes(data))
    expected = [b for base in written.bases if base < victim for b in written.segments[base]]
    expected += batches[:k]
    check_recovered(
        tmp_path, written, expected, expected_bases=[b for b in written.bases if b <= victim]
    )


def test_first_segment_entirely_garbage(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 8)
    path = written.log_path(0)
    path.write_bytes(random.Random(8).randbytes(path.stat().st_size))
    check_recovered(tmp_path, written, [], expected_bases=[0])


# --- recovery point, clean shutdown, stray files ------------------------------------------------


def test_segments_below_the_recovery_point_are_not_rescanned(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 9)
    # damage in the middle of a flushed segment below the recovery point is not looked for
    # (as in Kafka: only the tail past the last index entry is checked), but the active
    # segment, past the recovery point, is recovered
    active = written.bases[-1]
    cut_at = len(written.segments[active][0]) + 3
    os.truncate(written.log_path(active), cut_at)
    expected = [b for base in written.bases[:-1] for b in written.segments[base]]
    expected.append(written.segments[active][0])
    check_recovered(
        tmp_path, written, expected, recovery_point=active, expected_bases=written.bases
    )


def test_corrupt_index_below_the_recovery_point_is_still_rebuilt(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 10)
    written.log_path(written.bases[0], ".index").write_bytes(b"\x00" * 5)
    check_recovered(
        tmp_path,
        written,
        written.batches,
        recovery_point=written.bases[-1],
        expected_bases=written.bases,
    )


def test_stray_files_are_removed_on_open(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 6)
    d = written.directory
    for name in [
        "00000000000000000000.log.deleted",
        "00000000000000000000.index.swap",
        "leader-epoch-checkpoint.tmp",
        "00000000000000000000.log.cleaned",
        "00000000000099999999.index",
        "00000000000099999999.timeindex",
    ]:
        (d / name).write_bytes(b"junk")
    check_recovered(
        tmp_path, written, written.batches, clean_shutdown=True, expected_bases=written.bases
    )
    assert not (d / "00000000000099999999.index").exists()
    assert not any(p.name.endswith((".deleted", ".swap", ".tmp", ".cleaned")) for p in d.iterdir())


def test_log_start_offset_is_clamped_to_the_recovered_leo(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 5)
    active = written.bases[-1]
    os.truncate(written.log_path(active), 0)
    log = Log.open(
        written.directory, CONFIG, now_ms=T0, clean_shutdown=False, log_start_offset=10**6
    )
    try:
        assert log.log_end_offset == active
        assert log.log_start_offset == active
        assert log.read(active, 100).read() == b""
    finally:
        log.close()


def test_log_start_offset_below_the_first_segment_is_raised(tmp_path: Path) -> None:
    written = write_log(tmp_path / "t-0", 5)
    log = Log.open(written.directory, CONFIG, now_ms=T0)
    log.maybe_increment_log_start_offset(written.bases[2])
    log.close()
    log = Log.open(written.directory, CONFIG, now_ms=T0, log_start_offset=0)
    try:
        assert log.log_start_offset == written.bases[2]
        assert [s.base_offset for s in log.segments] == written.bases[2:]
    finally:
        log.close()
