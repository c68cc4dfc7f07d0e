"""Offset planning for the Spark source: checkpoint JSON, maxOffsetsPerTrigger, task splitting."""

from __future__ import annotations

import itertools
import json

from hypothesis import given
from hypothesis import strategies as st

from client.spark.offsets import (
    EARLIEST,
    LATEST,
    OffsetRange,
    PartitionOffsets,
    TopicPartition,
    from_json,
    rate_limit,
    split_ranges,
    to_json,
)

TP = TopicPartition

topic_partitions = st.builds(TP, st.sampled_from(["a", "b", "events"]), st.integers(0, 7))
offset_maps = st.dictionaries(topic_partitions, st.integers(0, 2**62), max_size=12)


def test_markers_are_sparks() -> None:
    assert (EARLIEST, LATEST) == (-2, -1)


def test_topic_partition_prints_as_kafka_does() -> None:
    assert str(TP("events", 3)) == "events-3"


# --- to_json / from_json -------------------------------------------------------------------------


def test_to_json_is_sparks_checkpoint_form_sorted() -> None:
    offsets = {TP("b", 10): 1, TP("a", 2): 7, TP("b", 2): 0, TP("a", 0): 23}
    out = to_json(offsets)
    assert out == {"a": {"0": 23, "2": 7}, "b": {"2": 0, "10": 1}}
    # Sorted by partition number, not by its string: "2" before "10".
    assert json.dumps(out) == '{"a": {"0": 23, "2": 7}, "b": {"2": 0, "10": 1}}'


def test_from_json_reads_sparks_form() -> None:
    assert from_json({"a": {"0": 23, "1": -2}, "b": {"5": 7}}) == {
        TP("a", 0): 23,
        TP("a", 1): -2,
        TP("b", 5): 7,
    }
    assert from_json({}) == {}


@given(offset_maps)
def test_json_round_trip(offsets: PartitionOffsets) -> None:
    assert from_json(to_json(offsets)) == offsets
    # Through text too, as the checkpoint stores it.
    assert from_json(json.loads(json.dumps(to_json(offsets)))) == offsets


@given(offset_maps)
def test_equal_offsets_print_equally(offsets: PartitionOffsets) -> None:
    shuffled = dict(reversed(list(offsets.items())))
    assert json.dumps(to_json(shuffled)) == json.dumps(to_json(offsets))


# --- rate_limit ----------------------------------------------------------------------------------


@st.composite
def backlogs(draw: st.DrawFn) -> tuple[PartitionOffsets, PartitionOffsets]:
    """(start, latest) with start <= latest; some partitions only in latest (new ones)."""
    tps = draw(st.lists(topic_partitions, unique=True, max_size=10))
    start: PartitionOffsets = {}
    latest: PartitionOffsets = {}
    for tp in tps:
        begin = draw(st.integers(0, 10**12))
        latest[tp] = begin + draw(st.one_of(st.integers(0, 50), st.integers(0, 10**9)))
        if draw(st.integers(0, 5)) > 0:
            start[tp] = begin
    return start, latest


max_rows_values = st.one_of(st.integers(0, 60), st.integers(0, 10**10))


def _read(start: PartitionOffsets, end: PartitionOffsets) -> dict[TopicPartition, int]:
    return {tp: offset - start.get(tp, offset) for tp, offset in end.items()}


def _backlog(start: PartitionOffsets, latest: PartitionOffsets) -> int:
    return sum(end - start.get(tp, end) for tp, end in latest.items())


@given(backlogs(), max_rows_values)
def test_rate_limit_reads_at_most_max_rows(
    bounds: tuple[PartitionOffsets, PartitionOffsets], max_rows: int
) -> None:
    start, latest = bounds
    assert sum(_read(start, rate_limit(start, latest, max_rows)).values()) <= max_rows


@given(backlogs(), max_rows_values)
def test_rate_limit_ends_between_start_and_latest(
    bounds: tuple[PartitionOffsets, PartitionOffsets], max_rows: int
) -> None:
    start, latest = bounds
    end = rate_limit(start, latest, max_rows)
    assert set(end) == set(latest)
    for tp, offset in end.items():
        assert start.get(tp, latest[tp]) <= offset <= latest[tp]


@given(backlogs(), max_rows_values)
def test_rate_limit_reads_something_when_there_is_a_backlog(
    bounds: tuple[PartitionOffsets, PartitionOffsets], max_rows: int
) -> None:
    start, latest = bounds
    total = _backlog(start, latest)
    read = sum(_read(start, rate_limit(start, latest, max_rows)).values())
    if total > 0 and max_rows >= 1:
        assert read > 0
    # Stronger: the budget is used in full, up to the backlog.
    assert read == min(total, max_rows)


@given(backlogs(), max_rows_values)
def test_rate_limit_reads_everything_when_the_backlog_fits(
    bounds: tuple[PartitionOffsets, PartitionOffsets], max_rows: int
) -> None:
    start, latest = bounds
    if _backlog(start, latest) <= max_rows:
        assert rate_limit(start, latest, max_rows) == latest


