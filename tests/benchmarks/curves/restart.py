"""Broker restart against the data on its disk: one topic (RF=3) filled until a broker holds
`gib` GiB, then that broker (not the controller) is SIGKILLed and started again. Seconds from
the SIGKILL to (a) its listener and its registration in ZooKeeper, (b) its log recovery done
(the "log dir loaded" line: every log opened, the unflushed tails re-validated), (c) its
replica back in the ISR of every partition, as every broker's Metadata shows.

(a) and (b) are read off the broker's own log lines (JSON, UTC timestamps, the same clock as
time.time() here); (c) is polled."""

from __future__ import annotations

import os
import signal
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import trio

from broker.log.manager import RECOVERY_POINT_CHECKPOINT_FILE
from client.admin import Admin
from tests.benchmarks.curves import fill as filling
from tests.benchmarks.curves.broker_log import events_since, seconds_to
from tests.benchmarks.curves.fill import data_bytes
from tests.benchmarks.curves.highwater_side import (
    ADMIN_TIMEOUT_MS,
    REPLICATION_FACTOR,
    SYNC_TIMEOUT_S,
    HighwaterCurves,
)
from tests.benchmarks.curves.measure import wait_for

TOPIC = "restart"
PARTITIONS = 8
RECORD_SIZE = 256 * 1024  # large records: the bytes, not the per-record work, are the load
BATCH_SIZE = 1_000_000  # under message.max.bytes (1048588)
PRODUCERS = 2
# Segments roll (and are flushed, moving the recovery point) every 256 MiB: a restart then
# re-validates only what lies past the checkpointed recovery point, whatever the total.
SEGMENT_BYTES = 256 << 20
CHECKPOINT_TIMEOUT_S = 180.0  # log.flush.offset.checkpoint.interval.ms is 60 s
# The broker's log lines that mark the steps (broker/main.py, broker/log/manager.py).
LISTENING = "listening"
REGISTERED = "broker registered"
LOGS_LOADED = "log dir loaded"


@dataclass(frozen=True)
class RestartTimes:
    listening_s: float
    registered_s: float
    logs_loaded_s: float
    in_every_isr_s: float
    data_bytes: int


def create_topic(hw: HighwaterCurves) -> None:
    async def create() -> None:
        async with Admin(hw.cluster.bootstrap, request_timeout_ms=ADMIN_TIMEOUT_MS) as admin:
            await admin.create_topic(
                TOPIC, PARTITIONS, REPLICATION_FACTOR, {"segment.bytes": str(SEGMENT_BYTES)}
            )

    trio.run(create)
    hw.wait_in_sync(TOPIC, PARTITIONS)


def checkpointed_after(data_dir: Path, since_s: float) -> bool:
    """The broker wrote its recovery points (recovery-point-offset-checkpoint) after
    `since_s` (a time.time())."""
    try:
        return os.stat(data_dir / RECOVERY_POINT_CHECKPOINT_FILE).st_mtime > since_s
    except FileNotFoundError:
        return False


def fill(hw: HighwaterCurves, broker_id: int, target_bytes: int) -> int:
    """Produce (acks=1, large records, rounds of PRODUCERS processes: fill.py) until
    `broker_id` holds `target_bytes` of TOPIC; then wait until every replica is in sync and
    the broker has checkpointed its recovery points since (as a broker that has been running
    a while has). Its bytes then."""
    data_dir = hw.cluster.brokers[broker_id].data_dir
    data_dirs = [b.data_dir for b in hw.cluster.brokers.values()]

    def command(records: int) -> list[str]:
        return [
            sys.executable,
            "-m",
            "client.cli",
            "perf",
            "produce",
            "-b",
            hw.cluster.bootstrap,
            "--topic",
            TOPIC,
            "--num-records",
            str(records),
            "--record-size",
            str(RECORD_SIZE),
            "--batch-size",
            str(BATCH_SIZE),
            "--acks",
            "1",
        ]

    filling.fill(
        "Highwater",
        command,
        PRODUCERS,
        RECORD_SIZE,
        data_dirs,
        TOPIC,
        target_bytes,
        lambda: hw.wait_in_sync(TOPIC, PARTITIONS),
    )
    return checkpointed_bytes(data_dir, f"broker {broker_id}")


def checkpointed_bytes(data_dir: Path, who: str) -> int:
    """Once every replica is in sync: wait until the broker writes its recovery points (as a
    broker that has been running a while has), then its bytes of TOPIC. Both systems' fills."""
    synced_s = time.time()
    wait_for(
        lambda: checkpointed_after(data_dir, synced_s),
        CHECKPOINT_TIMEOUT_S,
        f"{who} checkpoints its recovery points",
        every_s=1.0,
    )
    return data_bytes(data_dir, TOPIC)


STEPS = ("log recovery done", "listening", "registered", "back in every ISR")
# The steps drawn in the PNG (the table has all): the first and the last.
PLOTTED_STEPS = ("log recovery done", "back in every ISR")


def by_step(times: Sequence[RestartTimes]) -> tuple[tuple[float, ...], ...]:
    """The runs' seconds per step, in the order of STEPS (the order a broker takes them)."""
    return (
        tuple(t.logs_loaded_s for t in times),
        tuple(t.listening_s for t in times),
        tuple(t.registered_s for t in times),
        tuple(t.in_every_isr_s for t in times),
    )


def restart_s(hw: HighwaterCurves, broker_id: int) -> RestartTimes:
    """SIGKILL `broker_id`, start it again; the seconds to each step (module docstring)."""
    broker = hw.cluster.brokers[broker_id]
    assert broker.process is not None
    size = data_bytes(broker.data_dir, TOPIC)
    offset = broker.log_path.stat().st_size
    killed_at = time.time()
    broker.process.send_signal(signal.SIGKILL)
    broker.process.wait(10)
    broker.start()
    wait_for(
        lambda: hw.in_every_isr(TOPIC, broker_id),
        SYNC_TIMEOUT_S,
        f"broker {broker_id} back in every ISR",
        every_s=0.2,
    )
    in_isr_s = time.time() - killed_at
    events = list(events_since(broker.log_path, offset))
    steps = {
        name: seconds_to(events, name, killed_at) for name in (LISTENING, REGISTERED, LOGS_LOADED)
    }
    missing = [name for name, took in steps.items() if took is None]
    assert not missing, f"broker {broker_id} logged no {missing}"
    return RestartTimes(
        listening_s=steps[LISTENING] or 0.0,
        registered_s=steps[REGISTERED] or 0.0,
        logs_loaded_s=steps[LOGS_LOADED] or 0.0,
        in_every_isr_s=in_isr_s,
        data_bytes=size,
    )
