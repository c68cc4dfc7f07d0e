"""Pure: one run's figures from raw measurements, medians and ranges over runs, the table with
the Highwater / best-peer ratio per row and each Highwater column's ratio to Kafka, and the
issue's goal checked against it."""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from client.cli.perf_tools import percentile

HIGHWATER = "Highwater"
KAFKA = "Kafka"


def is_highwater(system: str) -> bool:
    """Highwater with its own clients, or with another's ("Highwater (Kafka wire)")."""
    return system.startswith(HIGHWATER)


@dataclass(frozen=True)
class Row:
    key: str  # the figure's name in one run's dict
    label: str
    unit: str
    higher_is_better: bool


ROWS = (
    Row("produce", "produce", "rec/s", True),
    Row("consume", "consume", "rec/s", True),
    Row("p50", "end-to-end p50", "ms", False),
    Row("p99", "end-to-end p99", "ms", False),
    Row("p99.9", "end-to-end p99.9", "ms", False),
    Row("cpu", "server CPU (e2e)", "cores", False),
)


def latency_figures(latencies_ms: Sequence[float]) -> dict[str, float]:
    """p50, p99 and p99.9 (nearest rank, as Kafka's tools) of one run's latencies."""
    ordered = sorted(latencies_ms)
    return {
        name: percentile(ordered, f) for name, f in (("p50", 0.5), ("p99", 0.99), ("p99.9", 0.999))
    }


@dataclass(frozen=True)
class Spread:
    median: float
    low: float
    high: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        if not values:
            raise ValueError("no values")
        return cls(statistics.median(values), min(values), max(values))


def best_peer(row: Row, medians: Mapping[str, float]) -> tuple[str, float] | None:
    """The peer (not Highwater, whatever its client) with the best median on this row."""
    peers = [(name, value) for name, value in medians.items() if not is_highwater(name)]
    if not peers:
        return None
    pick = max if row.higher_is_better else min
    return pick(peers, key=lambda item: item[1])


def ratio(highwater: float, best: float) -> float | None:
    """Highwater / best peer; None when the peer's figure is 0 (no ratio to show)."""
    return highwater / best if best else None


def spreads(runs: Mapping[str, Sequence[Mapping[str, float]]]) -> dict[str, dict[str, Spread]]:
    """system -> row key -> median and range over that system's runs."""
    return {
        system: {row.key: Spread.of([r[row.key] for r in figures]) for row in ROWS}
        for system, figures in runs.items()
        if figures
    }


def _number(value: float, unit: str) -> str:
    if unit == "rec/s":
        return f"{value:,.0f}"
    if unit == "cores":
        return f"{value:.2f}"
    return f"{value:.1f}"


def cell(spread: Spread, unit: str, runs: int) -> str:
    text = _number(spread.median, unit)
    if runs > 1:
        text += f" ({_number(spread.low, unit)}-{_number(spread.high, unit)})"
    return text


def _quotient(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def render(runs: Mapping[str, Sequence[Mapping[str, float]]]) -> str:
    """The table: one row per figure, one column per system (median, range in brackets),
    Highwater / the best peer's median with that peer's name, and, with Kafka in the race,
    each Highwater column's median / Kafka's (the same clients for "Highwater (Kafka wire)")."""
    table = spreads(runs)
    systems = list(table)
    count = max((len(r) for r in runs.values()), default=0)
    against_kafka = [s for s in systems if is_highwater(s)] if KAFKA in systems else []
    header = ["", *systems, "Highwater / best peer", *(f"{s} / {KAFKA}" for s in against_kafka)]
    lines = [header]
    for row in ROWS:
        medians = {s: table[s][row.key].median for s in systems}
        best = best_peer(row, medians)
        quotient = ratio(medians[HIGHWATER], best[1]) if best and HIGHWATER in medians else None
        versus = f"{quotient:.2f} ({best[0]})" if quotient is not None and best else "-"
        cells = [cell(table[s][row.key], row.unit, len(runs[s])) for s in systems]
        kafka = [_quotient(ratio(medians[s], medians[KAFKA])) for s in against_kafka]
        lines.append([f"{row.label} ({row.unit})", *cells, versus, *kafka])
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = ["  ".join(c.ljust(w) for c, w in zip(line, widths, strict=True)) for line in lines]
    text.append(f"medians of {count} runs, ranges in brackets" if count > 1 else "one run")
    return "\n".join(t.rstrip() for t in text)


def goal(runs: Mapping[str, Sequence[Mapping[str, float]]]) -> dict[str, bool]:
    """Issue 23's goal: Highwater ahead of every peer on produce and consume throughput, and its
    end-to-end p99 no worse than the best peer's, on the medians and again on each system's
    best run ("p99 best run"). A machine stall in two of a peer's three runs makes its median
    p99 hundreds of milliseconds and the medians alone would call the goal met
    (docs/performance.md, "One full run"); a stall cannot improve a best run."""
    table = spreads(runs)
    verdict = {}
    for key in ("produce", "consume", "p99"):
        row = next(r for r in ROWS if r.key == key)
        medians = {s: table[s][key].median for s in table}
        verdict[key] = _no_worse(row, medians)
    p99 = next(r for r in ROWS if r.key == "p99")
    verdict["p99 best run"] = _no_worse(p99, {s: table[s]["p99"].low for s in table})
    return verdict


def _no_worse(row: Row, figures: Mapping[str, float]) -> bool:
    """Highwater's figure ahead of every peer's (rates) or no worse than the best (the rest)."""
    best = best_peer(row, figures)
    if best is None:
        return True
    mine = figures[HIGHWATER]
    return mine > best[1] if row.higher_is_better else mine <= best[1]
