"""ReplicaManager: LeaderAndIsr (its topic ids too), StopReplica, per-partition errors and the
HW checkpoint.

Real LogManager and logs in tmp_path.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.core.replica_manager import ReplicaManager
from broker.core.topic_id_check import has_consistent_topic_id
from broker.log.checkpoints import EpochEntry
from broker.log.manager import LogManager
from broker.log.partition_metadata import read_topic_id
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.records import Record, build_batch, decode_batches
from protocol.topic_id import from_uuid
from protocol.topic_partition import TopicPartition

ME = 1
OTHER = 2
NOW = 1_700_000_000_000


def open_manager(log_dir: Path) -> LogManager:
    manager = LogManager([log_dir], LogConfig())
    manager.startup(NOW)
    return manager


@pytest.fixture
def log_manager(tmp_path: Path) -> Iterator[LogManager]:
    manager = open_manager(tmp_path)
    yield manager
    manager.shutdown(NOW)


@pytest.fixture
def rm(log_manager: LogManager) -> ReplicaManager:
    return ReplicaManager(ME, log_manager)


def state(
    topic: str = "t",
    partition: int = 0,
    *,
    leader: int = ME,
    epoch: int = 0,
    isr: tuple[int, ...] = (ME,),
    replicas: tuple[int, ...] | None = None,
) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        topic_name=topic,
        partition_index=partition,
        controller_epoch=1,
        leader=leader,
        leader_epoch=epoch,
        isr=isr,
        partition_epoch=0,
        replicas=tuple(sorted({*isr, ME})) if replicas is None else replicas,
    )


def batch(*values: bytes) -> bytes:
    return build_batch([Record(v) for v in values], now_ms=NOW)


def read_values(rm: ReplicaManager, tp: tuple[str, int], offset: int = 0) -> list[bytes | None]:
    result = rm.read(
        tp, offset, 1 << 20, replica_id=-1, current_leader_epoch=-1, min_one_batch=True
    )
    return [r.value for b in decode_batches(result.data.read()) for r in b.records]


def test_leader_and_isr_creates_the_log_and_leads(rm: ReplicaManager, tmp_path: Path) -> None:
    results = rm.become_leader_or_follower(
        (state(epoch=2), state("u", 3, epoch=0)), NOW, wall_ms=NOW
    )
    assert results == [("t", 0, 0), ("u", 3, 0)]
    assert (tmp_path / "t-0").is_dir() and (tmp_path / "u-3").is_dir()
    partition = rm.leader_partition(("t", 0))
    assert partition.leader_epoch == 2
    assert partition.log.leader_epoch_cache.entries() == [EpochEntry(2, 0)]


def test_not_a_replica_is_unknown_topic_or_partition(rm: ReplicaManager, tmp_path: Path) -> None:
    results = rm.become_leader_or_follower(
        (state(leader=OTHER, isr=(OTHER,), replicas=(OTHER, 3)),), NOW, wall_ms=NOW
    )
    assert results == [("t", 0, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION)]
    assert ("t", 0) not in rm.partitions
    assert not (tmp_path / "t-0").exists()


def test_older_leader_epoch_is_refused(rm: ReplicaManager) -> None:
    rm.become_leader_or_follower((state(epoch=5),), NOW, wall_ms=NOW)
    results = rm.become_leader_or_follower(
        (state(leader=OTHER, epoch=4, isr=(OTHER, ME)),), NOW, wall_ms=NOW
    )
    assert results[0][2] != ErrorCode.NONE
    partition = rm.leader_partition(("t", 0))
    assert partition.leader_epoch == 5 and partition.is_leader


def test_append_and_read(rm: ReplicaManager) -> None:
    rm.become_leader_or_follower((state(),), NOW, wall_ms=NOW)
    first = rm.append(("t", 0), batch(b"a", b"b"), NOW)
    second = rm.append(("t", 0), batch(b"c"), NOW)
    assert (first.error_code, first.base_offset, first.next_offset) == (0, 0, 2)
    assert (second.error_code, second.base_offset, second.next_offset) == (0, 2, 3)
    assert first.log_start_offset == 0
    assert read_values(rm, ("t", 0)) == [b"a", b"b", b"c"]
    assert read_values(rm, ("t", 0), 2) == [b"c"]


def test_append_errors_are_per_partition_codes(rm: ReplicaManager) -> None:
    rm.become_leader_or_follower(
        (state(), state("f", 0, leader=OTHER, epoch=1, isr=(OTHER, ME))), NOW, wall_ms=NOW
    )
    unknown = rm.append(("nope", 0), batch(b"x"), NOW)
    assert unknown.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert unknown.base_offset == -1 and unknown.error_message
    follower = rm.append(("f", 0), batch(b"x"), NOW)
    assert follower.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    corrupt = bytearray(batch(b"x"))
    corrupt[-1] ^= 0xFF
    bad = rm.append(("t", 0), bytes(corrupt), NOW)
    assert bad.error_code == ErrorCode.CORRUPT_MESSAGE
    assert rm.partitions[("t", 0)].log_end_offset == 0
    assert rm.partitions[("f", 0)].log_end_offset == 0


def test_read_errors(rm: ReplicaManager) -> None:
    rm.become_leader_or_follower(
        (state(epoch=3), state("f", 0, leader=OTHER, epoch=1, isr=(OTHER, ME))), NOW, wall_ms=NOW
    )

    def code(tp: tuple[str, int], offset: int = 0, epoch: int = -1) -> int:
        try:
            rm.read(tp, offset, 100, replica_id=-1, current_leader_epoch=epoch, min_one_batch=True)
        except HighwaterError as exc:
            return exc.code
        return 0

    assert code(("nope", 0)) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert code(("f", 0)) == ErrorCode.NOT_LEADER_OR_FOLLOWER
    assert code(("t", 0), epoch=2) == ErrorCode.FENCED_LEADER_EPOCH
    assert code(("t", 0), epoch=4) == ErrorCode.UNKNOWN_LEADER_EPOCH
    assert code(("t", 0), epoch=3) == 0
    assert code(("t", 0), offset=1) == ErrorCode.OFFSET_OUT_OF_RANGE


def test_becoming_follower_stops_appends(rm: ReplicaManager) -> None:
    rm.become_leader_or_follower((state(epoch=0),), NOW, wall_ms=NOW)
    assert rm.append(("t", 0), batch(b"a"), NOW).error_code == 0
    rm.become_leader_or_follower((state(leader=OTHER, epoch=1, isr=(OTHER, ME)),), NOW, wall_ms=NOW)
    assert rm.append(("t", 0), batch(b"b"), NOW).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


def test_stop_replica_without_delete_keeps_the_data(rm: ReplicaManager, tmp_path: Path) -> None:
    rm.become_leader_or_follower((state(),), NOW, wall_ms=NOW)
    rm.append(("t", 0), batch(b"a"), NOW)
    rm.stop_replica(("t", 0), delete=False)
    assert rm.append(("t", 0), batch(b"b"), NOW).error_code != ErrorCode.NONE
    assert (tmp_path / "t-0").is_dir()
    rm.become_leader_or_follower((state(epoch=1),), NOW, wall_ms=NOW)
    assert read_values(rm, ("t", 0)) == [b"a"]


def test_stop_replica_delete_removes_the_directory(rm: ReplicaManager, tmp_path: Path) -> None:
    rm.become_leader_or_follower((state(), state("t", 1)), NOW, wall_ms=NOW)
    rm.append(("t", 0), batch(b"a"), NOW)
    rm.checkpoint_high_watermarks()
    rm.stop_replica(("t", 0), delete=True)
    assert not (tmp_path / "t-0").exists()
    assert not any(p.name.startswith("t-0.") for p in tmp_path.iterdir())  # no leftovers
    assert (tmp_path / "t-1").is_dir()
    assert ("t", 0) not in rm.partitions
    result = rm.append(("t", 0), batch(b"b"), NOW)
    assert result.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # Recreated from scratch: empty log, no stale HW or epoch from before.
    rm.become_leader_or_follower((state(epoch=0, isr=(ME, OTHER)),), NOW, wall_ms=NOW)
    partition = rm.leader_partition(("t", 0))
    assert partition.log_end_offset == 0 and partition.high_watermark == 0
    assert partition.log.leader_epoch_cache.entries() == [EpochEntry(0, 0)]


def test_stop_replica_delete_of_unhosted_log_on_disk(tmp_path: Path) -> None:
    """After a restart the log exists on disk before any LeaderAndIsr names it."""
    manager = open_manager(tmp_path)
    rm = ReplicaManager(ME, manager)
    rm.become_leader_or_follower((state(),), NOW, wall_ms=NOW)
    rm.append(("t", 0), batch(b"a"), NOW)
    manager.shutdown(NOW)
    manager = open_manager(tmp_path)
    try:
        rm = ReplicaManager(ME, manager)
        rm.stop_replica(("t", 0), delete=True)
        assert not (tmp_path / "t-0").exists()
    finally:
        manager.shutdown(NOW)


def test_stop_replica_of_unknown_partition_is_harmless(rm: ReplicaManager) -> None:
    rm.stop_replica(("nope", 0), delete=False)
    rm.stop_replica(("nope", 0), delete=True)


def test_high_watermark_checkpoint_round_trip(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    rm = ReplicaManager(ME, manager)
    rm.become_leader_or_follower((state(), state("u", 1, isr=(ME, OTHER))), NOW, wall_ms=NOW)
    rm.append(("t", 0), batch(b"a", b"b", b"c"), NOW)
    rm.append(("u", 1), batch(b"x", b"y"), NOW)
    rm.partitions[("u", 1)].update_follower_fetch(OTHER, 1, 2, NOW)
    assert rm.partitions[("t", 0)].high_watermark == 3
    assert rm.partitions[("u", 1)].high_watermark == 1
    rm.checkpoint_high_watermarks()
    manager.shutdown(NOW)

    manager = open_manager(tmp_path)
    try:
        again = ReplicaManager(ME, manager)
        # As a follower the HW must come from the checkpoint (it cannot be recomputed).
        again.become_leader_or_follower(
            (
                state(leader=OTHER, epoch=1, isr=(OTHER, ME)),
                state("u", 1, leader=OTHER, epoch=1, isr=(OTHER, ME)),
            ),
            NOW,
            wall_ms=NOW,
        )
        assert again.partitions[("t", 0)].high_watermark == 3
        assert again.partitions[("u", 1)].high_watermark == 1
        assert again.partitions[("u", 1)].log_end_offset == 2
    finally:
        manager.shutdown(NOW)


def test_high_watermark_checkpoint_survives_stop_replica_without_delete(tmp_path: Path) -> None:
    """StopReplica(delete=false) keeps the replica's data; its HW must not be lost, or a
    later leader with a lagging ISR member would serve less than was already committed."""
    manager = open_manager(tmp_path)
    rm = ReplicaManager(ME, manager)
    rm.become_leader_or_follower((state(),), NOW, wall_ms=NOW)
    rm.append(("t", 0), batch(b"a", b"b"), NOW)
    assert rm.partitions[("t", 0)].high_watermark == 2
    rm.stop_replica(("t", 0), delete=False)
    rm.checkpoint_high_watermarks()
    manager.shutdown(NOW)

    manager = open_manager(tmp_path)
    try:
        again = ReplicaManager(ME, manager)
        again.become_leader_or_follower((state(epoch=1, isr=(ME, OTHER)),), NOW, wall_ms=NOW)
        assert again.partitions[("t", 0)].high_watermark == 2
    finally:
        manager.shutdown(NOW)


def test_high_watermark_kept_across_stop_and_restart_in_one_process(rm: ReplicaManager) -> None:
    rm.become_leader_or_follower((state(),), NOW, wall_ms=NOW)
    rm.append(("t", 0), batch(b"a", b"b"), NOW)
    rm.stop_replica(("t", 0), delete=False)
    rm.become_leader_or_follower((state(epoch=1, isr=(ME, OTHER)),), NOW, wall_ms=NOW)
    assert rm.partitions[("t", 0)].high_watermark == 2
    assert read_values(rm, ("t", 0)) == [b"a", b"b"]


def test_deleted_partition_disappears_from_the_checkpoint(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    rm = ReplicaManager(ME, manager)
    rm.become_leader_or_follower((state(), state("t", 1)), NOW, wall_ms=NOW)
    rm.append(("t", 0), batch(b"a"), NOW)
    rm.append(("t", 1), batch(b"b"), NOW)
    rm.checkpoint_high_watermarks()
    rm.stop_replica(("t", 0), delete=True)
    rm.checkpoint_high_watermarks()
    manager.shutdown(NOW)
    manager = open_manager(tmp_path)
    try:
        assert manager.read_high_watermarks() == {("t", 1): 1}
    finally:
        manager.shutdown(NOW)


def test_stray_logs_of_deleted_topics_are_deleted_but_hosted_ones_kept(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    manager.get_or_create_log(("gone", 0), NOW)  # on disk from before, no LeaderAndIsr
    manager.get_or_create_log(("kept", 0), NOW)  # its topic still exists, with us in it
    manager.get_or_create_log(("moved", 0), NOW)  # reassigned away from us meanwhile
    manager.get_or_create_log(("moved", 1), NOW)  # partition not in the metadata: kept
    rm = ReplicaManager(ME, manager)
    rm.become_leader_or_follower((state(),), NOW, wall_ms=NOW)  # hosts t-0
    try:
        placed = {("kept", 0): (ME, OTHER), ("moved", 0): (OTHER,), ("t", 0): (OTHER,)}
        assert rm.delete_stray_logs(placed) == [("gone", 0), ("moved", 0)]
        assert sorted(manager.logs) == [("kept", 0), ("moved", 1), ("t", 0)]
        assert not (tmp_path / "gone-0").exists()
    finally:
        manager.shutdown(NOW)


def test_a_hosted_partition_goes_when_newer_metadata_moves_it_away(tmp_path: Path) -> None:
    """A controller that completed a reassignment and failed before its StopReplica: the
    next controller's UpdateMetadata, in a newer leader epoch, no longer places it here."""
    manager = open_manager(tmp_path)
    rm = ReplicaManager(ME, manager)
    rm.become_leader_or_follower((state(),), NOW, wall_ms=NOW)
    epoch = rm.partitions[("t", 0)].leader_epoch
    try:
        placed = {("t", 0): (OTHER,)}
        assert rm.delete_stray_logs(placed, {("t", 0): epoch}) == []  # not newer: kept
        assert rm.delete_stray_logs(placed, {("t", 0): epoch + 1}) == [("t", 0)]
        assert ("t", 0) not in rm.partitions and ("t", 0) not in manager.logs
    finally:
        manager.shutdown(NOW)