@given(backlogs(), max_rows_values)
def test_rate_limit_is_deterministic_whatever_the_order(
    bounds: tuple[PartitionOffsets, PartitionOffsets], max_rows: int
) -> None:
    start, latest = bounds
    first = rate_limit(start, latest, max_rows)
    assert rate_limit(start, latest, max_rows) == first
    reordered = rate_limit(
        dict(reversed(list(start.items()))), dict(reversed(list(latest.items()))), max_rows
    )
    assert reordered == first


@given(backlogs(), max_rows_values)
def test_rate_limit_shares_by_backlog(
    bounds: tuple[PartitionOffsets, PartitionOffsets], max_rows: int
) -> None:
    """Each partition reads the floor or the ceiling of its exact share."""
    start, latest = bounds
    total = _backlog(start, latest)
    read = _read(start, rate_limit(start, latest, max_rows))
    for tp, count in read.items():
        size = latest[tp] - start.get(tp, latest[tp])
        if total <= max_rows:
            assert count == size
        else:
            assert size * max_rows // total <= count <= -(-size * max_rows // total)


def test_rate_limit_shares_in_proportion() -> None:
    start = {TP("a", 0): 0, TP("a", 1): 1000}
    latest = {TP("a", 0): 100, TP("a", 1): 1300}
    assert rate_limit(start, latest, 100) == {TP("a", 0): 25, TP("a", 1): 1075}


def test_rate_limit_no_limit_needed() -> None:
    start = {TP("a", 0): 5, TP("a", 1): 7}
    latest = {TP("a", 0): 8, TP("a", 1): 9}
    assert rate_limit(start, latest, 5) == latest
    assert rate_limit(start, latest, 10**9) == latest


def test_rate_limit_small_shares_do_not_round_up_past_the_limit() -> None:
    """Unlike Spark's source, a 1/11 share of one row is not rounded up to a row."""
    start = {TP("a", 0): 0, TP("a", 1): 0}
    latest = {TP("a", 0): 10, TP("a", 1): 1}
    assert rate_limit(start, latest, 1) == {TP("a", 0): 1, TP("a", 1): 0}


def test_rate_limit_leftover_rows_go_by_partition_order_on_equal_remainders() -> None:
    start = {TP("a", 2): 0, TP("a", 0): 0, TP("a", 1): 0}
    latest = {TP("a", 2): 1, TP("a", 0): 1, TP("a", 1): 1}
    assert rate_limit(start, latest, 2) == {TP("a", 0): 1, TP("a", 1): 1, TP("a", 2): 0}


def test_rate_limit_leftover_rows_go_to_the_larger_backlog_on_equal_remainders() -> None:
    # Backlogs 1, 8, 5 of 14 with 7 rows: shares 0.5, 4, 2.5; the one spare row goes to the
    # larger of the two halves (a-2), though a-0 comes first.
    start = {TP("a", 0): 0, TP("a", 1): 0, TP("a", 2): 0}
    latest = {TP("a", 0): 1, TP("a", 1): 8, TP("a", 2): 5}
    assert rate_limit(start, latest, 7) == {TP("a", 0): 0, TP("a", 1): 4, TP("a", 2): 3}


def test_rate_limit_largest_remainder_first() -> None:
    # Backlogs 3, 3, 4 of 10 with 5 rows: shares 1.5, 1.5, 2; floors 1, 1, 2, spare 1 to a-0.
    start = {TP("a", 0): 0, TP("a", 1): 0, TP("a", 2): 0}
    latest = {TP("a", 0): 3, TP("a", 1): 3, TP("a", 2): 4}
    assert rate_limit(start, latest, 5) == {TP("a", 0): 2, TP("a", 1): 1, TP("a", 2): 2}


def test_rate_limit_partition_missing_from_start_reads_nothing() -> None:
    start = {TP("a", 0): 0}
    latest = {TP("a", 0): 100, TP("a", 1): 50}
    assert rate_limit(start, latest, 10) == {TP("a", 0): 10, TP("a", 1): 50}
    assert rate_limit(start, latest, 1000) == latest


def test_rate_limit_zero_rows_reads_nothing() -> None:
    start = {TP("a", 0): 3}
    assert rate_limit(start, {TP("a", 0): 9}, 0) == start


def test_rate_limit_no_partitions() -> None:
    assert rate_limit({}, {}, 10) == {}


def test_rate_limit_truncated_partition_ends_at_latest_either_way() -> None:
    start = {TP("a", 0): 10, TP("a", 1): 0}
    assert rate_limit(start, {TP("a", 0): 5, TP("a", 1): 5}, 10) == {
        TP("a", 0): 5,
        TP("a", 1): 5,
    }
    assert rate_limit(start, {TP("a", 0): 5, TP("a", 1): 100}, 10) == {
        TP("a", 0): 5,
        TP("a", 1): 10,
    }


# --- split_ranges --------------------------------------------------------------------------------


