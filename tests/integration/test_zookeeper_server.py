"""A real ZooKeeper: the server wrapper, kazoo against it, and the `highwater dev` launcher."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from kazoo.client import KazooClient

from client.cli.zookeeper_server import (
    PortInUseError,
    ZooKeeperServer,
    free_port,
    pid_alive,
    port_accepts,
)

pytestmark = pytest.mark.integration

HOST = "127.0.0.1"


def wait_until(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() >= deadline:
            pytest.fail(f"timed out after {timeout_s}s waiting for {what}")
        time.sleep(0.05)


# --- the server wrapper -----------------------------------------------------------------------


def test_ruok_and_stat(zookeeper: ZooKeeperServer) -> None:
    assert zookeeper.four_letter_word("ruok") == "imok"
    stat = zookeeper.four_letter_word("stat")
    assert "Mode: standalone" in stat
    assert zookeeper.connect_string == f"{HOST}:{zookeeper.port}"


def test_kazoo_ephemeral_node_round_trip(zookeeper: ZooKeeperServer) -> None:
    path = "/highwater-test/ephemeral"
    owner = KazooClient(hosts=zookeeper.connect_string, timeout=5.0)
    owner.start(timeout=10)
    try:
        owner.create(path, b"hello", ephemeral=True, makepath=True)
        data, stat = owner.get(path)
        assert data == b"hello"
        assert stat.ephemeralOwner == owner.client_id[0]
    finally:
        owner.stop()
        owner.close()
    # Closing the session must delete its ephemeral node: proof it really was ephemeral.
    observer = KazooClient(hosts=zookeeper.connect_string, timeout=5.0)
    observer.start(timeout=10)
    try:
        assert observer.exists(path) is None
    finally:
        observer.stop()
        observer.close()


@pytest.mark.usefixtures("zookeeper_available")
def test_stop_closes_port_and_ends_process(tmp_path: Path) -> None:
    server = ZooKeeperServer(tmp_path, free_port())
    with server:
        pid = server.pid
        assert pid is not None and pid_alive(pid)
        assert server.is_running()
        assert port_accepts(HOST, server.port)
    assert not server.is_running()
    assert server.pid is None
    assert not pid_alive(pid)
    assert not port_accepts(HOST, server.port)
    assert "binding to port" in server.log_path.read_text()  # log4j config took effect


def test_start_on_port_of_another_zookeeper_fails_fast(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    # The other server answers `ruok` too: start() must not mistake it for its own.
    intruder = ZooKeeperServer(tmp_path, zookeeper.port)
    started = time.monotonic()
    with pytest.raises(PortInUseError, match=f"port {zookeeper.port} "):
        intruder.start(timeout_s=20)
    assert time.monotonic() - started < 5
    assert intruder.pid is None
    assert zookeeper.four_letter_word("ruok") == "imok"


@pytest.mark.usefixtures("zookeeper_available")
def test_start_on_port_held_by_plain_socket_fails_fast(tmp_path: Path) -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as holder:
        holder.bind((HOST, 0))
        holder.listen()
        port = holder.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(PortInUseError, match=f"port {port} "):
            ZooKeeperServer(tmp_path, port).start(timeout_s=20)
        assert time.monotonic() - started < 5


# --- the `highwater dev` launcher -------------------------------------------------------


def highwater_script() -> str:
    beside = Path(sys.executable).parent / "highwater"
    if beside.is_file():
        return str(beside)
    found = shutil.which("highwater")
    if found is None:
        pytest.fail("the `highwater` console script is not installed (pip install -e .)")
    return found


def highwater(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [highwater_script(), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def read_pid(pid_file: Path) -> int:
    return int(pid_file.read_text().strip())


def pids_mentioning(text: str) -> list[int]:
    """Live processes whose command line contains text (found via /proc, not pid files)."""
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            if text.encode() in cmdline.read_bytes():
                found.append(int(cmdline.parent.name))
        except OSError:
            continue  # exited while we looked
    return [pid for pid in found if pid_alive(pid)]


@pytest.fixture
def cluster_dir(tmp_path: Path, zookeeper_available: None) -> Iterator[Path]:
    """A launcher state directory; whatever the test leaves running is stopped afterwards."""
    root = tmp_path / "cluster"
    yield root
    highwater("dev", "down", "--dir", str(root), cwd=tmp_path)
    # Even if the launcher lost track of a JVM (a bug), don't leak it into later tests.
    for pid in pids_mentioning(str(root / "zookeeper" / "zoo.cfg")):
        os.kill(pid, signal.SIGKILL)


def test_cluster_up_status_up_down(cluster_dir: Path) -> None:
    port = free_port()
    cwd = cluster_dir.parent
    pid_file = cluster_dir / "zookeeper.pid"

    broker_port = free_port()
    up = ("dev", "up", "--dir", str(cluster_dir), "--zk-port", str(port))
    up += ("--brokers", "1", "--base-port", str(broker_port))
    first = highwater(*up, cwd=cwd)
    assert first.returncode == 0, first.stderr
    assert "started zookeeper" in first.stdout and f"{HOST}:{port}" in first.stdout
    assert "started broker-1" in first.stdout and "The cluster is ready" in first.stdout
    pid = read_pid(pid_file)
    assert pid_alive(pid)  # outlived the `up` command

    shown = highwater("dev", "status", "--dir", str(cluster_dir), cwd=cwd)
    assert shown.returncode == 0, shown.stdout + shown.stderr
    assert f"zookeeper: running, pid {pid}, {HOST}:{port}" in shown.stdout
    assert "broker-1: running" in shown.stdout

    again = highwater(*up, cwd=cwd)
    assert again.returncode == 0, again.stderr
    assert "already running" in again.stdout
    assert read_pid(pid_file) == pid

    stopped = highwater("dev", "down", "--dir", str(cluster_dir), cwd=cwd)
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped zookeeper (pid {pid})" in stopped.stdout
    assert "stopped broker-1" in stopped.stdout
    wait_until(lambda: not pid_alive(pid), 5, f"ZooKeeper pid {pid} to exit")
    assert not pid_file.exists()
    assert not port_accepts(HOST, port)

    after = highwater("dev", "status", "--dir", str(cluster_dir), cwd=cwd)
    assert after.returncode == 1
    assert "zookeeper: stopped" in after.stdout


def test_cluster_up_on_taken_port_fails_readably(
    zookeeper: ZooKeeperServer, cluster_dir: Path
) -> None:
    result = highwater(
        "dev",
        "up",
        "--dir",
        str(cluster_dir),
        "--zk-port",
        str(zookeeper.port),
        "--base-port",
        str(free_port()),
        cwd=cluster_dir.parent,
    )
    assert result.returncode != 0
    assert "Traceback" not in result.stderr
    assert f"port {zookeeper.port} is already in use" in result.stderr
    assert "--zk-port" in result.stderr
    assert not (cluster_dir / "zookeeper.pid").exists()


def test_cluster_down_never_kills_a_recycled_pid(cluster_dir: Path) -> None:
    # A pid file left by a crashed cluster may name a pid now used by an unrelated process.
    with subprocess.Popen(["sleep", "60"]) as bystander:
        try:
            cluster_dir.mkdir()
            (cluster_dir / "zookeeper.pid").write_text(f"{bystander.pid}\n")
            shown = highwater("dev", "status", "--dir", str(cluster_dir), cwd=cluster_dir)
            assert "zookeeper: stopped (stale pid file)" in shown.stdout
            stopped = highwater("dev", "down", "--dir", str(cluster_dir), cwd=cluster_dir)
            assert stopped.returncode == 0, stopped.stderr
            assert bystander.poll() is None
            assert not (cluster_dir / "zookeeper.pid").exists()
        finally:
            bystander.kill()
