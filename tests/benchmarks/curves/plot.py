"""A PNG per curve (matplotlib, no display): a line per series through the middle run, a
bar from the lowest to the highest run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path

from tests.benchmarks.curves.measure import Point


def draw(
    path: Path,
    title: str,
    x_label: str,
    y_label: str,
    series: Mapping[str, Sequence[Point]],
    *,
    log_x: bool = True,
) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, axes = plt.subplots(figsize=(6, 4), dpi=100)
    for name, points in series.items():
        if not points:
            continue
        xs = [p.x for p in points]
        mids = [p.mid for p in points]
        errors = [[p.mid - p.low for p in points], [p.high - p.mid for p in points]]
        axes.errorbar(xs, mids, yerr=errors, marker="o", capsize=3, label=name)
    if log_x:
        axes.set_xscale("log")
    axes.set_title(title)
    axes.set_xlabel(x_label)
    axes.set_ylabel(y_label)
    axes.set_ylim(bottom=0)
    axes.grid(True, alpha=0.3)
    axes.legend()
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path)
    plt.close(figure)
