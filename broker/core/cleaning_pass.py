"""One cleaning pass's bookkeeping around the cleaning itself (`broker.log.cleaner.clean`).

Which log it takes: `CleanerManager.choose` among the hosted logs, each below its high
watermark, after forgetting the checkpoints of logs no longer hosted. What follows it (Kafka's
LogCleaner.cleanLog, LogCleanerManager's doneCleaning and abortCleaning): the cleaned segments
are swapped in only into the very log that was cleaned, and only if it did not change
meanwhile; otherwise the pass is void and the log is chosen again later. A corrupt log is not
retried until the broker restarts; a failed swap takes the log dir offline (KIP-112). The trio
shell (broker/log_cleaner.py) and the simulator both start and finish a pass here.
"""

from __future__ import annotations

import enum

from broker.core.cleaner_manager import CleanCandidate, CleanerManager
from broker.core.replica_manager import ReplicaManager
from broker.log.cleaner import CleaningResult, CleaningTask
from broker.log.log import Log
from protocol.topic_partition import TopicPartition

__all__ = ["CleaningOutcome", "choose_cleaning", "cleaning_failed", "finish_cleaning"]


class CleaningOutcome(enum.Enum):
    CLEANED = "log cleaned"
    VOIDED = "cleaning voided: the log changed"
    GONE = "the log was deleted or replaced meanwhile"
    STORAGE_FAILED = "the swap failed: the log dir is offline"
    FAILED = "cleaning failed; the next round retries"
    CORRUPT = "log uncleanable: a corrupt batch"


def choose_cleaning(
    manager: CleanerManager, replica_manager: ReplicaManager, wall_ms: int
) -> tuple[CleanCandidate, Log] | None:
    """The log to clean now and how far, marked in progress; None when none is due."""
    hosted = replica_manager.log_manager.logs
    for gone in [tp for tp in manager.checkpoints if tp not in hosted]:
        manager.forget(gone)
    partitions = replica_manager.partitions
    logs = {tp: (p.log, p.high_watermark) for tp, p in partitions.items()}
    candidate = manager.choose(logs, wall_ms)
    if candidate is None:
        return None
    manager.begin(candidate.tp)
    return candidate, logs[candidate.tp][0]


def finish_cleaning(
    manager: CleanerManager,
    replica_manager: ReplicaManager,
    tp: TopicPartition,
    log: Log,
    task: CleaningTask,
    result: CleaningResult,
    wall_ms: int,
) -> CleaningOutcome:
    """Swap a pass's result into `log` (the log it read), checkpointing the cleaned offsets."""
    partition = replica_manager.partitions.get(tp)
    if partition is None or partition.log is not log:
        manager.aborted(tp)
        return CleaningOutcome.GONE
    try:
        swapped = log.replace_segments(task, result, wall_ms)
    except OSError as exc:  # the log dir failed (KIP-112): offline, not a broker crash
        manager.aborted(tp)
        replica_manager.storage_failed(tp, exc, write=True)
        return CleaningOutcome.STORAGE_FAILED
    if not swapped:
        manager.aborted(tp)
        return CleaningOutcome.VOIDED
    manager.done(tp, result.end_offset)
    replica_manager.log_manager.checkpoint_cleaned(manager.checkpoints)
    return CleaningOutcome.CLEANED


def cleaning_failed(
    manager: CleanerManager, tp: TopicPartition, *, corrupt: bool
) -> CleaningOutcome:
    """The pass itself failed: a corrupt batch or record (Kafka's uncleanable partitions) is
    not retried until restart; anything else (the log changed under it) is, next round."""
    if corrupt:
        manager.failed(tp)
        return CleaningOutcome.CORRUPT
    manager.aborted(tp)
    return CleaningOutcome.FAILED
