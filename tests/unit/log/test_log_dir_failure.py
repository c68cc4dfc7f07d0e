"""A disk that fails (KIP-112): a write that runs out of space leaves no torn batch, the log
dir goes offline (its logs closed, no new log there, no checkpoint or clean-shutdown marker
written into it), a log that cannot be opened at start is offline alone, and the replica
manager answers KAFKA_STORAGE_ERROR for what went offline. Real files in tmp_path; the
failing writes come from a LogSegment whose writev is replaced."""

from __future__ import annotations

import errno
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.core.actions import Actions
from broker.core.controller_requests import FollowerChange
from broker.core.fetch import read_fetch
from broker.core.isr import IsrCore, IsrSettings
from broker.core.log_dir_failure import take_offline
from broker.core.replica_manager import ReplicaManager
from broker.core.state import BrokerState
from broker.log.errors import LogStorageError
from broker.log.manager import CLEAN_SHUTDOWN_FILE, RECOVERY_POINT_CHECKPOINT_FILE, LogManager
from broker.log.segment import FileSlice, LogSegment
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.records import iter_batch_headers
from protocol.topic_partition import TopicPartition
from tests.unit.log.helpers import T0, make_batch, open_log

TP = TopicPartition("t", 0)


@pytest.fixture
def full_disk(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[int]]:
    """While the list holds True, every segment write writes part of its batch and then fails
    with ENOSPC, as a write that runs out of space does."""
    full: list[int] = []

    def writev(self: LogSegment, fd: int, parts: tuple[bytes | memoryview, ...]) -> int:
        if not full:
            return os.writev(fd, parts)
        data = b"".join(parts)
        os.write(fd, data[: len(data) // 2])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(LogSegment, "_writev", writev)
    yield full


def whole_batches_only(path: Path) -> int:
    return sum(1 for _ in iter_batch_headers(path.read_bytes()))


def test_a_write_that_runs_out_of_space_is_cut_and_the_log_still_appends(
    tmp_path: Path, full_disk: list[int]
) -> None:
    log = open_log(tmp_path / "t-0")
    log.append_as_leader(make_batch(2), 0, T0)
    size = log.active_segment.size
    full_disk.append(1)
    with pytest.raises(OSError, match="No space left"):
        log.append_as_leader(make_batch(3, tag=1), 0, T0)
    assert log.active_segment.log_path.stat().st_size == size  # the half batch is gone
    assert log.log_end_offset == 2
    full_disk.clear()  # (a log dir goes offline on the first failure; the Log itself is fine)
    assert log.append_as_leader(make_batch(1, tag=2), 0, T0).first_offset == 2
    assert whole_batches_only(log.active_segment.log_path) == 2
    log.close()


def test_a_failed_dir_goes_offline_and_nothing_more_is_written_there(
    tmp_path: Path, full_disk: list[int]
) -> None:
    bad, good = tmp_path / "bad", tmp_path / "good"
    manager = LogManager([bad, good], LogConfig())
    manager.startup(T0)
    seen: list[list[TopicPartition]] = []
    manager.on_offline = seen.append
    logs = {tp: manager.get_or_create_log(tp, T0) for tp in (TP, TopicPartition("t", 1))}
    assert {manager.dir_of(tp) for tp in logs} == {bad, good}
    on_bad = next(tp for tp in logs if manager.dir_of(tp) == bad)
    full_disk.append(1)
    with pytest.raises(OSError):
        logs[on_bad].append_as_leader(make_batch(1), 0, T0)
    gone = manager.fail_dir(bad, "No space left on device")
    assert gone == [on_bad] and seen == [[on_bad]]
    assert on_bad not in manager.logs and on_bad in manager.offline_logs
    assert "log dir" in manager.offline_logs[on_bad] and str(bad) in manager.offline_logs[on_bad]
    assert manager.fail_dir(bad, "again") == []  # once
    with pytest.raises(LogStorageError):
        manager.get_or_create_log(on_bad, T0)  # an offline partition is not created again
    full_disk.clear()
    manager.get_or_create_log(TopicPartition("u", 0), T0)
    assert manager.dir_of(TopicPartition("u", 0)) == good
    before = (bad / RECOVERY_POINT_CHECKPOINT_FILE).read_bytes()
    manager.shutdown(T0)
    assert (bad / RECOVERY_POINT_CHECKPOINT_FILE).read_bytes() == before
    assert not (bad / CLEAN_SHUTDOWN_FILE).exists()  # recovered at the next start
    assert (good / CLEAN_SHUTDOWN_FILE).exists()


def test_a_periodic_write_that_fails_takes_its_dir_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    manager.get_or_create_log(TP, T0).append_as_leader(make_batch(1), 0, T0)

    def fail(*_: object) -> None:
        raise OSError(errno.EIO, "Input/output error")

    monkeypatch.setattr("broker.log.checkpoints.OffsetCheckpointFile.write", fail)
    manager.checkpoint(T0)  # no exception: the dir is offline instead
    assert manager.offline_dirs.keys() == {tmp_path}
    assert TP in manager.offline_logs and not manager.logs
    manager.shutdown(T0)


def test_a_log_that_cannot_be_opened_at_start_is_offline_alone(tmp_path: Path) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    for tp in (TP, TopicPartition("t", 1)):
        manager.get_or_create_log(tp, T0).append_as_leader(make_batch(1), 0, T0)
    manager.shutdown(T0)
    segment = tmp_path / "t-0" / "00000000000000000000.log"
    segment.unlink()
    segment.mkdir()  # a file that cannot be opened, even by root
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    assert list(manager.offline_logs) == [TP]
    assert "Is a directory" in manager.offline_logs[TP]
    assert list(manager.logs) == [TopicPartition("t", 1)]
    assert not manager.offline_dirs
    manager.shutdown(T0)


def leader_state(topic: str = "t", partition: int = 0) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        topic_name=topic,
        partition_index=partition,
        controller_epoch=1,
        leader=1,
        leader_epoch=0,
        isr=(1,),
        partition_epoch=0,
        replicas=(1,),
    )


def test_the_replica_manager_answers_kafka_storage_error_for_offline_partitions(
    tmp_path: Path, full_disk: list[int]
) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    replicas = ReplicaManager(1, manager)
    woken: list[int] = []
    replicas.on_offline = lambda: woken.append(1)
    replicas.become_leader_or_follower((leader_state(), leader_state("t", 1)), T0, wall_ms=T0)
    assert replicas.append(TP, make_batch(1), T0).error_code == ErrorCode.NONE
    full_disk.append(1)
    result = replicas.append(TP, make_batch(1, tag=1), T0)
    assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR
    assert result.error_code.retriable
    assert "No space left on device" in (result.error_message or "")
    assert woken == [1]
    assert sorted(replicas.take_offline()) == [TP, TopicPartition("t", 1)]  # the whole dir
    assert replicas.take_offline() == []
    assert not replicas.partitions
    full_disk.clear()
    again = replicas.append(TP, make_batch(1, tag=2), T0)
    assert again.error_code == ErrorCode.KAFKA_STORAGE_ERROR  # offline until a restart
    (answer,) = replicas.become_leader_or_follower((leader_state(),), T0, wall_ms=T0)
    assert answer == ("t", 0, ErrorCode.KAFKA_STORAGE_ERROR)
    manager.shutdown(T0)
    assert whole_batches_only(tmp_path / "t-0" / "00000000000000000000.log") == 1


def test_a_read_that_fails_takes_only_that_partition_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    replicas = ReplicaManager(1, manager)
    replicas.become_leader_or_follower((leader_state(), leader_state("t", 1)), T0, wall_ms=T0)
    replicas.append(TP, make_batch(1), T0)
    error = replicas.storage_failed(TP, OSError(errno.EIO, "Input/output error"), write=False)
    assert error.code == ErrorCode.KAFKA_STORAGE_ERROR
    assert "t-0" in str(error) and "Input/output error" in str(error)
    assert list(replicas.offline) == [TP]
    assert list(replicas.partitions) == [TopicPartition("t", 1)]
    assert not manager.offline_dirs
    manager.shutdown(T0)


def test_a_fetch_whose_segment_read_fails_answers_kafka_storage_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    replicas = ReplicaManager(1, manager)
    replicas.become_leader_or_follower((leader_state(), leader_state("t", 1)), T0, wall_ms=T0)
    for tp in (TP, TopicPartition("t", 1)):
        replicas.append(tp, make_batch(1), T0)
    state = BrokerState(replicas, IsrCore(1, IsrSettings(30_000, 5_000, 60_000), T0), 1)

    def unreadable(self: FileSlice) -> bytes:
        if "t-0" in os.readlink(f"/proc/self/fd/{self.fd}"):
            raise OSError(errno.EIO, "Input/output error")
        return os.pread(self.fd, self.length, self.position)

    monkeypatch.setattr(FileSlice, "read", unreadable)
    parts = tuple(FetchPartition(p, 0, 1 << 20) for p in (0, 1))
    read = read_fetch(state, FetchRequest(-1, 0, 1, 1 << 20, (FetchTopic("t", parts),)), T0)
    first, second = read.response.responses[0].partitions
    assert first.error_code == ErrorCode.KAFKA_STORAGE_ERROR and first.records == b""
    assert second.error_code == ErrorCode.NONE and second.records
    assert list(replicas.offline) == [TP]
    manager.shutdown(T0)


def test_running_out_of_descriptors_takes_nothing_offline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """EMFILE is the process's trouble, not the disk's: the client gets a retriable error,
    housekeeping retries at its next interval, and nothing goes offline."""
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    replicas = ReplicaManager(1, manager)
    replicas.become_leader_or_follower((leader_state(),), T0, wall_ms=T0)

    def out_of_descriptors(self: LogSegment, fd: int, parts: object) -> int:
        raise OSError(errno.EMFILE, "Too many open files")

    with monkeypatch.context() as patched:
        patched.setattr(LogSegment, "_writev", out_of_descriptors)
        result = replicas.append(TP, make_batch(1), T0)
        assert result.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        assert "not a disk failure" in (result.error_message or "")
        patched.setattr(
            "broker.log.checkpoints.OffsetCheckpointFile.write",
            lambda *_: out_of_descriptors(None, 0, ()),  # type: ignore[arg-type]
        )
        with pytest.raises(OSError, match="Too many open files"):
            manager.checkpoint(T0)  # housekeeping logs it and tries again later
    assert not manager.offline_dirs and not replicas.offline
    assert replicas.append(TP, make_batch(1), T0).error_code == ErrorCode.NONE
    manager.shutdown(T0)


def test_a_dir_that_cannot_open_is_offline_unless_every_dir_failed(tmp_path: Path) -> None:
    """As Kafka's LogManager: a broker starts with the dirs that open, and not at all when
    none does (the start-up error names each dir)."""
    good, bad = tmp_path / "good", tmp_path / "a-file"
    bad.write_text("")
    manager = LogManager([good, bad / "data"], LogConfig())
    manager.startup(T0)
    assert manager.online_dirs() == [good]
    assert str(bad / "data") in manager.offline_dirs[bad / "data"]
    manager.shutdown(T0)
    with pytest.raises(LogStorageError, match="Not a directory"):
        LogManager([bad / "data"], LogConfig()).startup(T0)


def test_offline_partitions_are_stopped_woken_and_registered_in_one_decision(
    tmp_path: Path, full_disk: list[int]
) -> None:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    replicas = ReplicaManager(1, manager)
    replicas.become_leader_or_follower((leader_state(), leader_state("t", 1)), T0, wall_ms=T0)
    assert take_offline(replicas) is None
    full_disk.append(1)
    replicas.append(TP, make_batch(1), T0)
    offline = take_offline(replicas)
    assert offline is not None
    both = [TP, TopicPartition("t", 1)]
    assert sorted(offline.gone) == offline.registered == both
    assert offline.actions == Actions(
        complete_keys=offline.gone,
        follower_changes=[FollowerChange(tp) for tp in offline.gone],
        group_resync=True,
    )
    assert take_offline(replicas) is None  # taken once
    full_disk.clear()
    manager.shutdown(T0)
