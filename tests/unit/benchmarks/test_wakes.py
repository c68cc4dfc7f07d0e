"""tests/benchmarks/wakes.py's pure parts: request counts from /metrics, one broker's line."""

from __future__ import annotations

from tests.benchmarks.wakes import Sample, report_line, request_counts

METRICS = """# HELP highwater_network_requests_total Requests served, by API.
# TYPE highwater_network_requests_total counter
highwater_network_requests_total{request="Produce"} 120.0
highwater_network_requests_total{request="Fetch"} 3.6e+02
highwater_network_request_seconds_sum{request="Produce"} 0.5
"""


def test_request_counts_read_only_the_request_totals() -> None:
    assert request_counts(METRICS) == {"Produce": 120.0, "Fetch": 360.0}


def test_a_brokers_line_divides_its_cpu_by_its_wakes_and_its_wakes_by_the_produces() -> None:
    before = Sample(1.0, 0.5, 1_000, {"Produce": 100.0, "Fetch": 300.0})
    after = Sample(1.4, 0.6, 1_250, {"Produce": 200.0, "Fetch": 600.0})
    line = report_line(1, before, after, wall_s=2.0, produces=100.0)
    assert "0.250 cores (user 0.200, system 0.050)" in line
    assert "Produce 50/s, Fetch 150/s" in line
    assert "2.50 wakes per Produce" in line
    assert "2000 us of CPU per wake" in line  # 0.5 CPU-s over 250 wakes
