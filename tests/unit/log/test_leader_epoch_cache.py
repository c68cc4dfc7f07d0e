"""The leader epoch cache: Kafka's LeaderEpochFileCache rules, KIP-279 end offsets, persistence."""

from __future__ import annotations

import itertools
import os
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log.checkpoints import CorruptCheckpointError, EpochEntry, LeaderEpochCheckpointFile
from broker.log.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    LeaderEpochCache,
)


def E(epoch: int, start_offset: int) -> EpochEntry:
    return EpochEntry(epoch, start_offset)


def cache_with(*entries: tuple[int, int], path: Path | None = None) -> LeaderEpochCache:
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(path) if path is not None else None)
    for epoch, start_offset in entries:
        cache.assign(epoch, start_offset)
    assert cache.entries() == [E(e, o) for e, o in entries]
    return cache


def reloaded(path: Path) -> list[EpochEntry]:
    return LeaderEpochCache(LeaderEpochCheckpointFile(path)).entries()


# --- constants and accessors --------------------------------------------------------------------


def test_undefined_constants_match_kafka() -> None:
    assert UNDEFINED_EPOCH == -1
    assert UNDEFINED_EPOCH_OFFSET == -1


def test_empty_cache_accessors() -> None:
    cache = LeaderEpochCache()
    assert cache.entries() == []
    assert cache.latest_epoch() == UNDEFINED_EPOCH
    assert cache.latest_entry() is None
    assert cache.earliest_entry() is None
    assert cache.epoch_for_offset(0) is None


def test_accessors() -> None:
    cache = cache_with((0, 0), (1, 4), (4, 10))
    assert cache.latest_epoch() == 4
    assert cache.latest_entry() == E(4, 10)
    assert cache.earliest_entry() == E(0, 0)


def test_entries_is_a_copy() -> None:
    cache = cache_with((0, 0))
    cache.entries().append(E(9, 9))
    assert cache.entries() == [E(0, 0)]


# --- end_offset_for (KIP-279) -------------------------------------------------------------------

_KIP279 = [(0, 0), (1, 4), (4, 10), (6, 15)]


@pytest.mark.parametrize(
    ("entries", "requested", "expected"),
    [
        pytest.param(_KIP279, 6, (6, 20), id="latest epoch ends at log end offset"),
        pytest.param(_KIP279, 4, (4, 15), id="known epoch ends where the next starts"),
        pytest.param(_KIP279, 5, (4, 15), id="unknown epoch: largest smaller epoch"),
        pytest.param(_KIP279, 3, (1, 10), id="unknown epoch between 1 and 4"),
        pytest.param(_KIP279, 2, (1, 10), id="unknown epoch just above 1"),
        pytest.param(_KIP279, 1, (1, 10), id="middle epoch"),
        pytest.param(_KIP279, 0, (0, 4), id="first epoch"),
        pytest.param(_KIP279, 7, (-1, -1), id="epoch above latest"),
        pytest.param(_KIP279, 100, (-1, -1), id="epoch far above latest"),
        pytest.param(_KIP279, -1, (-1, -1), id="undefined epoch"),
        pytest.param([(2, 5), (3, 9)], 1, (1, 5), id="epoch below earliest: start of earliest"),
        pytest.param([(2, 5), (3, 9)], 0, (0, 5), id="epoch 0 below earliest"),
        pytest.param([(2, 5), (3, 9)], 2, (2, 9), id="earliest epoch"),
        pytest.param([], 0, (-1, -1), id="empty cache"),
        pytest.param([], -1, (-1, -1), id="empty cache undefined epoch"),
        pytest.param([(3, 7)], 3, (3, 20), id="single entry latest"),
        pytest.param([(3, 7)], 2, (2, 7), id="single entry below"),
    ],
)
def test_end_offset_for(
    entries: list[tuple[int, int]], requested: int, expected: tuple[int, int]
) -> None:
    cache = cache_with(*entries)
    assert cache.end_offset_for(requested, 20) == expected


def test_end_offset_for_latest_uses_given_log_end_offset() -> None:
    cache = cache_with(*_KIP279)
    assert cache.end_offset_for(6, 15) == (6, 15)
    assert cache.end_offset_for(6, 1000) == (6, 1000)


