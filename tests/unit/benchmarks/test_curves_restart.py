"""The restart-vs-data curve's own parts, untimed: reading the broker's log lines from where
the restart began, the seconds to a step, the bytes a broker holds, the checkpoint wait."""

from __future__ import annotations

import json
import os
from pathlib import Path

from tests.benchmarks.curves.broker_log import events_since, seconds_to
from tests.benchmarks.curves.fill import data_bytes
from tests.benchmarks.curves.restart import STEPS, RestartTimes, by_step, checkpointed_after


def _line(event: str, timestamp: str) -> bytes:
    return json.dumps({"event": event, "timestamp": timestamp}).encode() + b"\n"


def test_events_since_reads_only_the_lines_after_the_offset_and_skips_non_json(
    tmp_path: Path,
) -> None:
    log = tmp_path / "broker.log"
    before = _line("log dir loaded", "2026-12-02T09:00:00Z")
    log.write_bytes(
        before
        + b"Traceback (most recent call last):\n"
        + _line("log dir loaded", "2026-12-02T09:00:10.5Z")
        + b'{"event": "cut by the kill", "time'  # the last line a SIGKILL left half-written
    )
    events = list(events_since(log, len(before)))
    assert [e["timestamp"] for e in events] == ["2026-12-02T09:00:10.5Z"]


def test_seconds_to_counts_from_the_kill_to_the_first_such_event() -> None:
    killed_at = 1_796_202_000.0  # 2026-12-02T09:00:00Z
    events = [
        {"event": "starting", "timestamp": "2026-12-02T09:00:01Z"},
        {"event": "log dir loaded", "timestamp": "2026-12-02T09:00:03.250000Z"},
        {"event": "log dir loaded", "timestamp": "2026-12-02T09:00:09Z"},
    ]
    assert seconds_to(events, "log dir loaded", killed_at) == 3.25
    assert seconds_to(events, "broker registered", killed_at) is None


def test_data_bytes_counts_the_topics_segments_only(tmp_path: Path) -> None:
    for name, size in [
        ("restart-0/00000000000000000000.log", 100),
        ("restart-0/00000000000000000000.index", 7),
        ("restart-1/00000000000000000042.log", 20),
        ("other-0/00000000000000000000.log", 1000),
    ]:
        path = tmp_path / name
        path.parent.mkdir(exist_ok=True)
        path.write_bytes(b"x" * size)
    assert data_bytes(tmp_path, "restart") == 120


def test_checkpointed_after_needs_a_checkpoint_written_after_the_time(tmp_path: Path) -> None:
    assert not checkpointed_after(tmp_path, 0.0)
    checkpoint = tmp_path / "recovery-point-offset-checkpoint"
    checkpoint.write_text("0\n0\n")
    os.utime(checkpoint, (1000.0, 1000.0))
    assert checkpointed_after(tmp_path, 999.0)
    assert not checkpointed_after(tmp_path, 1000.0)


def test_by_step_gives_each_steps_runs_in_the_order_of_steps() -> None:
    runs = [RestartTimes(2.0, 3.0, 1.0, 9.0, 10), RestartTimes(2.5, 3.5, 1.5, 8.0, 10)]
    steps = dict(zip(STEPS, by_step(runs), strict=True))
    assert steps == {
        "log recovery done": (1.0, 1.5),
        "listening": (2.0, 2.5),
        "registered": (3.0, 3.5),
        "back in every ISR": (9.0, 8.0),
    }
