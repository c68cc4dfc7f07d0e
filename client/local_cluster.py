"""The local cluster behind `make up`: long-lived processes tracked by pid files in one directory.

Each process is a `ProcessSpec`; `up` starts the ones not already running, `down` stops them in
reverse order, `status` reports them. Today the cluster is ZooKeeper only: brokers arrive in a
later change, as more specs returned by `cluster_specs` (one per broker, each with its pid file).
"""

from __future__ import annotations

import enum
import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from client.zookeeper_server import (
    PortInUseError,
    ZooKeeperServer,
    four_letter_word,
    pid_alive,
    stop_pid,
)

__all__ = [
    "DEFAULT_DIR",
    "DEFAULT_ZK_PORT",
    "ClusterError",
    "Probe",
    "ProcessSpec",
    "ProcessState",
    "cluster_specs",
    "down",
    "probe",
    "status",
    "up",
]

DEFAULT_DIR = Path(".local-cluster")
DEFAULT_ZK_PORT = 2181
ZK_HOST = "127.0.0.1"
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
BROKERS_NOTE = "Brokers are not yet part of Highwater, so the launcher starts ZooKeeper only."

Echo = Callable[[str], None]


class ClusterError(RuntimeError):
    """The local cluster could not be brought up, down or inspected."""


class ProcessState(enum.Enum):
    RUNNING = "running"
    NOT_ANSWERING = "running but not answering"
    STOPPED = "stopped"
    STALE = "stopped (stale pid file)"


@dataclass(frozen=True)
class ProcessSpec:
    """One process the launcher owns, started detached and tracked by `<dir>/<name>.pid`."""

    name: str  # also names the pid file
    label: str  # for people: "ZooKeeper", later "broker 1"
    root: Path
    address: str
    # A command-line argument only our process has, so a recycled pid is never taken for ours.
    marker: str
    # Start detached, wait until it serves, return its pid (raise ClusterError on failure).
    start: Callable[[], int]
    answers: Callable[[], bool]

    @property
    def pid_file(self) -> Path:
        return self.root / f"{self.name}.pid"


@dataclass(frozen=True)
class Probe:
    state: ProcessState
    pid: int | None


def cluster_specs(
    root: Path, zk_port: int, start_timeout_s: float = START_TIMEOUT_S
) -> list[ProcessSpec]:
    """Everything `up` starts, in start order. Brokers will be appended here."""
    root = root.resolve()
    return [_zookeeper_spec(root, zk_port, start_timeout_s)]


# --- commands -------------------------------------------------------------------------------


def up(
    root: Path = DEFAULT_DIR,
    zk_port: int = DEFAULT_ZK_PORT,
    echo: Echo = print,
    timeout_s: float = START_TIMEOUT_S,
) -> None:
    """Start whatever is not already running; keep what is."""
    root = root.resolve()
    root.mkdir(parents=True, exist_ok=True)
    zk_port = _zk_port_for_up(root, zk_port, echo)
    for spec in cluster_specs(root, zk_port, timeout_s):
        pid = _ensure_running(spec, echo, timeout_s)
        echo(f"{spec.label} is up at {spec.address} (pid {pid})")
    echo(BROKERS_NOTE)
    echo(f"Pid files, data and logs are in {root}.")
    echo("Check it with `highwater cluster status`, stop it with `highwater cluster down`.")


def down(root: Path = DEFAULT_DIR, echo: Echo = print, timeout_s: float = STOP_TIMEOUT_S) -> None:
    """Stop everything `up` started (newest first) and remove the pid files."""
    root = root.resolve()
    for spec in reversed(cluster_specs(root, _recorded_zk_port(root) or DEFAULT_ZK_PORT)):
        _ensure_stopped(spec, echo, timeout_s)


def status(root: Path = DEFAULT_DIR, echo: Echo = print) -> bool:
    """Print each process, its pid and whether it answers; True if all are running."""
    root = root.resolve()
    healthy = True
    for spec in cluster_specs(root, _recorded_zk_port(root) or DEFAULT_ZK_PORT):
        result = probe(spec)
        healthy = healthy and result.state is ProcessState.RUNNING
        pid = "-" if result.pid is None else str(result.pid)
        echo(f"{spec.name}: {result.state.value}, pid {pid}, {spec.address}")
    echo("brokers: not yet part of Highwater")
    return healthy


def probe(spec: ProcessSpec) -> Probe:
    """What the pid file says, checked against the live process and its client port."""
    pid = _read_pid(spec.pid_file)
    if pid is None:
        return Probe(ProcessState.STOPPED, None)
    if not _is_ours(pid, spec.marker):
        return Probe(ProcessState.STALE, pid)
    if not spec.answers():
        return Probe(ProcessState.NOT_ANSWERING, pid)
    return Probe(ProcessState.RUNNING, pid)


