"""Producer state snapshot files: format, atomic writes, strict reads, and choosing the snapshot
to rebuild from after a crash or a truncation."""

from __future__ import annotations

import os
import struct
import tempfile
from collections import deque
from pathlib import Path

import msgpack
import pytest
import structlog
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.producer_snapshot import (
    MAX_SNAPSHOT_BYTES,
    SNAPSHOT_VERSION,
    CorruptSnapshotError,
    delete_snapshots_below,
    list_snapshot_offsets,
    load_latest_snapshot,
    read_snapshot,
    snapshot_path,
    write_snapshot,
)
from broker.log.producer_state import (
    MAX_SEQUENCE,
    BatchMetadata,
    DuplicateBatch,
    ProducerStateEntry,
    ProducerStateManager,
)
from protocol.errors import ErrorCode, HighwaterError
from protocol.records import BatchHeader, crc32c

T0 = 1_700_000_000_000
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1


def entry(pid: int, epoch: int, *batches: tuple[int, int, int, int, int]) -> ProducerStateEntry:
    metadata = deque(BatchMetadata(*b) for b in batches)
    last_timestamp = metadata[-1].max_timestamp if metadata else -1
    return ProducerStateEntry(pid, epoch, metadata, last_timestamp)


ENTRIES = [
    entry(1, 0, (0, 4, 0, 4, T0)),
    entry(2, 7, *[(2 * i, 2 * i + 1, 10 + 2 * i, 11 + 2 * i, T0 + i) for i in range(5)]),
    entry(2**63 - 1, 2**15 - 1, (MAX_SEQUENCE, 1, INT64_MAX - 2, INT64_MAX, INT64_MIN)),
    entry(3, 0),  # no batches: still a valid entry
]


def raw_file(body: bytes, *, version: int = SNAPSHOT_VERSION, crc: int | None = None) -> bytes:
    return struct.pack(">HI", version, crc32c(body) if crc is None else crc) + body


def valid_bytes(tmp_path: Path) -> bytes:
    return write_snapshot(tmp_path, 0, ENTRIES).read_bytes()


# --- naming and listing -----------------------------------------------------------------------


def test_snapshot_path_is_kafkas_name(tmp_path: Path) -> None:
    assert snapshot_path(tmp_path, 1234) == tmp_path / "00000000000000001234.snapshot"
    assert snapshot_path(tmp_path, 0).name == "00000000000000000000.snapshot"


def test_list_snapshot_offsets_sorted_and_ignores_other_files(tmp_path: Path) -> None:
    for offset in (300, 5, 40):
        write_snapshot(tmp_path, offset, [])
    for stray in (
        "00000000000000000007.snapshot.tmp",  # a write cut short by a crash
        "00000000000000000008.log",
        "9.snapshot",
        "0000000000000000000x.snapshot",
        "000000000000000000009.snapshot",
    ):
        (tmp_path / stray).write_bytes(b"")
    assert list_snapshot_offsets(tmp_path) == [5, 40, 300]


# --- write and read ---------------------------------------------------------------------------


def test_round_trip(tmp_path: Path) -> None:
    path = write_snapshot(tmp_path, 77, ENTRIES)
    assert path == snapshot_path(tmp_path, 77)
    assert read_snapshot(path) == ENTRIES
    assert read_snapshot(write_snapshot(tmp_path, 78, [])) == []