# --- epoch_for_offset ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("offset", "expected"),
    [(0, 0), (3, 0), (4, 1), (9, 1), (10, 4), (14, 4), (15, 6), (10**9, 6)],
)
def test_epoch_for_offset(offset: int, expected: int) -> None:
    assert cache_with(*_KIP279).epoch_for_offset(offset) == expected


def test_epoch_for_offset_before_first_entry() -> None:
    cache = cache_with((2, 5))
    assert cache.epoch_for_offset(4) is None
    assert cache.epoch_for_offset(5) == 2


# --- assign -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("epoch", "start_offset", "expected"),
    [
        pytest.param(6, 18, _KIP279, id="same epoch larger offset ignored"),
        pytest.param(6, 15, _KIP279, id="same epoch same offset ignored"),
        pytest.param(6, 12, [(0, 0), (1, 4), (4, 10), (6, 12)], id="same epoch smaller offset"),
        pytest.param(
            6, 10, [(0, 0), (1, 4), (6, 10)], id="same epoch offset of earlier entry removes it"
        ),
        pytest.param(7, 30, [*_KIP279, (7, 30)], id="new epoch appended"),
        pytest.param(9, 12, [(0, 0), (1, 4), (4, 10), (9, 12)], id="higher epoch lower offset"),
        pytest.param(2, 30, [(0, 0), (1, 4), (2, 30)], id="lower epoch larger offset"),
        pytest.param(4, 30, [(0, 0), (1, 4), (4, 30)], id="earlier epoch re-assigned later"),
        pytest.param(3, 8, [(0, 0), (1, 4), (3, 8)], id="lower epoch lower offset"),
        pytest.param(0, 0, [(0, 0)], id="first entry again truncates everything after"),
        pytest.param(5, 0, [(5, 0)], id="offset 0 removes all"),
    ],
)
def test_assign(
    tmp_path: Path, epoch: int, start_offset: int, expected: list[tuple[int, int]]
) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = cache_with(*_KIP279, path=path)
    cache.assign(epoch, start_offset)
    assert cache.entries() == [E(e, o) for e, o in expected]
    assert reloaded(path) == cache.entries()


def test_assign_first_entry() -> None:
    cache = LeaderEpochCache()
    cache.assign(3, 100)
    assert cache.entries() == [E(3, 100)]


@pytest.mark.parametrize(("epoch", "start_offset"), [(-1, 0), (0, -1), (-5, -5)])
def test_assign_rejects_negative(epoch: int, start_offset: int) -> None:
    cache = cache_with((0, 0))
    with pytest.raises(ValueError):
        cache.assign(epoch, start_offset)
    assert cache.entries() == [E(0, 0)]


def test_assign_no_op_does_not_rewrite_file(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    cache = cache_with((1, 5), path=path)
    path.unlink()
    cache.assign(1, 9)
    cache.assign(1, 5)
    assert not path.exists()
    assert cache.entries() == [E(1, 5)]


# --- truncate_from_end --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("end_offset", "expected"),
    [
        pytest.param(20, _KIP279, id="past latest start: nothing"),
        pytest.param(16, _KIP279, id="inside latest epoch: nothing"),
        pytest.param(15, [(0, 0), (1, 4), (4, 10)], id="at latest start removes it"),
        pytest.param(11, [(0, 0), (1, 4), (4, 10)], id="inside an earlier epoch"),
        pytest.param(10, [(0, 0), (1, 4)], id="at an earlier start"),
        pytest.param(1, [(0, 0)], id="keeps entries starting below"),
        pytest.param(0, [], id="zero removes all"),
        pytest.param(-1, _KIP279, id="negative end offset ignored"),
    ],
)
def test_truncate_from_end(
    tmp_path: Path, end_offset: int, expected: list[tuple[int, int]]
) -> None:
    path = tmp_path / "cp"
    cache = cache_with(*_KIP279, path=path)
    cache.truncate_from_end(end_offset)
    assert cache.entries() == [E(e, o) for e, o in expected]
    assert reloaded(path) == cache.entries()