# --- starting and stopping one process ---------------------------------------------------


def _ensure_running(spec: ProcessSpec, echo: Echo, timeout_s: float) -> int:
    current = probe(spec)
    if current.state is ProcessState.RUNNING:
        assert current.pid is not None
        echo(f"{spec.name} is already running (pid {current.pid}); keeping it")
        return current.pid
    if current.state is ProcessState.NOT_ANSWERING:
        assert current.pid is not None
        return _wait_answering(spec, current.pid, timeout_s)
    spec.pid_file.unlink(missing_ok=True)  # stale or absent
    pid = spec.start()
    _write_pid(spec.pid_file, pid)
    echo(f"started {spec.name} (pid {pid})")
    return pid


def _wait_answering(spec: ProcessSpec, pid: int, timeout_s: float) -> int:
    # Maybe a previous `up` is still starting it: give it the usual start time.
    deadline = time.monotonic() + timeout_s
    while not spec.answers():
        if time.monotonic() >= deadline or not pid_alive(pid):
            raise ClusterError(
                f"{spec.name} (pid {pid}) is running but does not answer on {spec.address}; "
                "run `highwater cluster down` and then `up` again"
            )
        time.sleep(0.2)
    return pid


def _ensure_stopped(spec: ProcessSpec, echo: Echo, timeout_s: float) -> None:
    current = probe(spec)
    if current.state is ProcessState.STOPPED:
        echo(f"{spec.name} is not running")
        return
    if current.state is ProcessState.STALE:
        echo(f"{spec.name} was not running (removed stale pid file)")
    else:
        assert current.pid is not None
        stop_pid(current.pid, timeout_s)
        echo(f"stopped {spec.name} (pid {current.pid})")
    spec.pid_file.unlink(missing_ok=True)


# --- ZooKeeper ------------------------------------------------------------------------------


def _zookeeper_spec(root: Path, port: int, start_timeout_s: float = START_TIMEOUT_S) -> ProcessSpec:
    server = ZooKeeperServer(root / "zookeeper", port, host=ZK_HOST)

    def start() -> int:
        try:
            server.start(start_timeout_s)
        except PortInUseError as exc:
            raise ClusterError(
                f"cannot start ZooKeeper: port {port} is already in use by another process; "
                f"stop that process or choose another port with --zk-port"
            ) from exc
        return server.detach()

    def answers() -> bool:
        try:
            return four_letter_word(ZK_HOST, port, "ruok", timeout_s=1.0) == "imok"
        except OSError:
            return False

    return ProcessSpec(
        name="zookeeper",
        label="ZooKeeper",
        root=root,
        address=server.connect_string,
        marker=str(server.config_path),
        start=start,
        answers=answers,
    )


def _zk_port_for_up(root: Path, requested: int, echo: Echo) -> int:
    """A ZooKeeper kept from an earlier `up` stays on its own port, whatever --zk-port says."""
    recorded = _recorded_zk_port(root)
    if recorded is None or recorded == requested:
        return requested
    state = probe(_zookeeper_spec(root, recorded)).state
    if state in (ProcessState.STOPPED, ProcessState.STALE):
        return requested
    echo(
        f"note: the ZooKeeper from an earlier `up` uses port {recorded}, not {requested}; "
        "run `highwater cluster down` first to change the port"
    )
    return recorded


def _recorded_zk_port(root: Path) -> int | None:
    """The client port in the zoo.cfg an earlier `up` wrote, if any."""
    try:
        text = (root / "zookeeper" / "zoo.cfg").read_text()
    except OSError:
        return None
    for line in text.splitlines():
        key, _, value = line.partition("=")
        if key.strip() == "clientPort" and value.strip().isdigit():
            return int(value.strip())
    return None


# --- pid files -----------------------------------------------------------------------------


def _read_pid(pid_file: Path) -> int | None:
    try:
        text = pid_file.read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def _write_pid(pid_file: Path, pid: int) -> None:
    # Write then rename, so a concurrent `status` never reads a half-written file.
    tmp = pid_file.with_suffix(".pid.tmp")
    tmp.write_text(f"{pid}\n")
    tmp.replace(pid_file)


def _is_ours(pid: int, marker: str) -> bool:
    if not pid_alive(pid):
        return False
    if not Path("/proc/self").exists():
        return True  # no /proc on this OS: trust the pid file
    try:
        cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:
        return False  # exited meanwhile
    return os.fsencode(marker) in cmdline
