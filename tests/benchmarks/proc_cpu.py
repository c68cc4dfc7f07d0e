"""CPU time of processes, read from /proc (utime + stime), for the benchmarks' CPU figures."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

_TICKS_PER_S = os.sysconf("SC_CLK_TCK")


def user_system_seconds(pid: int) -> tuple[float, float]:
    """User and system CPU seconds `pid` has used so far (its threads included)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat.rsplit(")", 1)[1].split()  # the command name may hold spaces
    return int(fields[11]) / _TICKS_PER_S, int(fields[12]) / _TICKS_PER_S


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds `pid` has used so far (its threads included)."""
    return sum(user_system_seconds(pid))


def total_cpu_seconds(pids: Sequence[int]) -> float:
    return sum(cpu_seconds(pid) for pid in pids)


def cluster_pids(cluster_dir: Path) -> dict[str, int]:
    """The pids `highwater dev up` wrote: broker-N and zookeeper."""
    return {
        path.stem: int(path.read_text().strip())
        for path in sorted(cluster_dir.glob("*.pid"))
        if path.read_text().strip().isdigit()
    }


def broker_pids(cluster_dir: Path) -> dict[int, int]:
    """broker id -> pid of a `highwater dev up` cluster."""
    return {
        int(name.removeprefix("broker-")): pid
        for name, pid in cluster_pids(cluster_dir).items()
        if name.startswith("broker-")
    }


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.1f} {five:.1f} {fifteen:.1f} on {os.cpu_count()} cores"
