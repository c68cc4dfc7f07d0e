"""Checkpoint files: Kafka's exact text format, atomic replacement, and strict reads."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from broker.log.checkpoints import (
    CorruptCheckpointError,
    EpochEntry,
    LeaderEpochCheckpointFile,
    OffsetCheckpointFile,
    write_atomically,
)
from protocol.errors import ErrorCode, HighwaterError

# --- write_atomically ---------------------------------------------------------------------------


def test_write_atomically_replaces_content_and_leaves_no_tmp(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_atomically(path, b"old")
    write_atomically(path, b"new")
    assert path.read_bytes() == b"new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp"]


def test_write_atomically_overwrites_stale_tmp(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    (tmp_path / "cp.tmp").write_bytes(b"stale garbage from a crash, much longer than the data")
    write_atomically(path, b"x")
    assert path.read_bytes() == b"x"
    assert not (tmp_path / "cp.tmp").exists()


def test_write_atomically_fsyncs_file_then_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cp"
    synced: list[tuple[str, bool]] = []
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        # What the fd points at, and whether the final name exists yet (i.e. before/after rename).
        synced.append((os.readlink(f"/proc/self/fd/{fd}"), path.exists()))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    write_atomically(path, b"data")
    assert synced == [(str(tmp_path / "cp.tmp"), False), (str(tmp_path), True)]


def test_write_atomically_failure_keeps_old_file_and_removes_tmp(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cp"
    write_atomically(path, b"old")

    def failing_fsync(fd: int) -> None:
        raise OSError(5, "Input/output error")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        write_atomically(path, b"new")
    assert path.read_bytes() == b"old"
    assert not (tmp_path / "cp.tmp").exists()


# --- OffsetCheckpointFile: format and round trip ------------------------------------------------


def test_offset_checkpoint_exact_bytes_sorted(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "replication-offset-checkpoint")
    cp.write({("foo", 1): 20, ("bar", 3): 7, ("foo", 0): 10})
    assert cp.path.read_bytes() == b"0\n3\nbar 3 7\nfoo 0 10\nfoo 1 20\n"


def test_offset_checkpoint_exact_bytes_two_entries(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({("foo", 0): 10, ("foo", 1): 20})
    assert cp.path.read_bytes() == b"0\n2\nfoo 0 10\nfoo 1 20\n"


def test_offset_checkpoint_sorts_partitions_numerically(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({("t", 10): 1, ("t", 2): 2})
    assert cp.path.read_bytes() == b"0\n2\nt 2 2\nt 10 1\n"


def test_offset_checkpoint_empty(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({})
    assert cp.path.read_bytes() == b"0\n0\n"
    assert cp.read() == {}


def test_offset_checkpoint_round_trip(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    entries = {("orders", 0): 0, ("orders", 1): 123456789012, ("a.b_c-d", 7): -1}
    cp.write(entries)
    assert cp.read() == entries
    assert cp.path == tmp_path / "cp"


def test_offset_checkpoint_reads_kafka_written_file(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\n2\n__consumer_offsets 0 42\nlogs 3 9\n")
    assert OffsetCheckpointFile(path).read() == {("__consumer_offsets", 0): 42, ("logs", 3): 9}


def test_offset_checkpoint_missing_file_is_empty(tmp_path: Path) -> None:
    assert OffsetCheckpointFile(tmp_path / "nope").read() == {}


def test_offset_checkpoint_rewrite_replaces_everything(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({("a", 0): 1, ("b", 0): 2})
    cp.write({("c", 0): 3})
    assert cp.read() == {("c", 0): 3}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp"]


def test_offset_checkpoint_stale_tmp_does_not_affect_read(tmp_path: Path) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({("a", 0): 5})
    (tmp_path / "cp.tmp").write_bytes(b"0\n1\na 0 999\n")
    assert cp.read() == {("a", 0): 5}


def test_offset_checkpoint_stale_tmp_without_real_file_reads_empty(tmp_path: Path) -> None:
    (tmp_path / "cp.tmp").write_bytes(b"0\n1\na 0 999\n")
    assert OffsetCheckpointFile(tmp_path / "cp").read() == {}


@pytest.mark.parametrize("topic", ["has space", "tab\there", "new\nline", "", "cr\r"])
def test_offset_checkpoint_rejects_bad_topic_on_write(tmp_path: Path, topic: str) -> None:
    cp = OffsetCheckpointFile(tmp_path / "cp")
    cp.write({("keep", 0): 1})
    with pytest.raises(ValueError, match="topic"):
        cp.write({(topic, 0): 1})
    assert cp.read() == {("keep", 0): 1}


def test_offset_checkpoint_rejects_negative_partition_on_write(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="partition"):
        OffsetCheckpointFile(tmp_path / "cp").write({("t", -1): 1})
    assert not (tmp_path / "cp").exists()


_KAFKA_TOPIC = st.text(
    alphabet="abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-",
    min_size=1,
    max_size=20,
)


@given(
    st.dictionaries(
        st.tuples(_KAFKA_TOPIC, st.integers(0, 2**31 - 1)),
        st.integers(-1, 2**63 - 1),
        max_size=20,
    )
)
def test_offset_checkpoint_round_trip_property(entries: dict[tuple[str, int], int]) -> None:
    with tempfile.TemporaryDirectory() as d:
        cp = OffsetCheckpointFile(Path(d) / "cp")
        cp.write(entries)
        assert cp.read() == entries
        lines = cp.path.read_bytes().split(b"\n")
        assert lines[:2] == [b"0", str(len(entries)).encode()]
        assert lines[-1] == b""


# --- OffsetCheckpointFile: strict reads ---------------------------------------------------------

_CORRUPT_OFFSET_FILES = {
    "wrong version": (b"1\n1\nfoo 0 10\n", 1, "version"),
    "version with spaces": (b" 0\n1\nfoo 0 10\n", 1, "version"),
    "empty file": (b"", 1, "empty"),
    "version only": (b"0\n", 2, "count"),
    "count not an integer": (b"0\nx\n", 2, "count"),
    "negative count": (b"0\n-1\n", 2, "count"),
    "fewer lines than count": (b"0\n3\nfoo 0 10\nfoo 1 20\n", 5, "3 entries"),
    "more lines than count": (b"0\n1\nfoo 0 10\nfoo 1 20\n", 4, "1 entries"),
    "trailing blank line": (b"0\n1\nfoo 0 10\n\n", 4, "1 entries"),
    "non-integer offset": (b"0\n1\nfoo 0 ten\n", 3, "offset"),
    "float offset": (b"0\n1\nfoo 0 1.5\n", 3, "offset"),
    "underscore offset": (b"0\n1\nfoo 0 1_0\n", 3, "offset"),
    "plus sign partition": (b"0\n1\nfoo +1 10\n", 3, "partition"),
    "non-integer partition": (b"0\n1\nfoo p 10\n", 3, "partition"),
    "non-ascii digit offset": ("0\n1\nfoo 0 1\u0663\n".encode(), 3, "offset"),
    "negative partition": (b"0\n1\nfoo -1 10\n", 3, "negative partition"),
    "too few fields": (b"0\n1\nfoo 10\n", 3, "fields"),
    "too many fields": (b"0\n1\nfoo 0 10 extra\n", 3, "fields"),
    "double space": (b"0\n1\nfoo  0 10\n", 3, "fields"),
    "tab separated": (b"0\n1\nfoo\t0\t10\n", 3, "fields"),
    "crlf line ending": (b"0\r\n1\r\nfoo 0 10\r\n", 1, "version"),
    "carriage return in offset": (b"0\n1\nfoo 0 10\r\n", 3, "offset"),
    "duplicate topic-partition": (b"0\n2\nfoo 0 10\nfoo 0 20\n", 4, "duplicate"),
    "non-utf8 topic": (b"0\n1\nfo\xff 0 10\n", 3, "UTF-8"),
    "missing final newline": (b"0\n1\nfoo 0 10", 3, "newline"),
    "truncated mid line": (b"0\n2\nfoo 0 10\nfoo 1 2", 4, "newline"),
    "empty topic": (b"0\n1\n 0 10\n", 3, "topic"),
}


@pytest.mark.parametrize(
    ("data", "line", "what"), _CORRUPT_OFFSET_FILES.values(), ids=_CORRUPT_OFFSET_FILES.keys()
)
def test_offset_checkpoint_corruption_raises(
    tmp_path: Path, data: bytes, line: int, what: str
) -> None:
    path = tmp_path / "recovery-point-offset-checkpoint"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError) as excinfo:
        OffsetCheckpointFile(path).read()
    err = excinfo.value
    assert str(path) in err.message
    assert f"line {line}:" in err.message
    assert what in err.message
    assert err.line == line
    assert err.path == path
    assert err.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert isinstance(err, HighwaterError)


# --- LeaderEpochCheckpointFile ------------------------------------------------------------------


def test_leader_epoch_checkpoint_exact_bytes_and_round_trip(tmp_path: Path) -> None:
    cp = LeaderEpochCheckpointFile(tmp_path / "leader-epoch-checkpoint")
    entries = [EpochEntry(0, 0), EpochEntry(1, 4), EpochEntry(4, 10)]
    cp.write(entries)
    assert cp.path.read_bytes() == b"0\n3\n0 0\n1 4\n4 10\n"
    assert cp.read() == entries


def test_leader_epoch_checkpoint_keeps_file_order(tmp_path: Path) -> None:
    # Ordering rules belong to the cache; the file just stores what it is given.
    cp = LeaderEpochCheckpointFile(tmp_path / "cp")
    cp.write([EpochEntry(5, 50), EpochEntry(2, 20)])
    assert cp.read() == [EpochEntry(5, 50), EpochEntry(2, 20)]


def test_leader_epoch_checkpoint_empty_and_missing(tmp_path: Path) -> None:
    cp = LeaderEpochCheckpointFile(tmp_path / "cp")
    assert cp.read() == []
    cp.write([])
    assert cp.path.read_bytes() == b"0\n0\n"
    assert cp.read() == []
    assert sorted(p.name for p in tmp_path.iterdir()) == ["cp"]


def test_leader_epoch_checkpoint_stale_tmp_does_not_affect_read(tmp_path: Path) -> None:
    cp = LeaderEpochCheckpointFile(tmp_path / "cp")
    cp.write([EpochEntry(3, 7)])
    (tmp_path / "cp.tmp").write_bytes(b"0\n1\n9 9\n")
    assert cp.read() == [EpochEntry(3, 7)]


def test_leader_epoch_checkpoint_rejects_negative_on_write(tmp_path: Path) -> None:
    with pytest.raises(ValueError):
        LeaderEpochCheckpointFile(tmp_path / "cp").write([EpochEntry(-1, 0)])
    with pytest.raises(ValueError):
        LeaderEpochCheckpointFile(tmp_path / "cp").write([EpochEntry(0, -1)])
    assert not (tmp_path / "cp").exists()


_CORRUPT_EPOCH_FILES = {
    "wrong version": (b"2\n0\n", 1, "version"),
    "count mismatch fewer": (b"0\n2\n0 0\n", 4, "2 entries"),
    "count mismatch more": (b"0\n0\n0 0\n", 3, "0 entries"),
    "non-integer epoch": (b"0\n1\nx 0\n", 3, "epoch"),
    "non-integer start offset": (b"0\n1\n0 y\n", 3, "start offset"),
    "three fields": (b"0\n1\n0 0 0\n", 3, "fields"),
    "one field": (b"0\n1\n0\n", 3, "fields"),
    "negative epoch": (b"0\n1\n-1 0\n", 3, "negative"),
    "negative start offset": (b"0\n1\n0 -5\n", 3, "negative"),
    "non-utf8": (b"0\n1\n\xc3\x28 0\n", 3, "UTF-8"),
    "missing final newline": (b"0\n1\n0 0", 3, "newline"),
}


@pytest.mark.parametrize(
    ("data", "line", "what"), _CORRUPT_EPOCH_FILES.values(), ids=_CORRUPT_EPOCH_FILES.keys()
)
def test_leader_epoch_checkpoint_corruption_raises(
    tmp_path: Path, data: bytes, line: int, what: str
) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError) as excinfo:
        LeaderEpochCheckpointFile(path).read()
    assert str(path) in excinfo.value.message
    assert f"line {line}:" in excinfo.value.message
    assert what in excinfo.value.message
    assert excinfo.value.code is ErrorCode.KAFKA_STORAGE_ERROR


def test_corrupt_checkpoint_error_keeps_highwater_signature() -> None:
    err = CorruptCheckpointError("bad")
    assert err.message == "bad"
    assert err.code is ErrorCode.KAFKA_STORAGE_ERROR
    assert err.path is None and err.line is None
