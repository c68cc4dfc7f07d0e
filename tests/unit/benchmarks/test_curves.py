"""The curves benchmark's own parts, untimed: growth exponents and tables, the Kafka Metadata
v1 codec, Kafka's controlled shutdown line and leaders, and the set-up/teardown helpers (every
process stopped, also when a measure fails)."""

from __future__ import annotations

import os
import signal
import struct
import subprocess
import sys
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from tests.benchmarks.curves import highwater_side, kafka_metadata, kafka_side
from tests.benchmarks.curves.kafka_log import seconds_to
from tests.benchmarks.curves.measure import Point, growth_exponent, rss_mib, table, wait_for


def test_growth_exponent_tells_linear_from_quadratic_and_flat() -> None:
    linear = [Point(10, (1.0,)), Point(100, (10.0,)), Point(1000, (100.0,))]
    quadratic = [Point(10, (1.0,)), Point(1000, (10_000.0,))]
    assert growth_exponent(linear) == pytest.approx(1.0)
    assert growth_exponent(quadratic) == pytest.approx(2.0)
    # 6 s of ZooKeeper session expiry, then 1 ms per partition: linear above the floor.
    failover = [Point(10, (6.01,)), Point(1000, (7.0,))]
    assert growth_exponent(failover, floor=6.0) == pytest.approx(1.0)
    flat = growth_exponent(failover)
    assert flat is not None and flat < 0.1
    assert growth_exponent([Point(10, (1.0,))]) is None
    assert growth_exponent([Point(10, (1.0,)), Point(100, (0.5,))], floor=1.0) is None


def test_point_takes_the_middle_run_and_the_range() -> None:
    point = Point(3, (5.0, 1.0, 3.0))
    assert (point.low, point.mid, point.high) == (1.0, 3.0, 5.0)
    assert Point(3, (68.0, 24.0)).mid == 46.0  # two runs: their mean, not the higher


def test_table_has_a_row_per_x_and_a_dash_where_a_series_has_no_point() -> None:
    text = table(
        "Idle",
        "partitions",
        {"Highwater": [Point(10, (1.0, 2.0)), Point(3000, (4.0,))], "Kafka": [Point(10, (0.5,))]},
        "%",
    )
    lines = text.splitlines()
    assert lines[2] == "| partitions | Highwater (%) | Kafka (%) |"
    assert lines[4] == "| 10 | 1.5 (1-2) | 0.5 |"
    assert lines[5] == "| 3000 | 4 | - |"


def test_wait_for_returns_once_the_condition_holds_and_raises_past_its_deadline() -> None:
    calls = iter([False, False, True])
    assert wait_for(lambda: next(calls), 60, "third call", every_s=0) >= 0
    with pytest.raises(TimeoutError, match="never"):
        wait_for(lambda: False, 0, "never", every_s=0)


def test_rss_of_this_process_is_some_mebibytes() -> None:
    assert 1 < rss_mib(os.getpid()) < 100_000


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


def _ints(values: list[int]) -> bytes:
    return struct.pack(">i", len(values)) + b"".join(struct.pack(">i", v) for v in values)


def test_kafka_metadata_request_asks_v1_for_every_topic() -> None:
    wire = kafka_metadata.encode_request(7, "c")
    assert struct.unpack(">i", wire[:4])[0] == len(wire) - 4
    assert struct.unpack(">hhih", wire[4:14]) == (3, 1, 7, 1)
    assert wire[14:] == b"c" + struct.pack(">i", -1)


def test_kafka_metadata_response_v1_decodes_controller_leaders_replicas_isr() -> None:
    broker = struct.pack(">i", 1) + _string("127.0.0.1") + struct.pack(">ih", 9092, -1)
    partition = struct.pack(">hii", 0, 4, 2) + _ints([2, 3, 1]) + _ints([2, 3])
    topic = struct.pack(">h", 0) + _string("curve") + b"\x00" + struct.pack(">i", 1) + partition
    data = struct.pack(">i", 1) + struct.pack(">i", 1) + broker + struct.pack(">i", 3)
    data += struct.pack(">i", 1) + topic
    decoded = kafka_metadata.decode_response(data)
    assert decoded.controller_id == 3
    assert decoded.topics == {"curve": (kafka_metadata.KafkaPartition(4, 2, (2, 3, 1), (2, 3)),)}


def test_kafka_metadata_from_a_closed_port_is_none() -> None:
    assert kafka_metadata.fetch("127.0.0.1", 1, timeout_s=1) is None


class _Broker:
    def __init__(self, process: subprocess.Popen[bytes]) -> None:
        self.process = process


