"""Kafka's side of the restart curve, untimed: its log4j lines' local-time stamps, the
seconds to a step from them, and the refusal to fill a disk that cannot take the data."""

from __future__ import annotations

import itertools
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.benchmarks.curves import fill
from tests.benchmarks.curves.fill import GIB, bytes_needed, disk_refusal, gib_per_min
from tests.benchmarks.curves.kafka_log import count, line_time_s, lines_since, seconds_to
from tests.benchmarks.curves.kafka_restart import (
    LISTENING,
    LOGS_LOADED,
    RECOVERING_SEGMENT,
    REGISTERED,
)
from tests.benchmarks.curves.measure import Point
from tests.benchmarks.curves.run import plotted

KILLED_AT = 1_796_202_000.0  # 2026-12-02T09:00:00Z, 14:30:00 in Kolkata (UTC+5:30)


@pytest.fixture
def kolkata(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local time zone set to UTC+5:30 (no daylight saving), as a JVM started
    from it would stamp its lines."""
    monkeypatch.setenv("TZ", "Asia/Kolkata")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


# As Kafka 3.9.2 wrote them in a real restart (PatternLayout "[%d] %p %m (%c)%n"; the
# segment line as LogLoader.recoverLog words it).
LINES = [
    "[2026-12-02 14:30:02,100] INFO Registered kafka:type=kafka.Log4jController MBean "
    "(kafka.utils.Log4jControllerRegistration$)",
    "[2026-12-02 14:30:03,500] INFO [LogLoader partition=restart-3, dir=/tmp/d] Recovering "
    "unflushed segment 268435456. 1/2 recovered for restart-3. (kafka.log.LogLoader)",
    "[2026-12-02 14:30:04,250] INFO Loaded 8 logs in 1027ms (unclean log dirs = "
    "ArrayBuffer(/tmp/d)) (kafka.log.LogManager)",
    "[2026-12-02 14:30:05,000] INFO Registered broker 3 at path /brokers/ids/3 with addresses: "
    "PLAINTEXT://127.0.0.1:40000, czxid (broker epoch): 99 (kafka.zk.KafkaZkClient)",
    "\tat kafka.server.KafkaServer.startup(KafkaServer.scala:1)",
    "[2026-12-02 14:30:05,750] INFO [SocketServer listenerType=ZK_BROKER, nodeId=3] Enabling "
    "request processing. (kafka.network.SocketServer)",
]


@pytest.mark.usefixtures("kolkata")
def test_line_time_reads_the_stamp_as_local_time() -> None:
    assert line_time_s("[2026-12-02 14:30:00,250] INFO x (y)") == KILLED_AT + 0.25
    assert line_time_s("\tat kafka.Kafka.main(Kafka.scala:1)") is None


@pytest.mark.usefixtures("kolkata")
def test_seconds_to_each_step_from_kafkas_own_lines() -> None:
    assert seconds_to(LINES, LOGS_LOADED, KILLED_AT) == 4.25
    assert seconds_to(LINES, REGISTERED, KILLED_AT) == 5.0  # not the MBean "Registered" line
    assert seconds_to(LINES, LISTENING, KILLED_AT) == 5.75
    assert count(LINES, RECOVERING_SEGMENT) == 1


@pytest.mark.usefixtures("kolkata")
def test_seconds_to_is_none_without_the_line() -> None:
    assert seconds_to(LINES[:2], LOGS_LOADED, KILLED_AT) is None


def test_lines_since_reads_from_the_offset(tmp_path: Path) -> None:
    log = tmp_path / "server.log"
    log.write_text(LINES[0] + "\n" + LINES[2] + "\n")
    assert lines_since(log, len(LINES[0]) + 1) == [LINES[2]]


def test_a_fill_needs_three_replicas_of_what_is_still_to_write_plus_a_margin() -> None:
    assert bytes_needed(20 * GIB, 5 * GIB) == 45 * GIB + 4 * GIB
    assert bytes_needed(1 * GIB, 2 * GIB) == 4 * GIB  # already there: the margin only


def test_the_disk_check_refuses_what_does_not_fit_and_says_why() -> None:
    assert disk_refusal(free_bytes=70 * GIB, target_bytes=20 * GIB, held_bytes=0) is None
    refusal = disk_refusal(free_bytes=60 * GIB, target_bytes=20 * GIB, held_bytes=0)
    assert refusal is not None
    assert "64.0 GiB, 60.0 GiB free" in refusal


def test_gib_per_min() -> None:
    assert gib_per_min(3 * GIB, 120.0) == 1.5
    assert gib_per_min(GIB, 0.0) == 0.0


def test_the_restart_png_draws_two_steps_per_system() -> None:
    point = [Point(1, (1.0,))]
    series = {
        f"{system}: {step}": point
        for system in ("Highwater", "Kafka")
        for step in ("log recovery done", "listening", "registered", "back in every ISR")
    }
    assert sorted(plotted("restart", series)) == [
        "Highwater: back in every ISR",
        "Highwater: log recovery done",
        "Kafka: back in every ISR",
        "Kafka: log recovery done",
    ]
    assert plotted("failover", series) == series


def test_wait_still_returns_once_no_broker_grows_and_times_out_while_one_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    segment = tmp_path / "restart-0" / "00000000000000000000.log"
    segment.parent.mkdir()
    segment.write_bytes(b"x")
    monkeypatch.setattr(fill, "POLL_S", 0.0)
    fill.wait_still([tmp_path], "restart")  # returns: nothing grows

    monkeypatch.setattr(fill, "STILL_TIMEOUT_S", 0.0)

    grown = itertools.count(1)
    monkeypatch.setattr(fill, "data_bytes", lambda data_dir, topic: next(grown))
    with pytest.raises(TimeoutError, match="still growing"):
        fill.wait_still([tmp_path], "restart")


def test_a_round_of_producers_sends_what_is_missing_at_most_a_round() -> None:
    record = 256 * 1024
    assert fill.records_each(GIB, 0, 2, record) == 2048  # 2 x 0.5 GiB: the target exactly
    assert fill.records_each(20 * GIB, 0, 2, record) == 8192  # rounds of ROUND_BYTES (4 GiB)
    assert fill.records_each(GIB, 2 * GIB, 2, record) == 1
