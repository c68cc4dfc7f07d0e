"""The processes the local cluster launcher owns: each started detached, tracked by a pid file
(`<dir>/<name>.pid`) and recognised by a marker in its command line, so that a recycled pid
is never taken for ours. client/cli/local_cluster.py decides what to run; this module starts,
probes and stops it.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import assert_never

from client.cli.zookeeper_server import pid_alive, stop_pid

__all__ = [
    "LOG_TAIL_LINES",
    "Probe",
    "ProcessSpec",
    "ProcessState",
    "ensure_started",
    "ensure_stopped",
    "is_ours",
    "log_tail",
    "probe",
    "read_pid",
    "write_pid",
]

LOG_TAIL_LINES = 20  # of a process's log, shown when it exits while starting

Echo = Callable[[str], None]


class ProcessState(enum.Enum):
    RUNNING = "running"
    NOT_ANSWERING = "running but not answering"
    STOPPED = "stopped"
    STALE = "stopped (stale pid file)"


@dataclass(frozen=True)
class ProcessSpec:
    """One process the launcher owns, started detached and tracked by `<dir>/<name>.pid`."""

    name: str  # also names the pid file
    label: str  # for people: "ZooKeeper", "broker 1"
    root: Path
    address: str
    # A command-line argument only our process has, so a recycled pid is never taken for ours.
    marker: str
    # Start detached and return its pid (raise ClusterError on failure). ZooKeeper's start
    # also waits until it serves; a broker's returns at once and `up` waits for all together.
    start: Callable[[], int]
    answers: Callable[[], bool]
    log_path: Path | None = None

    @property
    def pid_file(self) -> Path:
        return self.root / f"{self.name}.pid"


@dataclass(frozen=True)
class Probe:
    state: ProcessState
    pid: int | None


def probe(spec: ProcessSpec) -> Probe:
    """What the pid file says, checked against the live process and its client port."""
    pid = read_pid(spec.pid_file)
    if pid is None:
        return Probe(ProcessState.STOPPED, None)
    if not is_ours(pid, spec.marker):
        return Probe(ProcessState.STALE, pid)
    if not spec.answers():
        return Probe(ProcessState.NOT_ANSWERING, pid)
    return Probe(ProcessState.RUNNING, pid)


def ensure_started(spec: ProcessSpec, echo: Echo) -> None:
    """Start `spec` unless it runs already (a stale pid file is replaced)."""
    current = probe(spec)
    if current.state in (ProcessState.RUNNING, ProcessState.NOT_ANSWERING):
        echo(f"{spec.name} is already running (pid {current.pid}); keeping it")
        return
    spec.pid_file.unlink(missing_ok=True)  # stale or absent
    pid = spec.start()
    write_pid(spec.pid_file, pid)
    echo(f"started {spec.name} (pid {pid}) on {spec.address}")


def ensure_stopped(spec: ProcessSpec, echo: Echo, timeout_s: float) -> None:
    """Stop `spec` if it runs (SIGTERM, then SIGKILL after timeout_s); remove its pid file."""
    current = probe(spec)
    match current.state:
        case ProcessState.STOPPED:
            echo(f"{spec.name} is not running")
            return
        case ProcessState.STALE:
            echo(f"{spec.name} was not running (removed stale pid file)")
        case ProcessState.RUNNING | ProcessState.NOT_ANSWERING:
            assert current.pid is not None
            stop_pid(current.pid, timeout_s)
            echo(f"stopped {spec.name} (pid {current.pid})")
        case _:
            assert_never(current.state)
    spec.pid_file.unlink(missing_ok=True)


def read_pid(pid_file: Path) -> int | None:
    try:
        text = pid_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def write_pid(pid_file: Path, pid: int) -> None:
    # Write then rename, so a concurrent `status` never reads a half-written file.
    tmp = pid_file.with_suffix(".pid.tmp")
    tmp.write_text(f"{pid}\n")
    tmp.replace(pid_file)


def is_ours(pid: int, marker: str) -> bool:
    if not pid_alive(pid):
        return False
    if not Path("/proc/self").exists():
        return True  # no /proc on this OS: trust the pid file
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False  # exited meanwhile
    return os.fsencode(marker) in cmdline


def log_tail(path: Path | None, lines: int = LOG_TAIL_LINES) -> str:
    if path is None:
        return ""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return ""
    return "\n".join(text.splitlines()[-lines:])
