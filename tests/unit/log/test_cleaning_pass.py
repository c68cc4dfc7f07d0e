"""broker.core.cleaning_pass: a pass is swapped only into the log it cleaned and only if that
log did not change; the checkpoint moves only then; checkpoints of logs gone are forgotten;
a corrupt log is not chosen again. Real ReplicaManager, LogManager and logs in tmp_path."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.core.cleaner_manager import CleanerManager
from broker.core.cleaning_pass import (
    CleaningOutcome,
    choose_cleaning,
    cleaning_failed,
    finish_cleaning,
)
from broker.core.replica_manager import ReplicaManager
from broker.log.cleaner import CleaningResult, CleaningTask, clean
from broker.log.log import Log
from broker.log.manager import LogManager
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.records import Record, build_batch
from protocol.topic_partition import TopicPartition

ME = 1
NOW = 1_700_000_000_000
TP = TopicPartition("c", 0)
COMPACT = {"cleanup.policy": "compact", "segment.bytes": "400", "min.cleanable.dirty.ratio": "0.01"}


@pytest.fixture
def replicas(tmp_path: Path) -> Iterator[ReplicaManager]:
    log_manager = LogManager([tmp_path], LogConfig())
    log_manager.startup(NOW)
    manager = ReplicaManager(ME, log_manager)
    state = LeaderAndIsrPartitionState("c", 0, 1, ME, 0, (ME,), 0, (ME,))
    manager.become_leader_or_follower((state,), NOW, {"c": COMPACT}, wall_ms=NOW)
    for i in range(40):
        record = Record(key=f"k{i % 2}".encode(), value=b"v" * 40, timestamp_ms=NOW)
        manager.append(TP, build_batch([record], now_ms=NOW), NOW)
    partition = manager.partitions[TP]
    partition.high_watermark = partition.log.log_end_offset
    yield manager
    log_manager.shutdown(NOW)


def cleaned(
    manager: CleanerManager, replicas: ReplicaManager
) -> tuple[Log, CleaningTask, CleaningResult]:
    """A pass chosen (marked in progress) and run, not yet finished."""
    chosen = choose_cleaning(manager, replicas, NOW)
    assert chosen is not None
    candidate, log = chosen
    assert manager.in_progress == {candidate.tp}
    task = log.cleaning_task(candidate.first_dirty_offset, candidate.end_offset, NOW, 1 << 20)
    return log, task, clean(task)


def test_a_pass_is_swapped_in_and_checkpointed(replicas: ReplicaManager) -> None:
    manager = CleanerManager()
    log, task, result = cleaned(manager, replicas)
    outcome = finish_cleaning(manager, replicas, TP, log, task, result, NOW)
    assert outcome is CleaningOutcome.CLEANED
    assert manager.checkpoints == {TP: result.end_offset} and not manager.in_progress
    assert replicas.log_manager.read_cleaned() == {TP: result.end_offset}


def test_a_log_replaced_meanwhile_voids_the_pass(replicas: ReplicaManager) -> None:
    manager = CleanerManager()
    log, task, result = cleaned(manager, replicas)
    replicas.stop_replica(TP, delete=False)  # the partition is gone: nothing to swap into
    outcome = finish_cleaning(manager, replicas, TP, log, task, result, NOW)
    assert outcome is CleaningOutcome.GONE
    assert manager.checkpoints == {} and not manager.in_progress


def test_a_log_truncated_meanwhile_voids_the_pass(replicas: ReplicaManager) -> None:
    manager = CleanerManager()
    log, task, result = cleaned(manager, replicas)
    log.truncate_to(1)
    outcome = finish_cleaning(manager, replicas, TP, log, task, result, NOW)
    assert outcome is CleaningOutcome.VOIDED
    assert manager.checkpoints == {} and not manager.in_progress


def test_checkpoints_of_logs_no_longer_hosted_are_forgotten(replicas: ReplicaManager) -> None:
    gone = TopicPartition("gone", 0)
    manager = CleanerManager({gone: 7})
    choose_cleaning(manager, replicas, NOW)
    assert gone not in manager.checkpoints


def test_a_corrupt_log_is_not_chosen_again_a_failed_pass_is(replicas: ReplicaManager) -> None:
    manager = CleanerManager()
    assert choose_cleaning(manager, replicas, NOW) is not None
    assert cleaning_failed(manager, TP, corrupt=False) is CleaningOutcome.FAILED
    assert choose_cleaning(manager, replicas, NOW) is not None
    assert cleaning_failed(manager, TP, corrupt=True) is CleaningOutcome.CORRUPT
    assert choose_cleaning(manager, replicas, NOW) is None
