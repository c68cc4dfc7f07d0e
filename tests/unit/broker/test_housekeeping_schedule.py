"""The housekeeping schedule: each task one interval after the start, then one interval after
it ran; a late round is not made up."""

from __future__ import annotations

from broker.core.housekeeping import HousekeepingSchedule, HousekeepingTask

RETENTION = HousekeepingTask.RETENTION
HWS = HousekeepingTask.HIGH_WATERMARKS


def test_tasks_come_due_on_their_own_intervals() -> None:
    schedule = HousekeepingSchedule.start({RETENTION: 300, HWS: 100}, now_ms=1_000)
    assert schedule.next_due_ms() == 1_100
    assert schedule.take_due(1_099) == []
    assert schedule.take_due(1_100) == [HWS]
    assert schedule.take_due(1_200) == [HWS]
    assert schedule.take_due(1_300) == [RETENTION, HWS]
    assert schedule.next_due_ms() == 1_400


def test_a_late_round_runs_once_and_counts_the_interval_from_then() -> None:
    schedule = HousekeepingSchedule.start({HWS: 100}, now_ms=0)
    assert schedule.take_due(950) == [HWS]  # nine rounds late: one run
    assert schedule.take_due(1_000) == []
    assert schedule.next_due_ms() == 1_050
