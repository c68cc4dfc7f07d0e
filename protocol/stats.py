"""Plain figures the broker keeps as it works, for the metrics endpoint to read at scrape time.

No prometheus objects here: cores, the log engine and the controller's steps keep integers
and `Timings` (a fixed-bucket histogram: one bisect and three additions per observation), and
broker/metrics.py turns them into Prometheus families when scraped. Importable from anywhere
(the simulator's cores, broker.log, controller.leading): standard library only.
"""

from __future__ import annotations

import math
from bisect import bisect_left
from typing import Final

__all__ = ["LATENCY_BUCKETS_S", "Timings"]

# Seconds; the upper bounds of the buckets (a last, +Inf bucket follows). From 50 us (a
# Metadata answer) to 60 s (a long-polling fetch or a slow ZooKeeper write).
LATENCY_BUCKETS_S: Final = (
    0.00005,
    0.0001,
    0.00025,
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
    30.0,
    60.0,
)


class Timings:
    """Durations in seconds, counted into fixed buckets (not cumulative: `cumulative()` is)."""

    __slots__ = ("bounds", "counts", "sum")

    def __init__(self, bounds: tuple[float, ...] = LATENCY_BUCKETS_S) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)
        self.sum = 0.0

    def observe(self, seconds: float) -> None:
        self.counts[bisect_left(self.bounds, seconds)] += 1
        self.sum += seconds

    @property
    def count(self) -> int:
        return sum(self.counts)

    def cumulative(self) -> list[tuple[float, int]]:
        """Prometheus' (le, count of observations <= le) pairs, infinity last."""
        out = []
        running = 0
        for bound, count in zip((*self.bounds, math.inf), self.counts, strict=True):
            running += count
            out.append((bound, running))
        return out