@st.composite
def range_lists(draw: st.DrawFn) -> list[OffsetRange]:
    tps = draw(st.lists(topic_partitions, unique=True, max_size=10))
    out = []
    for tp in tps:
        start = draw(st.integers(0, 10**12))
        size = draw(st.one_of(st.integers(0, 40), st.integers(-3, 10**6)))
        out.append(OffsetRange(tp, start, start + size))
    return out


min_partitions_values = st.one_of(st.none(), st.integers(1, 60), st.integers(1, 10**4))


def _nonempty(ranges: list[OffsetRange]) -> list[OffsetRange]:
    return [r for r in ranges if r.size > 0]


def _pieces_of(pieces: list[OffsetRange], tp: TopicPartition) -> list[OffsetRange]:
    return [p for p in pieces if p.tp == tp]


@given(range_lists(), min_partitions_values)
def test_split_covers_exactly_the_ranges_contiguously(
    ranges: list[OffsetRange], min_partitions: int | None
) -> None:
    pieces = split_ranges(ranges, min_partitions)
    assert all(p.size > 0 for p in pieces)
    assert {p.tp for p in pieces} == {r.tp for r in _nonempty(ranges)}
    for r in _nonempty(ranges):
        mine = _pieces_of(pieces, r.tp)
        assert mine[0].start == r.start
        assert mine[-1].end == r.end
        for before, after in itertools.pairwise(mine):
            assert before.end == after.start
    # Tasks come in the ranges' order.
    assert [p.tp for p in pieces] == sorted(
        (p.tp for p in pieces), key=[r.tp for r in ranges].index
    )


@given(range_lists(), min_partitions_values)
def test_split_count_against_min_partitions(
    ranges: list[OffsetRange], min_partitions: int | None
) -> None:
    pieces = split_ranges(ranges, min_partitions)
    nonempty = _nonempty(ranges)
    if min_partitions is None or min_partitions <= len(nonempty):
        assert pieces == nonempty  # one task per range, as given
        return
    total = sum(r.size for r in nonempty)
    assert len(pieces) >= len(nonempty)
    if total <= min_partitions:
        assert len(pieces) == total  # one record per task: nothing left to cut
    else:
        # "Approximately min_partitions": each range is off its exact share by under one.
        assert min_partitions - len(nonempty) / 2 <= len(pieces) <= min_partitions + len(nonempty)
    for r in nonempty:
        sizes = [p.size for p in _pieces_of(pieces, r.tp)]
        assert max(sizes) - min(sizes) <= 1  # a range is cut evenly


def test_split_without_min_partitions_is_one_task_per_range_dropping_empty_ones() -> None:
    ranges = [
        OffsetRange(TP("a", 0), 0, 100),
        OffsetRange(TP("a", 1), 5, 5),
        OffsetRange(TP("a", 2), 9, 7),
        OffsetRange(TP("b", 0), 3, 4),
    ]
    expected = [ranges[0], ranges[3]]
    assert split_ranges(ranges, None) == expected
    assert split_ranges(ranges, 1) == expected
    assert split_ranges(ranges, 2) == expected
    assert split_ranges([], 5) == []


def test_split_one_range_into_min_partitions_even_pieces() -> None:
    pieces = split_ranges([OffsetRange(TP("a", 0), 10, 20)], 3)
    assert pieces == [
        OffsetRange(TP("a", 0), 10, 13),
        OffsetRange(TP("a", 0), 13, 16),
        OffsetRange(TP("a", 0), 16, 20),
    ]


def test_split_large_ranges_more_small_ones_at_least_once() -> None:
    ranges = [OffsetRange(TP("a", 0), 0, 900), OffsetRange(TP("a", 1), 0, 100)]
    pieces = split_ranges(ranges, 10)
    assert [p.tp.partition for p in pieces] == [0] * 9 + [1]
    ranges = [OffsetRange(TP("a", 0), 0, 1000), OffsetRange(TP("a", 1), 0, 1)]
    assert [p.tp.partition for p in split_ranges(ranges, 4)] == [0, 0, 0, 0, 1]


def test_split_never_cuts_below_one_record() -> None:
    pieces = split_ranges([OffsetRange(TP("a", 0), 0, 3)], 10)
    assert [(p.start, p.end) for p in pieces] == [(0, 1), (1, 2), (2, 3)]


def test_split_equal_ranges_into_exactly_min_partitions() -> None:
    ranges = [OffsetRange(TP("a", p), 0, 60) for p in range(4)]
    assert len(split_ranges(ranges, 12)) == 12


def test_split_half_shares_round_up_as_spark() -> None:
    ranges = [OffsetRange(TP("a", 0), 0, 5), OffsetRange(TP("a", 1), 0, 5)]
    assert len(split_ranges(ranges, 5)) == 6


def test_offset_range_size() -> None:
    assert OffsetRange(TP("a", 0), 5, 12).size == 7
    assert OffsetRange(TP("a", 0), 5, 5).size == 0
