"""`perf produce`'s closing lines: the build-only yardstick, and its ratio only when the rate
was not capped by --throughput."""

from __future__ import annotations

from array import array
from typing import Any

import pytest

from client.cli import perf_tools
from tests.unit.cli.fakes import run


@pytest.fixture
def measured(monkeypatch: pytest.MonkeyPatch) -> None:
    """1000 records in 0.5 s (2000 records/s) against a build-only rate of 4000/s."""

    async def produced(bootstrap: str, topic: str, **options: Any) -> perf_tools.ProduceResult:
        return perf_tools.ProduceResult(1000, 0, 0.5, 100_000, array("d", [1.0] * 1000))

    monkeypatch.setattr(perf_tools, "run_produce_perf", produced)
    monkeypatch.setattr(perf_tools, "build_only_rate", lambda *args: 4000.0)


def test_the_ratio_is_printed_when_the_rate_is_not_capped(measured: None) -> None:
    result = run(["perf", "produce", "t", "--num-records", "1000"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-2:] == [
        "build only (same process, same batches): 4000.0 records/sec",
        "end-to-end / build-only ratio: 0.50",
    ]


def test_no_ratio_under_throughput(measured: None) -> None:
    result = run(["perf", "produce", "t", "--num-records", "1000", "--throughput", "2000"])
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[-1] == (
        "end-to-end / build-only ratio: not meaningful under --throughput (the rate was capped)"
    )
