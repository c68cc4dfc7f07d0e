"""Kafka's broker scheduler (KafkaScheduler's periodic tasks) as a pure schedule: which
tasks are due at `now_ms`, and when the next one is. The trio shell (broker/main.py) and the
simulator both run it and hand each due task to broker/housekeeping.py.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass

__all__ = ["HousekeepingSchedule", "HousekeepingTask"]


class HousekeepingTask(enum.Enum):
    """Each task and the setting that sets its interval."""

    RETENTION = "log.retention.check.interval.ms"
    FLUSH = "log.flush.scheduler.interval.ms"  # flush.ms per topic
    HIGH_WATERMARKS = "replica.high.watermark.checkpoint.interval.ms"
    RECOVERY_POINTS = "log.flush.offset.checkpoint.interval.ms"
    PRODUCER_EXPIRY = "producer.id.expiration.check.interval.ms"


@dataclass(slots=True)
class HousekeepingSchedule:
    """Every task runs first one interval after the start, then one interval after it ran
    (a late round is not made up: Kafka's scheduleAtFixedRate would, but a broker that fell
    behind gains nothing from running a checkpoint twice in a row)."""

    intervals_ms: Mapping[HousekeepingTask, int]
    due_ms: dict[HousekeepingTask, int]

    @classmethod
    def start(
        cls, intervals_ms: Mapping[HousekeepingTask, int], now_ms: int
    ) -> HousekeepingSchedule:
        return cls(intervals_ms, {task: now_ms + ms for task, ms in intervals_ms.items()})

    def next_due_ms(self) -> int:
        return min(self.due_ms.values())

    def take_due(self, now_ms: int) -> list[HousekeepingTask]:
        """The tasks due by `now_ms`, in the table's order, each rescheduled."""
        due = [task for task, at_ms in self.due_ms.items() if at_ms <= now_ms]
        for task in due:
            self.due_ms[task] = now_ms + self.intervals_ms[task]
        return due
