"""The Spark anchor benchmark's figures and table (tests/benchmarks/spark_kafka_anchor.py): no
Spark, no clusters, so the arithmetic and the verdict are unit-tested on their own."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field

# The aim: format("highwater") reading Highwater at half the rate of Spark's own (JVM) Kafka
# source reading Apache Kafka, on the same machine with the same records.
AIM = 0.5


@dataclass
class Measure:
    """One query kind's timed runs: wall time from start() to termination, and Spark's
    triggerExecution time (the micro-batches, the query's start and stop left out)."""

    label: str
    wall_s: list[float] = field(default_factory=list)
    trigger_s: list[float] = field(default_factory=list)

    def rate(self, records: int) -> float:
        return records / statistics.median(self.wall_s)

    def trigger_rate(self, records: int) -> float:
        return records / statistics.median(self.trigger_s)


def render(
    measures: dict[str, Measure], records: int, *, anchor: str, ours: str, ceiling: str
) -> str:
    """One line a measure (median rate, the range of rates, the runs' times, and Spark's
    processedRowsPerSecond view), then the ratios to the anchor and the verdict."""
    width = max(len(m.label) for m in measures.values())
    lines = []
    for measure in measures.values():
        rates = [records / s for s in measure.wall_s]
        times = ", ".join(f"{s:.2f}" for s in measure.wall_s)
        lines.append(
            f"{measure.label:<{width}}  {measure.rate(records):>10,.0f} rec/s "
            f"(range {min(rates):,.0f}-{max(rates):,.0f}; {times} s); "
            f"rows/triggerExecution {measure.trigger_rate(records):,.0f} rec/s"
        )
    base = measures[anchor]
    for key, measure in measures.items():
        if key == anchor:
            continue
        by_trigger = measure.trigger_rate(records) / base.trigger_rate(records)
        lines.append(
            f"ratio {measure.label} / {base.label}: "
            f"{measure.rate(records) / base.rate(records):.2f} "
            f"(by triggerExecution {by_trigger:.2f})"
        )
    aimed = measures[ours].rate(records) / base.rate(records)
    verdict = "meets" if aimed >= AIM else "BELOW"
    lines.append(f"{measures[ours].label} / {base.label}: {aimed:.2f} ({verdict} the {AIM} aim)")
    share = measures[ours].rate(records) / measures[ceiling].rate(records)
    lines.append(f"{measures[ours].label} / {measures[ceiling].label}: {share:.2f}")
    return "\n".join(lines)
