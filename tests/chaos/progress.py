"""A long run's periodic checks: every so often, the checks that need no final read
(checker.interim_check) over the history so far, and a progress line on stderr (faults,
overlaps, records acked, the run's disk use). Anomalies found are kept for the summary."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path

import trio

from tests.chaos.checker import interim_check
from tests.chaos.group_workload import GroupHistory
from tests.chaos.nemesis import Nemesis
from tests.chaos.workload import History

__all__ = ["Progress"]


def _disk_mb(directory: Path) -> float:
    return sum(p.stat().st_size for p in directory.rglob("*") if p.is_file()) / 1e6


@dataclass
class Progress:
    every_s: float
    directory: Path
    checks: int = 0
    problems: list[str] = field(default_factory=list)
    peak_disk_mb: float = 0.0

    async def run(self, nemesis: Nemesis, history: History, group: GroupHistory) -> None:
        """Until cancelled."""
        began_s = trio.current_time()
        while True:
            await trio.sleep(self.every_s)
            sends, polls = list(history.sends), list(history.polls)
            # In a thread: over an hour's history it takes seconds the workload needs.
            report = await trio.to_thread.run_sync(interim_check, sends, polls)
            disk_mb = await trio.to_thread.run_sync(_disk_mb, self.directory)
            self.peak_disk_mb = max(self.peak_disk_mb, disk_mb)
            self.checks += 1
            minutes = (trio.current_time() - began_s) / 60
            anomalies = sum(report.counts.values())
            print(
                f"[{minutes:5.1f} min] faults {sum(nemesis.faults.values())} "
                f"({nemesis.ledger.overlapping} overlapping) in {nemesis.steps} steps, "
                f"{nemesis.unhealed} not whole in time; acked {report.acked}, "
                f"polled {report.polled}, group processed {len(group.processed)}; "
                f"disk {disk_mb:.0f} MB; check {self.checks}: {anomalies} anomalies",
                file=sys.stderr,
                flush=True,
            )
            if not report.ok:
                self.problems.append(f"check {self.checks} at {minutes:.1f} min:\n{report.table()}")