def test_write_is_atomic_and_replaces(tmp_path: Path) -> None:
    write_snapshot(tmp_path, 5, ENTRIES)
    write_snapshot(tmp_path, 5, ENTRIES[:1])
    assert read_snapshot(snapshot_path(tmp_path, 5)) == ENTRIES[:1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["00000000000000000005.snapshot"]


def test_file_layout(tmp_path: Path) -> None:
    data = write_snapshot(tmp_path, 0, ENTRIES[:1]).read_bytes()
    body = msgpack.packb([[1, 0, T0, [[0, 4, 0, 4, T0]]]])
    assert data == struct.pack(">HI", 1, crc32c(body)) + body


def test_every_flipped_byte_is_detected(tmp_path: Path) -> None:
    data = valid_bytes(tmp_path)
    path = tmp_path / "x.snapshot"
    for i in range(len(data)):
        for bit in (0x01, 0x80):
            damaged = bytearray(data)
            damaged[i] ^= bit
            path.write_bytes(bytes(damaged))
            with pytest.raises(CorruptSnapshotError) as info:
                read_snapshot(path)
            assert info.value.code == ErrorCode.KAFKA_STORAGE_ERROR
            assert str(path) in str(info.value)


def test_every_truncation_is_detected(tmp_path: Path) -> None:
    data = valid_bytes(tmp_path)
    path = tmp_path / "x.snapshot"
    for size in range(len(data)):
        path.write_bytes(data[:size])
        with pytest.raises(CorruptSnapshotError):
            read_snapshot(path)


def test_appended_bytes_are_detected(tmp_path: Path) -> None:
    path = tmp_path / "x.snapshot"
    path.write_bytes(valid_bytes(tmp_path) + b"\x00")
    with pytest.raises(CorruptSnapshotError, match="CRC"):
        read_snapshot(path)


@settings(max_examples=200)
@given(garbage=st.binary(max_size=200))
def test_garbage_is_rejected(garbage: bytes) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "x.snapshot"
        path.write_bytes(garbage)
        with pytest.raises(CorruptSnapshotError):
            read_snapshot(path)


def test_unknown_version_is_rejected(tmp_path: Path) -> None:
    path = tmp_path / "x.snapshot"
    path.write_bytes(raw_file(msgpack.packb([]), version=2))
    with pytest.raises(CorruptSnapshotError, match="version 2"):
        read_snapshot(path)


_BAD_SHAPES = {
    "not an array": {"a": 1},
    "entry not an array": [5],
    "entry too short": [[1, 0, T0]],
    "entry too long": [[1, 0, T0, [], 0]],
    "bool for an int": [[1, True, T0, []]],
    "float for an int": [[1, 0, 1.5, []]],
    "string": [["1", 0, T0, []]],
    "negative producer id": [[-1, 0, T0, []]],
    "batches not an array": [[1, 0, T0, 7]],
    "batch too short": [[1, 0, T0, [[0, 1, 2, 3]]]],
    "batch with nil": [[1, 0, T0, [[0, 1, 2, 3, None]]]],
    "six batches": [[1, 0, T0, [[i, i, i, i, i] for i in range(6)]]],
    "repeated producer id": [[1, 0, T0, []], [1, 1, T0, []]],
}


@pytest.mark.parametrize("name", sorted(_BAD_SHAPES))
def test_bad_shape_with_a_good_crc_is_rejected(tmp_path: Path, name: str) -> None:
    path = tmp_path / "x.snapshot"
    path.write_bytes(raw_file(msgpack.packb(_BAD_SHAPES[name])))
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)


@pytest.mark.parametrize(
    "body",
    [b"", b"\xc1", msgpack.packb([]) + b"\x90", b"\xdd\xff\xff\xff\xff", b"\x91" * 100_000],
    ids=["empty", "reserved byte", "extra data", "huge declared array", "deep nesting"],
)
def test_bad_msgpack_with_a_good_crc_is_rejected(tmp_path: Path, body: bytes) -> None:
    path = tmp_path / "x.snapshot"
    path.write_bytes(raw_file(body))
    with pytest.raises(CorruptSnapshotError):
        read_snapshot(path)


def test_file_over_the_size_limit_is_refused_unread(tmp_path: Path) -> None:
    path = tmp_path / "x.snapshot"
    with open(path, "wb") as f:
        f.truncate(MAX_SNAPSHOT_BYTES + 1)  # sparse: no disk or memory used
    with pytest.raises(CorruptSnapshotError, match="limit"):
        read_snapshot(path)