def test_truncate_from_end_on_empty_cache() -> None:
    cache = LeaderEpochCache()
    cache.truncate_from_end(0)
    assert cache.entries() == []


# --- truncate_from_start ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("start_offset", "expected"),
    [
        pytest.param(-1, _KIP279, id="before everything: nothing"),
        pytest.param(0, _KIP279, id="at first start: unchanged"),
        pytest.param(2, [(0, 2), (1, 4), (4, 10), (6, 15)], id="inside first epoch moves it"),
        pytest.param(4, [(1, 4), (4, 10), (6, 15)], id="at second start drops the first"),
        pytest.param(
            12, [(4, 12), (6, 15)], id="drops all but the last removed, re-inserted at start"
        ),
        pytest.param(15, [(6, 15)], id="at latest start"),
        pytest.param(30, [(6, 30)], id="past latest: latest moved"),
    ],
)
def test_truncate_from_start(
    tmp_path: Path, start_offset: int, expected: list[tuple[int, int]]
) -> None:
    path = tmp_path / "cp"
    cache = cache_with(*_KIP279, path=path)
    cache.truncate_from_start(start_offset)
    assert cache.entries() == [E(e, o) for e, o in expected]
    assert reloaded(path) == cache.entries()


def test_truncate_from_start_before_first_entry_keeps_gap() -> None:
    cache = cache_with((3, 10), (4, 20))
    cache.truncate_from_start(5)
    assert cache.entries() == [E(3, 10), E(4, 20)]


# --- clear, flush, persistence ------------------------------------------------------------------


def test_clear_flushes_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    cache = cache_with(*_KIP279, path=path)
    cache.clear()
    assert cache.entries() == []
    assert cache.latest_epoch() == UNDEFINED_EPOCH
    assert path.read_bytes() == b"0\n0\n"


def test_clear_writes_file_even_if_empty(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    LeaderEpochCache(LeaderEpochCheckpointFile(path)).clear()
    assert path.read_bytes() == b"0\n0\n"


def test_flush_writes_kafka_format(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(path))
    assert not path.exists()
    cache.flush()
    assert path.read_bytes() == b"0\n0\n"
    cache.assign(0, 0)
    cache.assign(1, 4)
    cache.assign(4, 10)
    assert path.read_bytes() == b"0\n3\n0 0\n1 4\n4 10\n"
    path.unlink()
    cache.flush()
    assert path.read_bytes() == b"0\n3\n0 0\n1 4\n4 10\n"


def test_flush_without_checkpoint_is_a_no_op() -> None:
    cache = cache_with((0, 0))
    cache.flush()
    assert cache.entries() == [E(0, 0)]


def test_persistence_after_each_mutation(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(path))
    steps: list[tuple[Callable[[], None], list[EpochEntry]]] = [
        (lambda: cache.assign(0, 0), [E(0, 0)]),
        (lambda: cache.assign(1, 4), [E(0, 0), E(1, 4)]),
        (lambda: cache.assign(4, 10), [E(0, 0), E(1, 4), E(4, 10)]),
        (lambda: cache.truncate_from_end(8), [E(0, 0), E(1, 4)]),
        (lambda: cache.assign(5, 8), [E(0, 0), E(1, 4), E(5, 8)]),
        (lambda: cache.truncate_from_start(6), [E(1, 6), E(5, 8)]),
        (lambda: cache.assign(2, 20), [E(1, 6), E(2, 20)]),
        (lambda: cache.clear(), []),
    ]
    for mutate, expected in steps:
        mutate()
        assert cache.entries() == expected
        assert reloaded(path) == expected
        assert LeaderEpochCheckpointFile(path).read() == expected


def test_loads_existing_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(b"0\n2\n3 100\n5 250\n")
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(path))
    assert cache.entries() == [E(3, 100), E(5, 250)]
    assert cache.latest == E(5, 250)
    assert cache.end_offset_for(3, 300) == (3, 250)


