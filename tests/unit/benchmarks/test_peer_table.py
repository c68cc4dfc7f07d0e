"""The peer benchmark's pure parts: percentiles of one run, medians and ranges over runs, the
Highwater / best-peer ratio (best = highest rate, lowest latency or CPU), the goal verdict."""

from __future__ import annotations

import pytest

from tests.benchmarks.peers import table


def run(
    produce: float, consume: float, p50: float, p99: float, cpu: float = 0.5
) -> dict[str, float]:
    return {
        "produce": produce,
        "consume": consume,
        "p50": p50,
        "p99": p99,
        "p99.9": p99 * 2,
        "cpu": cpu,
    }


def test_latency_figures_are_nearest_rank_percentiles_of_unsorted_input() -> None:
    latencies = [float(v) for v in range(1000, 0, -1)]  # 1..1000 ms, reversed
    assert table.latency_figures(latencies) == {"p50": 500.0, "p99": 990.0, "p99.9": 999.0}


def test_latency_figures_of_few_values_take_the_largest_for_the_tail() -> None:
    assert table.latency_figures([3.0, 1.0, 2.0]) == {"p50": 2.0, "p99": 3.0, "p99.9": 3.0}
    assert table.latency_figures([]) == {"p50": 0.0, "p99": 0.0, "p99.9": 0.0}


def test_spread_is_median_and_range() -> None:
    assert table.Spread.of([3.0, 1.0, 10.0]) == table.Spread(3.0, 1.0, 10.0)
    assert table.Spread.of([1.0, 2.0]) == table.Spread(1.5, 1.0, 2.0)
    with pytest.raises(ValueError):
        table.Spread.of([])


def test_best_peer_is_the_fastest_for_rates_and_the_lowest_for_latency() -> None:
    produce = next(r for r in table.ROWS if r.key == "produce")
    p99 = next(r for r in table.ROWS if r.key == "p99")
    medians = {"Highwater": 5.0, "A": 3.0, "B": 4.0}
    assert table.best_peer(produce, medians) == ("B", 4.0)
    assert table.best_peer(p99, medians) == ("A", 3.0)
    assert table.best_peer(p99, {"Highwater": 1.0}) is None


def test_ratio_is_highwater_over_the_peer_and_none_without_a_peer_figure() -> None:
    assert table.ratio(150.0, 100.0) == pytest.approx(1.5)
    assert table.ratio(1.0, 0.0) is None


def test_render_shows_medians_ranges_and_the_ratio_against_the_best_peer() -> None:
    runs = {
        "Highwater": [
            run(100_000, 400_000, 2.0, 9.0),
            run(120_000, 380_000, 3.0, 11.0),
            run(110_000, 390_000, 2.5, 10.0),
        ],
        "NATS": [run(30_000, 150_000, 2.0, 8.0)] * 3,
        "Redis": [run(55_000, 200_000, 1.0, 20.0)] * 3,
    }
    text = table.render(runs)
    lines = text.splitlines()
    assert lines[0].split() == ["Highwater", "NATS", "Redis", "Highwater", "/", "best", "peer"]
    produce = next(line for line in lines if line.startswith("produce"))
    assert "110,000 (100,000-120,000)" in produce
    assert produce.endswith("2.00 (Redis)")  # 110k / 55k, the faster peer
    p99 = next(line for line in lines if line.startswith("end-to-end p99 "))
    assert p99.endswith("1.25 (NATS)")  # 10 ms / 8 ms, the lower peer
    assert lines[-1] == "medians of 3 runs, ranges in brackets"


def test_a_single_run_has_no_ranges() -> None:
    text = table.render({"Highwater": [run(1, 2, 3, 4)], "Redis": [run(1, 1, 1, 1)]})
    produce = text.splitlines()[1].removeprefix("produce (rec/s)")
    assert produce.split() == ["1", "1", "1.00", "(Redis)"]  # no range beside a median
    assert text.splitlines()[-1] == "one run"


def test_goal_needs_more_throughput_than_every_peer_and_p99_no_worse_than_the_best() -> None:
    peers = {"NATS": [run(30_000, 150_000, 2.0, 8.0)], "Redis": [run(55_000, 200_000, 1.0, 20.0)]}
    ahead = {"Highwater": [run(60_000, 300_000, 3.0, 8.0)], **peers}
    assert table.goal(ahead) == {
        "produce": True,
        "consume": True,
        "p99": True,
        "p99 best run": True,
    }
    behind = {"Highwater": [run(55_000, 300_000, 3.0, 8.5)], **peers}
    assert table.goal(behind) == {
        "produce": False,
        "consume": True,
        "p99": False,
        "p99 best run": False,
    }


def test_a_peer_whose_runs_stalled_still_wins_on_its_best_run() -> None:
    # Two of Redis's three runs stalled (p99 near 300 ms): its median p99 is behind
    # Highwater's, its clean run is ahead, and the goal is not met.
    stalled = [run(40_000, 130_000, 1.8, 298.0), run(40_000, 130_000, 1.6, 8.8)]
    runs = {
        "Highwater": [run(130_000, 230_000, 6.3, p99) for p99 in (14.4, 17.0, 58.5)],
        "Redis": [*stalled, run(37_000, 129_000, 1.9, 372.0)],
    }
    verdict = table.goal(runs)
    assert verdict["p99"] is True  # the medians: 17.0 against 298.0
    assert verdict["p99 best run"] is False  # the best runs: 14.4 against 8.8


def test_with_kafka_each_highwater_column_has_its_ratio_to_kafka() -> None:
    runs = {
        "Highwater": [run(200_000, 400_000, 2.0, 9.0)],
        "Highwater (Kafka wire)": [run(50_000, 300_000, 3.0, 12.0)],
        "Kafka": [run(100_000, 200_000, 4.0, 6.0)],
        "Redis": [run(80_000, 100_000, 1.0, 3.0)],
    }
    lines = table.render(runs).splitlines()
    assert lines[0].endswith(
        "Highwater / best peer  Highwater / Kafka  Highwater (Kafka wire) / Kafka"
    )
    produce = next(line for line in lines if line.startswith("produce"))
    assert produce.split()[-4:] == ["2.00", "(Kafka)", "2.00", "0.50"]
    p99 = next(line for line in lines if line.startswith("end-to-end p99 "))
    assert p99.split()[-4:] == ["3.00", "(Redis)", "1.50", "2.00"]  # 9/3; 9/6 and 12/6
    # Each row has both ratios.
    assert all(len(line.split()) >= 4 for line in lines[1:-1])


def test_highwater_through_another_client_is_no_peer() -> None:
    produce = next(r for r in table.ROWS if r.key == "produce")
    medians = {"Highwater": 1.0, "Highwater (Kafka wire)": 9.0, "Kafka": 2.0}
    assert table.best_peer(produce, medians) == ("Kafka", 2.0)
    runs = {
        "Highwater": [run(3.0, 3.0, 1.0, 1.0)],
        "Highwater (Kafka wire)": [run(1.0, 1.0, 9.0, 9.0)],
        "Kafka": [run(2.0, 2.0, 2.0, 2.0)],
    }
    assert all(table.goal(runs).values())


def test_without_kafka_there_is_no_kafka_column() -> None:
    text = table.render({"Highwater": [run(1, 2, 3, 4)], "Redis": [run(1, 1, 1, 1)]})
    assert "/ Kafka" not in text.splitlines()[0]
