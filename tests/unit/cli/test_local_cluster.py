"""The local cluster's layout and generated broker configs (no processes started)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest

from broker.config.broker_config import load_config
from client.cli import local_cluster
from client.cli.local_cluster import ClusterError, ClusterLayout, broker_command, broker_properties
from client.cli.zookeeper_server import free_port


def test_ports_and_bootstrap_are_consecutive(tmp_path: Path) -> None:
    layout = ClusterLayout(tmp_path, brokers=3, base_port=9092, zk_port=2181)
    assert [layout.broker_port(b) for b in layout.broker_ids()] == [9092, 9093, 9094]
    assert layout.bootstrap == "127.0.0.1:9092,127.0.0.1:9093,127.0.0.1:9094"
    assert layout.config_path(2) == tmp_path / "broker-2" / "server.properties"
    assert layout.log_path(2) == tmp_path / "broker-2" / "broker.log"


def test_broker_properties_load_with_the_broker_config(tmp_path: Path) -> None:
    layout = ClusterLayout(tmp_path, brokers=3, base_port=19092, zk_port=12181)
    path = tmp_path / "server.properties"
    path.write_text(broker_properties(layout, 2))
    config = load_config(path)
    assert config.broker_id == 2
    assert (config.listener_host, config.listener_port) == ("127.0.0.1", 19093)
    assert (config.advertised_host, config.advertised_port) == ("127.0.0.1", 19093)
    assert config.zookeeper_connect == "127.0.0.1:12181"
    assert config.log_dirs == (tmp_path / "broker-2" / "data",)


def test_broker_command_runs_this_interpreters_cli(tmp_path: Path) -> None:
    command = broker_command(tmp_path / "server.properties")
    assert command[1:] == [
        "-m", "client.cli", "broker", "--config", str(tmp_path / "server.properties"),
    ]  # fmt: skip


def test_layout_is_saved_and_read_back(tmp_path: Path) -> None:
    layout = ClusterLayout(tmp_path, brokers=5, base_port=20000, zk_port=3000)
    (tmp_path / local_cluster.LAYOUT_FILE).write_text(layout.to_json())
    assert local_cluster.load_layout(tmp_path) == layout
    (tmp_path / local_cluster.LAYOUT_FILE).write_text("{broken")
    assert local_cluster.load_layout(tmp_path) is None


def test_specs_are_zookeeper_then_each_broker(tmp_path: Path) -> None:
    specs = local_cluster.cluster_specs(ClusterLayout(tmp_path, brokers=2))
    assert [s.name for s in specs] == ["zookeeper", "broker-1", "broker-2"]
    assert specs[2].address == "127.0.0.1:9093"
    assert specs[2].marker == str(tmp_path / "broker-2" / "server.properties")
    assert specs[2].pid_file == tmp_path / "broker-2.pid"


def test_status_and_down_of_a_cluster_never_started(tmp_path: Path) -> None:
    lines: list[str] = []
    assert local_cluster.status(tmp_path, echo=lines.append) is False
    assert [line.split(":")[0] for line in lines] == [
        "zookeeper",
        "broker-1",
        "broker-2",
        "broker-3",
        "status pages (and /metrics)",
    ]
    assert all("stopped" in line for line in lines[:-1])
    assert lines[-1].endswith(
        "http://127.0.0.1:9644/, http://127.0.0.1:9645/, http://127.0.0.1:9646/"
    )
    lines.clear()
    local_cluster.down(tmp_path, echo=lines.append)
    assert lines == [
        f"{name} is not running" for name in ("broker-3", "broker-2", "broker-1", "zookeeper")
    ]


def test_a_stale_pid_file_is_not_taken_for_our_process(tmp_path: Path) -> None:
    (tmp_path / "broker-1.pid").write_text("1\n")  # pid 1 lives, but is not our broker
    spec = local_cluster.cluster_specs(ClusterLayout(tmp_path, brokers=1))[1]
    assert local_cluster.probe(spec).state is local_cluster.ProcessState.STALE


def test_up_refuses_a_taken_broker_port_before_starting_anything(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(ClusterError, match=rf"port {port} is already in use.*--base-port"):
            local_cluster.up(
                tmp_path, brokers=1, base_port=port, zk_port=free_port(), echo=lambda _: None
            )
    assert not (tmp_path / "zookeeper.pid").exists()
    assert not (tmp_path / "zookeeper" / "zoo.cfg").exists()
