"""Real-process crash tests of the log engine: a writer process is SIGKILLed mid-append, or
SIGTERMed into a clean shutdown, and a fresh LogManager must recover every acknowledged append.

An append is "acknowledged" once `append_as_leader` returned and the writer printed its offset:
the bytes are in the kernel's page cache, which a process kill does not lose.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.log.manager import CLEAN_SHUTDOWN_FILE, LogManager
from protocol.records import decode_batches

pytestmark = pytest.mark.integration

WRITER = r"""
import signal, sys
from pathlib import Path
from broker.config.log_config import LogConfig
from broker.log.manager import LogManager
from protocol.records import Record, build_batch

log_dir = Path(sys.argv[1])
manager = LogManager([log_dir], LogConfig(segment_bytes=32 * 1024, index_interval_bytes=1024))
manager.startup(now_ms=0)
log = manager.get_or_create_log(("crash", 0), now_ms=0)
stop = False

def on_term(signum, frame):
    global stop
    stop = True

signal.signal(signal.SIGTERM, on_term)
n = log.log_end_offset
while not stop:
    records = [Record(b"value-%d" % (n + i), key=b"k") for i in range(7)]
    info = log.append_as_leader(build_batch(records, now_ms=n), leader_epoch=3, now_ms=n)
    n = info.last_offset + 1
    print(n, flush=True)
manager.shutdown(now_ms=n)
print("clean", flush=True)
"""


def start_writer(log_dir: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(log_dir)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
    )


def read_acks(proc: subprocess.Popen[str], at_least: int, deadline_s: float) -> int:
    """Read acknowledged LEOs until one is >= at_least; return the last one read."""
    assert proc.stdout is not None
    deadline = time.monotonic() + deadline_s
    last = 0
    while time.monotonic() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        if line.strip().isdigit():
            last = int(line)
            if last >= at_least:
                return last
    raise AssertionError(f"writer acknowledged only up to {last} (wanted {at_least})")


def reopen(log_dir: Path) -> LogManager:
    manager = LogManager([log_dir], LogConfig(segment_bytes=32 * 1024, index_interval_bytes=1024))
    manager.startup(now_ms=0)
    return manager


def all_values(manager: LogManager) -> list[bytes]:
    log = manager.get_log(("crash", 0))
    assert log is not None
    values: list[bytes] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1024 * 1024)
        batches = list(decode_batches(data.read()))
        assert batches, f"no whole batch at offset {offset}"
        for batch in batches:
            for record in batch.records:
                if record.offset >= offset:
                    assert record.offset == len(values), "offsets must be contiguous from 0"
                    assert record.value is not None
                    values.append(record.value)
            offset = batch.header.next_offset
    return values


@pytest.mark.parametrize("round_", range(3))
def test_sigkill_mid_append_keeps_every_acknowledged_record(tmp_path: Path, round_: int) -> None:
    log_dir = tmp_path / "logs"
    acked = 0
    for _ in range(2):  # crash, recover, write more, crash again
        proc = start_writer(log_dir)
        acked = read_acks(proc, at_least=acked + 3000 + 1000 * round_, deadline_s=60)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        assert proc.stdout is not None
        proc.stdout.close()
        assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists()
        manager = reopen(log_dir)
        assert manager.had_clean_shutdown[log_dir] is False
        values = all_values(manager)
        log = manager.get_log(("crash", 0))
        assert log is not None
        # Everything acknowledged survived; a batch in flight may or may not have.
        assert len(values) >= acked
        assert values == [b"value-%d" % i for i in range(len(values))]
        assert log.log_end_offset == len(values)
        assert len(log.segments) > 1, "the test should span several segments"
        assert [e.epoch for e in log.leader_epoch_cache.entries()] == [3]
        acked = log.log_end_offset
        manager.shutdown(now_ms=0)


def test_sigterm_shuts_down_cleanly_and_reopens_without_recovery(tmp_path: Path) -> None:
    log_dir = tmp_path / "logs"
    proc = start_writer(log_dir)
    acked = read_acks(proc, at_least=2000, deadline_s=60)
    proc.send_signal(signal.SIGTERM)
    assert proc.stdout is not None
    tail = proc.stdout.read()
    assert proc.wait(timeout=30) == 0
    assert tail.rstrip().endswith("clean")
    assert (log_dir / CLEAN_SHUTDOWN_FILE).exists()
    checkpoint = (log_dir / "recovery-point-offset-checkpoint").read_text().splitlines()
    assert checkpoint[:2] == ["0", "1"]
    topic, partition, recovery_point = checkpoint[2].split()
    assert (topic, partition) == ("crash", "0")
    manager = reopen(log_dir)
    assert manager.had_clean_shutdown[log_dir] is True
    assert not (log_dir / CLEAN_SHUTDOWN_FILE).exists(), "marker must go once the broker runs"
    values = all_values(manager)
    assert len(values) >= acked
    assert int(recovery_point) == len(values)
    manager.shutdown(now_ms=0)
