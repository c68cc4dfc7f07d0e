"""The goal table against Apache Kafka: which figure each goal divides by which, the bound and
its direction, met or missed on the medians, the floor's rate from the leader's counter."""

from __future__ import annotations

import pytest

from tests.benchmarks.peers import goals
from tests.benchmarks.peers.table import Spread


def highwater(produce: float, cpu: float, floor: float, build: float) -> dict[str, float]:
    return {
        "produce": produce,
        "consume": 200.0,
        "p50": 2.0,
        "p99": 5.0,
        "p99.9": 9.0,
        "cpu": cpu + 0.1,
        goals.BROKER_CPU: cpu,
        goals.ROUNDS_PER_S: 400.0,
        goals.LEADER_CPU: cpu / 2,
        goals.FLOOR_TRIO: floor,
        goals.FLOOR_TRIO_LEADER_US: floor * 1000,
        goals.FLOOR_PLAIN: floor / 2,
        goals.BUILD_ONLY: build,
        goals.E2E_RATE: 9_000.0,
    }


def kafka(produce: float, cpu: float) -> dict[str, float]:
    return {
        "produce": produce,
        "consume": 100.0,
        "p50": 2.0,
        "p99": 4.0,
        "p99.9": 9.5,
        "cpu": cpu + 0.1,
        goals.BROKER_CPU: cpu,
    }


RUNS = {
    "Highwater": [highwater(100.0, 0.9, 0.5, 150.0), highwater(120.0, 0.7, 0.4, 130.0)],
    "Kafka": [kafka(110.0, 0.8), kafka(90.0, 0.6)],
}


def by_label(runs: dict[str, list[dict[str, float]]]) -> dict[str, goals.GoalLine]:
    return {line.label: line for line in goals.lines(runs)}


def test_each_goal_on_the_medians() -> None:
    found = by_label(RUNS)
    produce = found["RF=3 acks=all produce, 100 B records"]
    assert produce.highwater == Spread(110.0, 100.0, 120.0)
    assert produce.kafka == produce.reference == Spread(100.0, 90.0, 110.0)
    assert produce.ratio_to_kafka == pytest.approx(1.1)
    assert produce.met is True
    assert found["consume"].met is True  # 200 against 100
    assert found["end-to-end p50 at 10,000 rec/s"].met is True  # equal is no worse
    assert found["end-to-end p99 at 10,000 rec/s"].met is False  # 5 against 4
    assert found["end-to-end p99.9 at 10,000 rec/s"].met is True  # 9 against 9.5


def test_cpu_is_against_the_trio_floor_with_kafka_beside_it() -> None:
    cpu = by_label(RUNS)["brokers' CPU at 10,000 rec/s"]
    assert cpu.highwater == Spread(0.8, 0.7, 0.9)  # the brokers, not "cpu" with ZooKeeper
    assert cpu.reference == Spread(0.45, 0.4, 0.5)
    assert cpu.kafka == Spread(0.7, 0.6, 0.8)
    assert cpu.ratio_to_reference == pytest.approx(0.8 / 0.45)
    assert cpu.met is False  # 1.78 times the floor, above 1.5
    assert cpu.goal_text == "Highwater / trio floor <= 1.5"
    cheaper = {"Highwater": [highwater(100.0, 0.6, 0.4, 150.0)], "Kafka": RUNS["Kafka"]}
    assert by_label(cheaper)["brokers' CPU at 10,000 rec/s"].met is True  # exactly 1.5


def test_build_only_row_divides_produce_by_the_ceiling() -> None:
    build = by_label(RUNS)["produce / build-only ceiling"]
    assert build.ratio_to_reference == pytest.approx(110.0 / 140.0)
    assert build.met is False  # 0.79 < 0.8
    assert build.kafka is None and build.ratio_to_kafka is None
    assert build.goal_text == "Highwater / build-only >= 0.8"
    fast = {"Highwater": [highwater(112.0, 0.6, 0.4, 140.0)]}
    assert by_label(fast)["produce / build-only ceiling"].met is True  # exactly 0.8


def test_without_kafka_its_goals_are_not_measured_and_the_rest_still_are() -> None:
    alone = by_label({"Highwater": RUNS["Highwater"]})
    assert alone["consume"].met is None
    assert alone["brokers' CPU at 10,000 rec/s"].met is False
    assert alone["brokers' CPU at 10,000 rec/s"].kafka is None


def test_rounds_per_s_from_the_leaders_counter() -> None:
    assert goals.rounds_per_s(1000.0, 9000.0, 20.0) == 400.0
    with pytest.raises(ValueError):
        goals.rounds_per_s(9000.0, 1000.0, 20.0)
    with pytest.raises(ValueError):
        goals.rounds_per_s(0.0, 10.0, 0.0)


def test_render_has_every_row_its_verdict_and_the_floor_detail() -> None:
    text = goals.render(RUNS)
    lines = text.splitlines()
    assert len(lines) == 1 + 7 + 4
    assert lines[1].split()[-1] == "met"  # produce
    assert lines[4].split()[-1] == "MISSED"  # p99
    assert "trio floor 0.45 (0.40-0.50)" in lines[6]
    assert "400 rounds/s" in lines[8] and "plain epoll 0.23 (0.20-0.25) cores" in lines[8]
    # the leader's 0.45 and 0.35 cores at 400 rounds/s; the floor's leader 500 and 400 µs
    assert lines[9].endswith(": Highwater 9,000 rec/s")  # Kafka's runs here have no pace
    assert lines[10] == (
        "the leader's CPU per round: 1,000 (875-1,125) µs, of which the trio floor's leader "
        "450 (400-500) µs"
    )


def test_leader_us_per_round() -> None:
    assert goals.leader_us_per_round(0.5, 400.0) == pytest.approx(1250.0)
    assert goals.leader_us_per_round(0.5, 0.0) == 0.0


def test_document_is_one_entry_per_line_with_the_verdict() -> None:
    entries = goals.document(RUNS)
    assert [e["met"] for e in entries] == [True, True, True, False, True, False, False]
    assert entries[0]["highwater"] == {"median": 110.0, "low": 100.0, "high": 120.0}
    assert entries[6]["kafka"] is None
