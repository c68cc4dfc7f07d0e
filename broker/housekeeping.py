"""What each housekeeping task does to the logs (the schedule is broker/core/housekeeping.py).
Run by the trio shell (broker/main.py) and the simulator alike."""

from __future__ import annotations

from broker.core.housekeeping import HousekeepingTask
from broker.core.replica_manager import ReplicaManager
from broker.log.manager import LogManager

__all__ = ["perform"]


def perform(
    task: HousekeepingTask,
    log_manager: LogManager,
    replica_manager: ReplicaManager,
    *,
    wall_ms: int,
    monotonic_ms: int,
) -> int:
    """Run one task; the count of what it removed (segments by retention, producer ids by
    expiry), else 0. `wall_ms` for what is compared with stored times; `monotonic_ms` for
    the flush.ms timer."""
    match task:
        case HousekeepingTask.RETENTION:
            return log_manager.cleanup(wall_ms)
        case HousekeepingTask.FLUSH:
            log_manager.flush_dirty(monotonic_ms)
        case HousekeepingTask.HIGH_WATERMARKS:
            replica_manager.checkpoint_high_watermarks()
        case HousekeepingTask.RECOVERY_POINTS:
            log_manager.checkpoint(wall_ms)
        case HousekeepingTask.PRODUCER_EXPIRY:
            return log_manager.remove_expired_producers(wall_ms)
    return 0
