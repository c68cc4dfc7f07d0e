"""broker.core.series_ring: the status page's bounded history of series."""

from __future__ import annotations

import tracemalloc

import pytest

from broker.core.series_ring import SeriesRing


def test_keeps_the_last_capacity_samples_oldest_first() -> None:
    ring: SeriesRing[str] = SeriesRing(capacity=4, fields=1, max_series=10)
    for n in range(10):
        ring.add(1000 * n, {"t": [n]})
    assert ring.times_ms() == [6000, 7000, 8000, 9000]
    assert ring.values("t", 0) == [6, 7, 8, 9]


def test_a_series_absent_from_a_sample_has_a_gap_there_not_an_old_value() -> None:
    ring: SeriesRing[str] = SeriesRing(capacity=3, fields=2, max_series=10)
    ring.add(0, {"a": [1, 10], "b": [2, 20]})
    ring.add(1, {"a": [3, None]})
    ring.add(2, {"a": [4, 40], "b": [5, 50]})
    ring.add(3, {"a": [6, 60]})  # reuses slot 0, where b had 2
    assert ring.times_ms() == [1, 2, 3]
    assert ring.values("a", 0) == [3, 4, 6]
    assert ring.values("a", 1) == [None, 40, 60]
    assert ring.values("b", 0) == [None, 5, None]


def test_a_series_started_late_has_gaps_before_it() -> None:
    ring: SeriesRing[str] = SeriesRing(capacity=4, fields=1, max_series=10)
    ring.add(0, {"a": [1]})
    ring.add(1, {"a": [1], "late": [7]})
    assert ring.values("late", 0) == [None, 7]


def test_a_series_absent_for_a_whole_window_is_forgotten() -> None:
    ring: SeriesRing[str] = SeriesRing(capacity=3, fields=1, max_series=10)
    ring.add(0, {"deleted": [1], "kept": [1]})
    for n in range(1, 3):
        ring.add(n, {"kept": [1]})
        assert "deleted" in ring
    ring.add(3, {"kept": [1]})
    assert "deleted" not in ring
    assert list(ring.names()) == ["kept"]


def test_at_the_limit_gone_series_make_room_oldest_first() -> None:
    ring: SeriesRing[str] = SeriesRing(capacity=10, fields=1, max_series=3)
    ring.add(0, {"a": [1], "b": [1], "c": [1]})
    ring.add(1, {"b": [1], "c": [1]})  # a last seen at 0
    ring.add(2, {"c": [1]})  # b last seen at 1
    ring.add(3, {"c": [1], "d": [1]})  # full: a (seen longest ago) goes
    assert sorted(ring.names()) == ["b", "c", "d"]
    ring.add(4, {"c": [1], "d": [1], "e": [1]})  # then b
    assert sorted(ring.names()) == ["c", "d", "e"]
    assert ring.refused == 0


def test_at_the_limit_live_series_are_not_evicted_the_new_one_is_not_kept() -> None:
    ring: SeriesRing[str] = SeriesRing(capacity=10, fields=1, max_series=2)
    for n in range(3):
        ring.add(n, {"a": [n], "b": [n], "c": [n]})
    assert len(ring) == 2
    assert ring.values("a", 0) == [0, 1, 2]  # no churn: the kept ones keep every sample
    assert ring.values("b", 0) == [0, 1, 2]
    assert "c" not in ring
    assert ring.refused == 3


def test_memory_is_fixed_per_series_whatever_the_samples() -> None:
    ring: SeriesRing[str] = SeriesRing(capacity=360, fields=2, max_series=5)
    ring.add(0, {"t": [1, 1]})
    one = ring.memory_bytes()
    assert one == 8 * (360 + 360 * 2)
    for n in range(1, 2000):  # many windows over
        ring.add(n, {f"t{k}": [n * 10**9, n] for k in range(50)})
    assert len(ring) == 5
    assert ring.memory_bytes() == 8 * (360 + 5 * 360 * 2)


def test_the_heap_it_holds_is_bounded() -> None:
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        ring: SeriesRing[int] = SeriesRing(capacity=360, fields=2, max_series=100)
        for n in range(1000):
            ring.add(n * 10_000, {k: [n * 1000 + k, k % 3] for k in range(300)})
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    assert len(ring) == 100
    # 100 series of 360 x 2 values and the times: 583 KB of arrays, plus per-series overhead.
    assert ring.memory_bytes() == 8 * (360 + 100 * 720)
    assert held < ring.memory_bytes() + 100 * 1024


def test_bad_bounds_are_refused() -> None:
    with pytest.raises(ValueError):
        SeriesRing(capacity=1, fields=1, max_series=1)
