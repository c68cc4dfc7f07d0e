"""The broker's two clocks: timers, timeouts and lag checks run on the monotonic clock; the
wall clock only dates what is stored. A wall clock stepped back or ahead (NTP, an operator)
must not stall the housekeeping nor move the cores' timers."""

from __future__ import annotations

import itertools
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio
import trio.testing

import broker.main
from broker.assembly import housekeeping_intervals
from broker.config.broker_config import BrokerConfig
from broker.context import BrokerContext
from broker.core.replica_manager import ReplicaManager
from broker.log.manager import LogManager

_REAL_TIME_NS = time.time_ns
STEP_BACK_MS = 20 * 60_000


class _Recorder:
    """Stands in for the log manager and the replica manager: remembers each task's calls."""

    def __init__(self) -> None:
        self.calls: dict[str, list[int]] = {}

    def _call(self, name: str, now_ms: int = -1) -> int:
        self.calls.setdefault(name, []).append(now_ms)
        return 0

    def cleanup(self, now_ms: int) -> int:
        return self._call("retention", now_ms)

    def flush_dirty(self, now_ms: int) -> int:
        return self._call("flush", now_ms)

    def remove_expired_producers(self, now_ms: int) -> int:
        return self._call("producer_expiry", now_ms)

    def checkpoint(self, now_ms: int) -> None:
        self._call("recovery_points", now_ms)

    def checkpoint_high_watermarks(self) -> None:
        self._call("high_watermarks")


async def test_housekeeping_keeps_its_intervals_when_the_wall_clock_steps_back(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    wall = {"ms": 1_800_000_000_000}
    monkeypatch.setattr(broker.main, "wall_clock_ms", lambda: wall["ms"])
    recorder = _Recorder()
    config = SimpleNamespace(
        log_retention_check_interval_ms=1000,
        log_flush_scheduler_interval_ms=1000,
        replica_high_watermark_checkpoint_interval_ms=1000,
        log_flush_offset_checkpoint_interval_ms=1000,
        producer_id_expiration_check_interval_ms=1000,
    )
    intervals = housekeeping_intervals(config)  # type: ignore[arg-type]
    ctx: Any = SimpleNamespace(
        config=config, replica_manager=recorder, housekeeping_intervals_ms=intervals
    )
    async with trio.open_nursery() as nursery:
        nursery.start_soon(broker.main._housekeeping, ctx, recorder)
        await trio.sleep(3.5)
        wall["ms"] -= STEP_BACK_MS  # stepped back 20 minutes
        await trio.sleep(6)
        nursery.cancel_scope.cancel()
    # One run a second throughout, the stepped-back wall clock handed to the tasks.
    for name in ("retention", "flush", "high_watermarks", "recovery_points", "producer_expiry"):
        assert len(recorder.calls[name]) == 9, (name, recorder.calls[name])
    assert recorder.calls["recovery_points"][-1] == 1_800_000_000_000 - STEP_BACK_MS
    # The flush.ms timer gets the scheduler's clock: a second apart throughout, no step.
    flushes = recorder.calls["flush"]
    assert [b - a for a, b in itertools.pairwise(flushes)] == [1000] * 8, flushes


def test_the_context_times_timers_on_the_monotonic_clock(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    config = BrokerConfig(broker_id=1, zookeeper_connect="zk:2181", log_dirs=(tmp_path,))
    ctx = BrokerContext(config, ReplicaManager(1, LogManager([tmp_path], config.log_config())))
    before_ms, wall_before_ms = ctx.now_ms(), ctx.wall_ms()
    monkeypatch.setattr(time, "time_ns", lambda: _REAL_TIME_NS() - STEP_BACK_MS * 1_000_000)
    assert ctx.wall_ms() <= wall_before_ms - STEP_BACK_MS + 5_000  # the step shows here
    assert before_ms <= ctx.now_ms() < before_ms + 5_000  # and not here
