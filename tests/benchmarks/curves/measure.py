"""What every curve reads off a process or a series: idle CPU over a window, RSS, how a
measure grows against its variable, and the text table."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.benchmarks.proc_cpu import total_cpu_seconds


def rss_mib(pid: int) -> float:
    """Resident set size of `pid` (VmRSS in /proc/<pid>/status), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise ValueError(f"no VmRSS for {pid}")


def idle_cpu_percent(pids: Sequence[int], window_s: float) -> float:
    """CPU the processes used together over window_s of wall time, in percent of one core."""
    started_cpu, started = total_cpu_seconds(pids), time.monotonic()
    time.sleep(window_s)  # a measurement window, not a synchronisation
    used = total_cpu_seconds(pids) - started_cpu
    return 100 * used / (time.monotonic() - started)


def wait_for(
    condition: Callable[[], bool], timeout_s: float, what: str, every_s: float = 0.1
) -> float:
    """Poll `condition` until it holds; seconds it took. TimeoutError after timeout_s."""
    started = time.monotonic()
    while not condition():
        if time.monotonic() - started > timeout_s:
            raise TimeoutError(f"{what}: not within {timeout_s:g} s")
        time.sleep(every_s)
    return time.monotonic() - started


@dataclass(frozen=True)
class Point:
    x: int
    values: tuple[float, ...]  # one per run

    @property
    def low(self) -> float:
        return min(self.values)

    @property
    def high(self) -> float:
        return max(self.values)

    @property
    def mid(self) -> float:
        """The median run (of two, their mean: not the higher one)."""
        return statistics.median(self.values)


def growth_exponent(points: Sequence[Point], floor: float = 0.0) -> float | None:
    """The exponent k in (y - floor) ~ x^k between the first and last points: about 1 for a
    linear curve, above 1 for a superlinear one, below for a sublinear one (a fixed cost
    dominating). None when it cannot be told (fewer than 2 points, or no growth above floor)."""
    import math

    if len(points) < 2:
        return None
    first, last = points[0], points[-1]
    low, high = first.mid - floor, last.mid - floor
    if low <= 0 or high <= 0 or last.x == first.x:
        return None
    return math.log(high / low) / math.log(last.x / first.x)


def format_value(value: float) -> str:
    return f"{value:.3g}" if abs(value) < 1000 else f"{value:.0f}"


def table(title: str, x_name: str, series: Mapping[str, Sequence[Point]], unit: str) -> str:
    """Markdown: a row per x, a column per series, each 'mid (low-high)' when runs differ."""
    xs = sorted({p.x for points in series.values() for p in points})
    header = f"| {x_name} | " + " | ".join(f"{name} ({unit})" for name in series) + " |"
    lines = [f"**{title}**", "", header, "|" + "---|" * (len(series) + 1)]
    for x in xs:
        cells = []
        for points in series.values():
            found = [p for p in points if p.x == x]
            if not found:
                cells.append("-")
                continue
            p = found[0]
            cell = format_value(p.mid)
            if p.low != p.high:
                cell += f" ({format_value(p.low)}-{format_value(p.high)})"
            cells.append(cell)
        lines.append(f"| {x} | " + " | ".join(cells) + " |")
    return "\n".join(lines)
