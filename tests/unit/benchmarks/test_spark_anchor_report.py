"""The Spark anchor benchmark's pure parts: rates from median times, the ratios to Spark's Kafka
source reading Kafka, and the verdict against the 0.5 aim."""

from __future__ import annotations

from tests.benchmarks.spark_anchor_report import AIM, Measure, render

RECORDS = 1_000_000


def measures(ours_s: list[float]) -> dict[str, Measure]:
    return {
        "kafka": Measure("kafka source", wall_s=[1.0, 2.0, 1.5], trigger_s=[0.5, 0.5, 0.4]),
        "ours": Measure("our source", wall_s=ours_s, trigger_s=[1.0, 1.0, 1.0]),
        "ceiling": Measure("no-I/O", wall_s=[2.0, 2.0, 2.0], trigger_s=[1.0, 1.0, 1.0]),
    }


def test_rates_are_records_over_the_median_times() -> None:
    measure = Measure("m", wall_s=[4.0, 1.0, 2.0], trigger_s=[0.5, 0.25, 8.0])
    assert measure.rate(RECORDS) == RECORDS / 2.0
    assert measure.trigger_rate(RECORDS) == RECORDS / 0.5


def test_the_table_gives_ratios_to_the_anchor_and_the_ceiling() -> None:
    text = render(
        measures([3.0, 4.0, 3.0]), RECORDS, anchor="kafka", ours="ours", ceiling="ceiling"
    )
    lines = text.splitlines()
    assert lines[0].startswith("kafka source")
    assert "666,667 rec/s (range 500,000-1,000,000; 1.00, 2.00, 1.50 s)" in lines[0]
    assert "rows/triggerExecution 2,000,000 rec/s" in lines[0]
    # 1.5 s / 3.0 s by wall time; 0.5 s / 1.0 s by triggerExecution.
    assert "ratio our source / kafka source: 0.50 (by triggerExecution 0.50)" in lines
    assert "ratio no-I/O / kafka source: 0.75 (by triggerExecution 0.50)" in lines
    assert f"our source / kafka source: 0.50 (meets the {AIM} aim)" in lines
    assert lines[-1] == "our source / no-I/O: 0.67"


def test_below_the_aim_is_said_so() -> None:
    text = render(
        measures([3.1, 3.1, 3.1]), RECORDS, anchor="kafka", ours="ours", ceiling="ceiling"
    )
    assert f"our source / kafka source: 0.48 (BELOW the {AIM} aim)" in text.splitlines()