def test_a_hosted_partition_of_a_deleted_topic_goes_when_a_later_controller_says_so(
    tmp_path: Path,
) -> None:
    """A broker cut off while its topic was deleted never got the StopReplica, and the
    controller that sent it failed: the next controller, which knows nothing of the topic,
    sends metadata without it. That controller's UpdateMetadata deletes it; metadata from the
    controller whose LeaderAndIsr gave it (a creation racing its metadata) does not."""
    manager = open_manager(tmp_path)
    rm = ReplicaManager(ME, manager)
    rm.become_leader_or_follower((state(),), NOW, wall_ms=NOW)
    given_by = rm.partitions[("t", 0)].controller_epoch
    try:
        assert rm.delete_stray_logs({}, {}, given_by) == []
        assert rm.delete_stray_logs({}, {}, given_by + 1) == [("t", 0)]
        assert ("t", 0) not in rm.partitions and ("t", 0) not in manager.logs
    finally:
        manager.shutdown(NOW)


# -- topic ids (KIP-516): LeaderAndIsr's against the ids logs store (partition.metadata) --

OLD_ID = from_uuid(uuid.UUID(int=2))
NEW_ID = from_uuid(uuid.UUID(int=3))
TP = TopicPartition("t", 0)


def test_ids_agree_unless_both_sides_have_one_and_they_differ() -> None:
    assert has_consistent_topic_id(OLD_ID, OLD_ID)
    assert has_consistent_topic_id("", OLD_ID)  # a request from before ids
    assert has_consistent_topic_id(OLD_ID, "")  # a log from before ids
    assert has_consistent_topic_id("", "")
    assert not has_consistent_topic_id(NEW_ID, OLD_ID)