def test_write_refuses_a_negative_offset(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        write_snapshot(tmp_path, -1, [])
    assert list(tmp_path.iterdir()) == []


# --- load_latest_snapshot ---------------------------------------------------------------------


def test_load_without_snapshots(tmp_path: Path) -> None:
    assert load_latest_snapshot(tmp_path, upto=100) == ([], 0)


def test_load_takes_the_newest_at_or_below_upto_and_deletes_those_above(tmp_path: Path) -> None:
    for offset in (10, 20, 30, 40):
        write_snapshot(tmp_path, offset, [entry(offset, 0, (0, 0, offset - 1, offset - 1, T0))])
    entries, offset = load_latest_snapshot(tmp_path, upto=30)
    assert offset == 30
    assert [e.producer_id for e in entries] == [30]
    assert list_snapshot_offsets(tmp_path) == [10, 20, 30]
    assert load_latest_snapshot(tmp_path, upto=29)[1] == 20
    assert list_snapshot_offsets(tmp_path) == [10, 20]
    assert load_latest_snapshot(tmp_path, upto=5) == ([], 0)
    assert list_snapshot_offsets(tmp_path) == []


def test_load_deletes_corrupt_snapshots_and_falls_back(tmp_path: Path) -> None:
    for offset in (10, 20, 30):
        write_snapshot(tmp_path, offset, [entry(offset, 0)])
    damaged = bytearray(snapshot_path(tmp_path, 30).read_bytes())
    damaged[-1] ^= 0xFF
    snapshot_path(tmp_path, 30).write_bytes(bytes(damaged))
    snapshot_path(tmp_path, 20).write_bytes(b"garbage")
    with structlog.testing.capture_logs() as logs:
        entries, offset = load_latest_snapshot(tmp_path, upto=100)
    assert (offset, [e.producer_id for e in entries]) == (10, [10])
    assert list_snapshot_offsets(tmp_path) == [10]
    warned = [e["offset"] for e in logs if e["log_level"] == "warning"]
    assert warned == [30, 20]


def test_load_when_every_snapshot_is_corrupt(tmp_path: Path) -> None:
    write_snapshot(tmp_path, 10, ENTRIES)
    snapshot_path(tmp_path, 10).write_bytes(b"")
    assert load_latest_snapshot(tmp_path, upto=10) == ([], 0)
    assert list_snapshot_offsets(tmp_path) == []


def test_load_uses_the_given_logger(tmp_path: Path) -> None:
    write_snapshot(tmp_path, 50, [])
    with structlog.testing.capture_logs() as logs:
        load_latest_snapshot(tmp_path, upto=10, logger=structlog.get_logger("x").bind(log="t-0"))
    assert [(e["log"], e["offset"]) for e in logs] == [("t-0", 50)]


# --- delete_snapshots_below -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("below", "keep", "left"),
    [
        (25, 2, [30, 40]),  # 10 and 20 below, but 30 and 40 are the newest two anyway
        (35, 2, [30, 40]),  # 30 is below but one of the newest two
        (35, 1, [40]),
        (35, 0, [40]),
        (100, 0, []),
        (100, 5, [10, 20, 30, 40]),
        (10, 0, [10, 20, 30, 40]),  # strictly below
    ],
)
def test_delete_snapshots_below(tmp_path: Path, below: int, keep: int, left: list[int]) -> None:
    for offset in (10, 20, 30, 40):
        write_snapshot(tmp_path, offset, [])
    delete_snapshots_below(tmp_path, below, keep=keep)
    assert list_snapshot_offsets(tmp_path) == left


def test_delete_snapshots_below_default_keeps_two(tmp_path: Path) -> None:
    for offset in (10, 20, 30):
        write_snapshot(tmp_path, offset, [])
    delete_snapshots_below(tmp_path, 1000)
    assert list_snapshot_offsets(tmp_path) == [20, 30]
    with pytest.raises(ValueError):
        delete_snapshots_below(tmp_path, 1000, keep=-1)


# --- the rebuild path: snapshot, reset, replay ------------------------------------------------


def hdr(pid: int, epoch: int, seq: int, count: int, offset: int = 0, ts: int = T0) -> BatchHeader:
    return BatchHeader(
        offset, 100, -1, 2, 0, 0, count - 1, ts, ts + count - 1, pid, epoch, seq, count
    )


