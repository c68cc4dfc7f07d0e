"""A broker process starting without what it needs: ZooKeeper away for a while (it waits and
connects), or a condition it cannot get past (it exits 1 with one JSON error line on stdout and
nothing on stderr: no traceback). Config file errors: tests/unit/cli/test_commands.py."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer, free_port
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import logged_events, wait_whole

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ZOOKEEPER_AWAY_S = 15
# kazoo's uncapped reconnect delay (0.1 s doubling, with jitter) tries at about 12.7 s and then
# only at about 25 s: with this connection timeout a broker that waits only so would give up
# before ZooKeeper (back at ~16 s) is tried again. Capped at 1 s, it connects by ~18 s.
CONNECTION_TIMEOUT_MS = 22_000


def test_a_broker_started_while_zookeeper_is_away_connects_when_it_is_back(
    zookeeper_available: None, tmp_path: Path
) -> None:
    zookeeper = ZooKeeperServer(tmp_path / "zookeeper", free_port())  # not started yet
    cluster = Cluster(
        zookeeper.port,
        tmp_path / "cluster",
        1,
        {"zookeeper.connection.timeout.ms": str(CONNECTION_TIMEOUT_MS)},
    )
    (broker,) = cluster.brokers.values()
    broker.start()
    try:
        away_until = time.monotonic() + ZOOKEEPER_AWAY_S
        while time.monotonic() < away_until:  # the outage itself: the broker must keep waiting
            assert broker.running, f"the broker gave up on ZooKeeper:\n{broker.log_text()}"
            time.sleep(0.2)
        zookeeper.start()
        trio.run(wait_whole, cluster, 30)
        assert broker.running
        assert not logged_events(broker, "broker could not start")
        assert broker.stop() == 0
    except BaseException:
        print(broker.log_text()[-20_000:])
        raise
    finally:
        broker.kill()
        zookeeper.stop()


@pytest.fixture
def taken_port() -> Iterator[int]:
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen()
        yield listener.getsockname()[1]


def _broker(tmp_path: Path, zookeeper_connect: str, **overrides: str) -> dict[str, str]:
    return {
        "broker.id": "7",
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "zookeeper.connect": zookeeper_connect,
        "zookeeper.connection.timeout.ms": "2000",
        "log.dirs": str(tmp_path / "data"),
        **overrides,
    }


def _run_broker(settings: dict[str, str]) -> subprocess.CompletedProcess[str]:
    args = [arg for key, value in settings.items() for arg in ("--override", f"{key}={value}")]
    env = {k: v for k, v in os.environ.items() if k != "HIGHWATER_DEBUG"}
    return subprocess.run(
        [sys.executable, "-m", "client.cli", "broker", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )


def _json_lines(stdout: str) -> list[dict[str, Any]]:
    lines = [json.loads(line) for line in stdout.splitlines()]  # fails on any non-JSON line
    assert all(line.get("broker_id") == 7 for line in lines), "every line names the broker"
    return lines


def test_zookeeper_unreachable_is_one_json_error_line_and_exit_1(tmp_path: Path) -> None:
    result = _run_broker(_broker(tmp_path, f"127.0.0.1:{free_port()}/highwater"))
    assert result.returncode == 1
    assert result.stderr == ""
    lines = _json_lines(result.stdout)
    (error,) = [line for line in lines if line["level"] == "error"]
    assert error["event"] == "broker could not start"
    assert error["error"].startswith("cannot create chroot /highwater on 127.0.0.1:")
    assert "within 2000 ms" in error["error"]
    assert any(line.get("logger") == "kazoo.client" for line in lines)  # with broker_id


def test_expected_start_failures_are_one_json_error_line_and_exit_1(
    zookeeper: ZooKeeperServer, tmp_path: Path, taken_port: int
) -> None:
    not_a_dir = tmp_path / "a-file"
    not_a_dir.write_text("")
    chroot = f"{zookeeper.connect_string}/startup-errors"
    cases = {
        "cannot listen on 127.0.0.1:": {"listeners": f"PLAINTEXT://127.0.0.1:{taken_port}"},
        "cannot open the log dirs: ": {"log.dirs": str(not_a_dir / "data")},
    }
    for expected, overrides in cases.items():
        result = _run_broker(_broker(tmp_path, chroot, **overrides))
        assert result.returncode == 1, expected
        assert result.stderr == "", expected
        (error,) = [line for line in _json_lines(result.stdout) if line["level"] == "error"]
        assert error["event"] == "broker could not start"
        assert error["error"].startswith(expected), error
    # The failed start closed the logs cleanly: the next start recovers nothing.
    result = _run_broker(_broker(tmp_path, chroot, listeners=f"PLAINTEXT://127.0.0.1:{taken_port}"))
    (loaded,) = [line for line in _json_lines(result.stdout) if line["event"] == "log dir loaded"]
    assert loaded["clean_shutdown"] is True