def test_a_new_log_stores_the_id_and_an_old_log_is_backfilled(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    rm = ReplicaManager(ME, manager)
    assert rm.become_leader_or_follower((state(),), NOW, wall_ms=NOW) == [("t", 0, 0)]
    assert rm.partitions[TP].log.topic_id == ""  # no id in the request: none stored
    assert read_topic_id(tmp_path / "t-0") == ""
    given = dataclasses.replace(state(epoch=1), topic_id=OLD_ID)
    assert rm.become_leader_or_follower((given,), NOW, wall_ms=NOW) == [("t", 0, 0)]
    assert rm.partitions[TP].log.topic_id == OLD_ID
    assert read_topic_id(tmp_path / "t-0") == OLD_ID
    fresh = dataclasses.replace(state("u"), topic_id=NEW_ID)
    assert rm.become_leader_or_follower((fresh,), NOW, wall_ms=NOW) == [("u", 0, 0)]
    assert read_topic_id(tmp_path / "u-0") == NEW_ID
    manager.shutdown(NOW)


def test_a_hosted_log_with_another_id_refuses_the_state(tmp_path: Path) -> None:
    manager = open_manager(tmp_path)
    rm = ReplicaManager(ME, manager)
    first = dataclasses.replace(state(), topic_id=OLD_ID)
    rm.become_leader_or_follower((first,), NOW, wall_ms=NOW)
    assert rm.append(TP, batch(b"kept"), NOW).error_code == ErrorCode.NONE
    other = dataclasses.replace(state(leader=2, epoch=1, replicas=(ME, 2)), topic_id=NEW_ID)
    (answer,) = rm.become_leader_or_follower((other,), NOW, wall_ms=NOW)
    assert answer == ("t", 0, ErrorCode.INCONSISTENT_TOPIC_ID)
    partition = rm.partitions[TP]
    assert (partition.is_leader, partition.leader_epoch) == (True, 0), "not applied"
    assert partition.log.topic_id == OLD_ID
    assert partition.log_end_offset == 1
    manager.shutdown(NOW)


def test_a_loaded_log_of_a_deleted_topic_is_moved_aside_not_adopted_nor_deleted(
    tmp_path: Path,
) -> None:
    manager = open_manager(tmp_path)
    rm = ReplicaManager(ME, manager)
    rm.become_leader_or_follower((dataclasses.replace(state(), topic_id=OLD_ID),), NOW, wall_ms=NOW)
    rm.append(TP, batch(b"old-0"), NOW)
    rm.append(TP, batch(b"old-1"), NOW)
    rm.checkpoint_high_watermarks()
    manager.shutdown(NOW)
    old_files = {p.name: p.read_bytes() for p in (tmp_path / "t-0").iterdir()}

    manager = open_manager(tmp_path)  # the broker restarts; the topic was created again
    rm = ReplicaManager(ME, manager)
    assert manager.logs[TP].topic_id == OLD_ID
    recreated = dataclasses.replace(state(leader=2, replicas=(2, ME)), topic_id=NEW_ID)
    assert rm.become_leader_or_follower((recreated,), NOW, wall_ms=NOW) == [("t", 0, 0)]
    partition = rm.partitions[TP]
    assert partition.log.topic_id == NEW_ID
    assert (partition.log_end_offset, partition.high_watermark) == (0, 0), "old data not served"
    assert read_topic_id(tmp_path / "t-0") == NEW_ID
    (stray,) = (p for p in tmp_path.iterdir() if p.name.endswith("-stray"))
    assert stray.name.startswith("t-0.")
    assert {name: (stray / name).read_bytes() for name in old_files} == old_files, "kept intact"
    assert read_topic_id(stray) == OLD_ID
    manager.shutdown(NOW)

    manager = open_manager(tmp_path)  # the next start loads the new log, not the stray one
    try:
        assert set(manager.logs) == {TP}
        assert manager.logs[TP].topic_id == NEW_ID
        assert stray.is_dir()
    finally:
        manager.shutdown(NOW)


def test_a_log_opened_with_another_id_is_refused_after_opening(tmp_path: Path) -> None:
    # A dir the manager did not load (a deletion that failed half-way, say) holds the old
    # topic's log: the check before opening sees no log, the one after must see its id.
    elsewhere = tmp_path / "elsewhere"
    manager = open_manager(elsewhere)
    rm = ReplicaManager(ME, manager)
    rm.become_leader_or_follower((dataclasses.replace(state(), topic_id=OLD_ID),), NOW, wall_ms=NOW)
    rm.append(TP, batch(b"old"), NOW)
    manager.shutdown(NOW)
    here = tmp_path / "here"
    manager = open_manager(here)
    try:
        rm = ReplicaManager(ME, manager)
        (elsewhere / "t-0").rename(here / "t-0")  # appears after the start
        recreated = dataclasses.replace(state(), topic_id=NEW_ID)
        (answer,) = rm.become_leader_or_follower((recreated,), NOW, wall_ms=NOW)
        assert answer == ("t", 0, ErrorCode.INCONSISTENT_TOPIC_ID)
        assert TP not in rm.partitions, "the old records are not served as the new topic's"
        assert read_topic_id(here / "t-0") == OLD_ID
    finally:
        manager.shutdown(NOW)
