"""broker.core.status_history: the status page's last hour, and what a principal sees of it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from broker.core.status_history import StatusHistory, rates_per_s
from protocol.acl import ResourceType


def _snapshot(
    time_ms: int, leo_sums: Mapping[str, int | None], groups: dict[str, list[tuple[str, int, int]]],
    under: int = 0,
) -> dict[str, Any]:  # fmt: skip
    """`groups`: name -> [(topic, committed, lag)], one partition each."""
    return {
        "generated_ms": time_ms,
        "topics": [
            {
                "name": name,
                "log_end_offset_sum": leo,
                "partitions": [{"under_replicated": i < under, "offline": False} for i in range(2)],
            }
            for name, leo in leo_sums.items()
        ],
        "groups": [
            {
                "name": name,
                "partitions": [
                    {"topic": t, "partition": p, "committed": c, "lag": lag}
                    for p, (t, c, lag) in enumerate(rows)
                ],
            }
            for name, rows in groups.items()
        ],
    }


def test_rates_between_samples_with_gaps_and_resets() -> None:
    times = [0, 10_000, 20_000, 30_000, 40_000, 50_000]
    totals = [100, 600, None, 900, 50, 150]
    assert rates_per_s(times, totals) == [None, 50.0, None, None, None, 10.0]


def test_topic_rates_group_lag_and_under_replicated_over_samples() -> None:
    history = StatusHistory(interval_ms=10_000)
    history.record(_snapshot(0, {"orders": 0}, {"billing": [("orders", 0, 0)]}))
    history.record(_snapshot(10_000, {"orders": 1000}, {"billing": [("orders", 200, 800)]}, 1))
    history.record(_snapshot(20_000, {"orders": 3000}, {"billing": [("orders", 400, 2600)]}, 2))
    found = history.to_json()
    assert found["times_ms"] == [0, 10_000, 20_000]
    assert found["interval_ms"] == 10_000 and found["capacity"] == 360
    (topic,) = found["topics"]
    assert topic["records_in_per_s"] == [None, 100.0, 200.0]
    assert topic["records_out_per_s"] == [None, 20.0, 20.0]
    assert topic["under_replicated"] == [0, 1, 2]
    assert found["under_replicated"] == [0, 1, 2]
    assert found["groups"] == [{"name": "billing", "lag": [0, 800, 2600]}]


def test_only_what_the_principal_may_describe() -> None:
    history = StatusHistory()
    for n in range(2):
        history.record(
            _snapshot(
                n * 10_000,
                {"mine": n * 10, "payroll": n * 10},
                {
                    "my-app": [("mine", n, 1), ("payroll", n, 100)],
                    "payroll-app": [("payroll", n, 5)],
                },
                under=1,
            )
        )
    allowed = {(ResourceType.TOPIC, "mine"), (ResourceType.GROUP, "my-app")}
    seen = history.to_json(lambda kind, name: (kind, name) in allowed)
    assert [t["name"] for t in seen["topics"]] == ["mine"]
    # The group's lag over the visible topic only; the hidden group's commits not counted.
    assert seen["groups"] == [{"name": "my-app", "lag": [1, 1]}]
    assert seen["topics"][0]["records_out_per_s"] == [None, 0.1]
    # The total over the visible topic only.
    assert seen["under_replicated"] == [1, 1]
    everything = history.to_json()
    assert [t["name"] for t in everything["topics"]] == ["mine", "payroll"]
    assert everything["under_replicated"] == [2, 2]
    assert [g["lag"] for g in everything["groups"]] == [[101, 101], [5, 5]]


def test_an_unknown_total_is_a_gap() -> None:
    history = StatusHistory()
    history.record(_snapshot(0, {"t": 5}, {}))
    history.record(_snapshot(10_000, {"t": None}, {}))
    history.record(_snapshot(20_000, {"t": 25}, {}))
    assert history.to_json()["topics"][0]["records_in_per_s"] == [None, None, None]


def test_memory_of_100_topics_and_20_groups_for_an_hour() -> None:
    history = StatusHistory()
    for n in range(400):  # more than the window
        topics = {f"topic-{k}": n * 1000 for k in range(100)}
        groups = {f"group-{k}": [(f"topic-{k}", n * 900, 100)] for k in range(20)}
        history.record(_snapshot(n * 10_000, topics, groups))
    assert len(history.topics.times_ms()) == 360
    # Each (topic or group-topic) series: 360 samples x 2 values x 8 bytes = 5,760 bytes.
    assert history.memory_bytes() == 2 * 8 * 360 + (100 + 20) * 2 * 8 * 360
    assert history.memory_bytes() < 700_000


def test_a_new_sample_is_served_after_a_read() -> None:
    history = StatusHistory()
    history.record(_snapshot(0, {"t": 0}, {}))
    assert history.to_json()["times_ms"] == [0]
    history.record(_snapshot(10_000, {"t": 50}, {}))
    found = history.to_json()
    assert found["times_ms"] == [0, 10_000]
    assert found["topics"][0]["records_in_per_s"] == [None, 5.0]