def test_missing_checkpoint_loads_empty_and_does_not_create_file(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    cache = LeaderEpochCache(LeaderEpochCheckpointFile(path))
    assert cache.entries() == []
    assert not path.exists()


@pytest.mark.parametrize(
    ("data", "line"),
    [
        pytest.param(b"0\n2\n3 100\n3 200\n", 4, id="repeated epoch"),
        pytest.param(b"0\n2\n3 100\n2 200\n", 4, id="decreasing epoch"),
        pytest.param(b"0\n2\n3 100\n4 100\n", 4, id="repeated start offset"),
        pytest.param(b"0\n3\n1 1\n3 100\n4 50\n", 5, id="decreasing start offset"),
    ],
)
def test_non_monotonic_checkpoint_is_corrupt(tmp_path: Path, data: bytes, line: int) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    path.write_bytes(data)
    with pytest.raises(CorruptCheckpointError) as excinfo:
        LeaderEpochCache(LeaderEpochCheckpointFile(path))
    assert str(path) in excinfo.value.message
    assert f"line {line}:" in excinfo.value.message
    assert "strictly increasing" in excinfo.value.message


def test_corrupt_file_propagates(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\n5\n1 1\n")
    with pytest.raises(CorruptCheckpointError):
        LeaderEpochCache(LeaderEpochCheckpointFile(path))


def test_failed_write_leaves_memory_matching_disk(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cp"
    cache = cache_with((0, 0), (1, 4), path=path)

    def failing_fsync(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", failing_fsync)
    with pytest.raises(OSError):
        cache.assign(2, 9)
    with pytest.raises(OSError):
        cache.truncate_from_end(0)
    with pytest.raises(OSError):
        cache.clear()
    monkeypatch.undo()
    assert cache.entries() == [E(0, 0), E(1, 4)]
    assert reloaded(path) == cache.entries()


# --- invariants under any sequence of operations ------------------------------------------------

_OFFSETS = st.integers(0, 40)
_PROBES = range(45)
_OPS = st.one_of(
    st.tuples(st.just("assign"), st.integers(0, 10), _OFFSETS),
    st.tuples(st.just("truncate_from_end"), st.integers(-1, 40), st.just(0)),
    st.tuples(st.just("truncate_from_start"), st.integers(-1, 40), st.just(0)),
    st.tuples(st.just("clear"), st.just(0), st.just(0)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(_OPS, max_size=30))
def test_invariants_hold_after_any_operations(ops: list[tuple[str, int, int]]) -> None:
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "leader-epoch-checkpoint"
        cache = LeaderEpochCache(LeaderEpochCheckpointFile(path))
        for op, a, b in ops:
            before = cache.entries()
            epochs_before = [cache.epoch_for_offset(x) for x in _PROBES]
            if op == "assign":
                cache.assign(a, b)
                assert cache.latest_epoch() == a
                assert cache.epoch_for_offset(b) == a
                if cache.entries() != before:
                    kept = [e for e in before if e.epoch < a and e.start_offset < b]
                    assert cache.entries() == [*kept, EpochEntry(a, b)]
            elif op == "truncate_from_end":
                cache.truncate_from_end(a)
                if a >= 0:
                    assert all(e.start_offset < a for e in cache.entries())
                # Offsets below the new end keep their epochs.
                for x, epoch in zip(_PROBES, epochs_before, strict=True):
                    if x < a:
                        assert cache.epoch_for_offset(x) == epoch
            elif op == "truncate_from_start":
                cache.truncate_from_start(a)
                assert all(e.start_offset >= a for e in cache.entries())
                # Offsets still in the log keep their epochs.
                for x, epoch in zip(_PROBES, epochs_before, strict=True):
                    if x >= a:
                        assert cache.epoch_for_offset(x) == epoch
            else:
                cache.clear()
            entries = cache.entries()
            assert cache.latest == (entries[-1] if entries else None)
            for prev, cur in itertools.pairwise(entries):
                assert prev.epoch < cur.epoch
                assert prev.start_offset < cur.start_offset
            if path.exists():
                expected = "".join(f"{e.epoch} {e.start_offset}\n" for e in entries)
                assert path.read_bytes() == f"0\n{len(entries)}\n{expected}".encode()
            else:
                assert entries == []
            assert reloaded(path) == entries