class _FakeCluster:
    """A cluster whose SIGTERM-based stop leaves a stubborn broker running."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        ignoring_term = "import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
        ignoring_term += "print('ready', flush=True)\nwhile True: time.sleep(60)"
        process = subprocess.Popen([sys.executable, "-c", ignoring_term], stdout=subprocess.PIPE)
        assert process.stdout is not None and process.stdout.readline() == b"ready\n"
        self.brokers = {1: _Broker(process)}
        self.stopped = False

    def start(self) -> None:
        pass

    def stop(self) -> None:
        self.stopped = True
        process = self.brokers[1].process
        process.send_signal(signal.SIGTERM)


class _FakeZooKeeper:
    instances: list[_FakeZooKeeper] = []

    def __init__(self, directory: Path, port: int) -> None:
        self.port = port
        self.started = self.stopped = False
        _FakeZooKeeper.instances.append(self)

    def start(self) -> None:
        self.started = True

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def fakes(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[_FakeCluster]]:
    clusters: list[_FakeCluster] = []

    def make_cluster(*args: Any, **kwargs: Any) -> _FakeCluster:
        clusters.append(_FakeCluster())
        return clusters[-1]

    _FakeZooKeeper.instances.clear()
    monkeypatch.setattr(highwater_side, "ZooKeeperServer", _FakeZooKeeper)
    monkeypatch.setattr(highwater_side, "Cluster", make_cluster)
    monkeypatch.setattr(highwater_side, "prepare_cluster", lambda cluster, timeout_s: None)
    yield clusters
    for cluster in clusters:
        process = cluster.brokers[1].process
        if process.poll() is None:
            process.kill()
            process.wait()


def test_highwater_running_stops_every_process_when_a_measure_fails(
    tmp_path: Path, fakes: list[_FakeCluster]
) -> None:
    with pytest.raises(RuntimeError, match="measure failed"), highwater_side.running(tmp_path):
        raise RuntimeError("measure failed")
    (cluster,) = fakes
    assert cluster.stopped
    # The broker that ignored SIGTERM was killed, not left behind.
    assert cluster.brokers[1].process.poll() == -signal.SIGKILL
    (zookeeper,) = _FakeZooKeeper.instances
    assert zookeeper.started and zookeeper.stopped


def test_kafka_running_stops_the_cluster_when_a_measure_fails(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[Any] = []

    class FakeKafka:
        def __init__(self, root: Path, overrides: dict[str, str], heap: tuple[str, ...]) -> None:
            self.overrides, self.heap = overrides, heap
            self.events: list[str] = []
            made.append(self)

        def start(self, timeout_s: float) -> None:
            self.events.append("start")

        def stop(self) -> None:
            self.events.append("stop")

    monkeypatch.setattr(kafka_side, "KafkaCluster", FakeKafka)
    with pytest.raises(RuntimeError, match="measure failed"), kafka_side.running(tmp_path):
        raise RuntimeError("measure failed")
    (cluster,) = made
    assert cluster.events == ["start", "stop"]
    assert cluster.heap == kafka_side.HEAP
    assert cluster.overrides["zookeeper.session.timeout.ms"] == "6000"


def test_kafkas_controlled_shutdown_is_read_off_its_success_line_only() -> None:
    # As KafkaServer.controlledShutdown words its answers: a retry's, then the success.
    signalled_at = 1_796_202_000.0
    stamp = datetime.fromtimestamp(signalled_at + 0.25).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    later = datetime.fromtimestamp(signalled_at + 1.5).strftime("%Y-%m-%d %H:%M:%S,%f")[:-3]
    lines = [
        f"[{stamp}] INFO [KafkaServer id=3] Controlled shutdown request returned after 212ms "
        "with 4 partitions remaining to move (kafka.server.KafkaServer)",
        f"[{later}] INFO [KafkaServer id=3] Controlled shutdown request returned successfully "
        "after 431ms (kafka.server.KafkaServer)",
    ]
    accepted = seconds_to(lines, kafka_side.SHUTDOWN_ACCEPTED, signalled_at)
    assert accepted == pytest.approx(1.5)
    assert seconds_to(lines[:1], kafka_side.SHUTDOWN_ACCEPTED, signalled_at) is None


def test_kafka_leaders_of_counts_the_partitions_a_broker_leads(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def partition(index: int, leader: int) -> kafka_metadata.KafkaPartition:
        return kafka_metadata.KafkaPartition(index, leader, (1, 2, 3), (1, 2, 3))

    found = kafka_metadata.KafkaMetadata(
        controller_id=1,
        topics={
            highwater_side.TOPIC: tuple(partition(i, 1 + i % 3) for i in range(9)),
            "other": (partition(0, 3),),
        },
    )

    class FakeCluster:
        brokers = {1: object(), 2: object(), 3: object()}

    curves = kafka_side.KafkaCurves(FakeCluster())  # type: ignore[arg-type]
    monkeypatch.setattr(curves, "_metadata", lambda broker: found)
    assert curves.leaders_of(3) == 3
    monkeypatch.setattr(curves, "_metadata", lambda broker: None)
    with pytest.raises(RuntimeError, match="no metadata"):
        curves.leaders_of(3)