@st.composite
def histories(draw: st.DrawFn) -> list[BatchHeader]:
    """A log's producer batches: mostly in sequence, with epoch bumps, retries lost, plain
    batches and sequences near the wrap-around."""
    next_seq: dict[int, tuple[int, int]] = {}  # pid -> (epoch, next sequence)
    log: list[BatchHeader] = []
    offset = 0
    for _ in range(draw(st.integers(0, 30))):
        pid = draw(st.integers(-1, 3))
        count = draw(st.integers(1, 3))
        ts = T0 + draw(st.integers(0, 10_000))
        epoch, seq = next_seq.get(pid, (0, draw(st.sampled_from([0, MAX_SEQUENCE - 1]))))
        move = draw(st.sampled_from(["next", "next", "next", "bump", "gap"]))
        if pid == -1:
            epoch, seq = -1, -1
        elif move == "bump":
            epoch, seq = epoch + 1, 0
        elif move == "gap":
            seq = (seq + draw(st.integers(1, 3))) & MAX_SEQUENCE
        log.append(hdr(pid, epoch, seq, count, offset, ts))
        if pid != -1:
            next_seq[pid] = (epoch, (seq + count) & MAX_SEQUENCE)
        offset += count
    return log


def probes(m: ProducerStateManager) -> list[BatchHeader]:
    """Batches to ask about: every cached batch resent, next, gap, older and newer epochs."""
    out = [hdr(99, 0, 5, 1)]
    for pid, e in m.producers.items():
        out += [
            hdr(pid, e.producer_epoch, b.first_seq, b.last_offset - b.first_offset + 1)
            for b in e.batches
        ]
        nxt = (e.last_seq + 1) & MAX_SEQUENCE
        out += [
            hdr(pid, e.producer_epoch, nxt, 2),
            hdr(pid, e.producer_epoch, (nxt + 1) & MAX_SEQUENCE, 1),
            hdr(pid, e.producer_epoch - 1, 0, 1),
            hdr(pid, e.producer_epoch + 1, 0, 1),
            hdr(pid, e.producer_epoch + 1, 3, 1),
        ]
    return out


def answer(m: ProducerStateManager, header: BatchHeader) -> DuplicateBatch | ErrorCode | None:
    try:
        return m.check_leader_append([header])
    except HighwaterError as exc:
        return exc.code


@settings(max_examples=150, deadline=None)
@given(log=histories(), data=st.data())
def test_snapshot_reset_and_replay_rebuild_the_same_state(
    log: list[BatchHeader], data: st.DataObject
) -> None:
    """What the Log does after a crash or truncation: reset from the snapshot taken after the
    first k batches, replay the rest; the answers must equal those of a full replay."""
    full = ProducerStateManager()
    for header in log:
        full.update(header)
    k = data.draw(st.integers(0, len(log)), label="snapshot after k batches")
    partial = ProducerStateManager()
    for header in log[:k]:
        partial.update(header)
    with tempfile.TemporaryDirectory() as d:
        directory = Path(d)
        write_snapshot(directory, partial.map_end_offset, partial.snapshot_entries())
        rebuilt = ProducerStateManager()
        rebuilt.reset(*load_latest_snapshot(directory, upto=full.map_end_offset))
    assert rebuilt.map_end_offset == partial.map_end_offset
    for header in log:
        if header.base_offset >= rebuilt.map_end_offset:
            rebuilt.update(header)
    assert rebuilt.snapshot_entries() == full.snapshot_entries()
    assert rebuilt.map_end_offset == full.map_end_offset
    for probe in probes(full):
        assert answer(rebuilt, probe) == answer(full, probe)


@settings(max_examples=100, deadline=None)
@given(log=histories())
def test_snapshot_round_trip_keeps_every_answer(log: list[BatchHeader]) -> None:
    m = ProducerStateManager()
    for header in log:
        m.update(header)
    with tempfile.TemporaryDirectory() as d:
        path = write_snapshot(Path(d), m.map_end_offset, m.snapshot_entries())
        restored = ProducerStateManager()
        restored.reset(read_snapshot(path), m.map_end_offset)
        assert os.path.getsize(path) < 300 * max(1, len(m.producers))
    assert restored.snapshot_entries() == m.snapshot_entries()
    for probe in probes(m):
        assert answer(restored, probe) == answer(m, probe)
