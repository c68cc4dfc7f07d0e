"""A replica's idempotent-producer state across leader changes: a leader deposed without
hearing of it, a deposed leader that follows (truncating or not, its state rebuilt from an
older snapshot after a crash) and then leads again.

Real `broker.log.Log`s in tmp_path, one per broker, moved between them by the partitions'
own read and follower-append paths.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.core.partition import Partition
from broker.log.log import Log
from protocol.errors import ErrorCode, HighwaterError
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.records import Record, build_batch

ME = 2  # the replica under test: leads, is deposed, follows, leads again
OTHER = 3
PID = 0
NOW = 1_700_000_000_000
REPLICAS = (ME, OTHER)


def leads(leader: int, epoch: int) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState(
        topic_name="t",
        partition_index=0,
        controller_epoch=1,
        leader=leader,
        leader_epoch=epoch,
        isr=REPLICAS,
        partition_epoch=epoch,
        replicas=REPLICAS,
    )


def idem(seq: int) -> bytes:
    """One record of producer PID (epoch 0) with sequence `seq`."""
    record = Record(f"s{seq}".encode(), timestamp_ms=NOW + seq)
    return build_batch([record], producer_id=PID, producer_epoch=0, base_sequence=seq, now_ms=NOW)


def produce(partition: Partition, first: int, last: int) -> None:
    for seq in range(first, last + 1):
        assert not partition.append_as_leader(idem(seq), NOW).duplicate


def replicate(leader: Partition, follower: Partition) -> None:
    """One follower fetch from its LEO to the leader's LEO (the replica fetcher's append)."""
    data = leader.read(follower.log_end_offset, 1 << 20, replica_id=ME, min_one_batch=True)
    follower.append_as_follower(data.data.read(), data.high_watermark, NOW)


def refusal(partition: Partition, seq: int) -> HighwaterError:
    with pytest.raises(HighwaterError) as caught:
        partition.append_as_leader(idem(seq), NOW)
    return caught.value


@pytest.fixture
def other(tmp_path: Path) -> Iterator[Partition]:
    log = Log.open(tmp_path / "b3" / "t-0", LogConfig(), now_ms=NOW)
    yield Partition("t", 0, OTHER, log)
    log.close()


def test_a_deposed_leader_that_has_not_heard_refuses_the_next_sequence(
    tmp_path: Path, other: Partition
) -> None:
    """What a producer meets at a leader cut off from ZooKeeper (and so from its demotion):
    its producer state is right for its own log, which the new leader has outgrown."""
    me = Partition("t", 0, ME, Log.open(tmp_path / "b2" / "t-0", LogConfig(), now_ms=NOW))
    other.apply_state(leads(OTHER, 226), NOW)
    me.apply_state(leads(OTHER, 226), NOW)
    produce(other, 0, 9)
    replicate(other, me)
    me.apply_state(leads(ME, 227), NOW)  # then cut off: 228 elects OTHER without telling ME
    other.apply_state(leads(OTHER, 228), NOW)
    produce(other, 10, 19)
    error = refusal(me, 20)
    assert error.code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    assert "sequence 20 does not follow the last sequence 9" in str(error)
    me.log.close()


@pytest.mark.parametrize("own_tail", [False, True], ids=["no-tail", "divergent-tail"])
@pytest.mark.parametrize("crashed", [False, True], ids=["running", "restarted-unclean"])
def test_a_deposed_leader_follows_and_leads_again_with_the_new_leaders_sequences(
    tmp_path: Path, other: Partition, own_tail: bool, crashed: bool
) -> None:
    """The replica's producer state after: a crash (state from an older snapshot plus the
    log), leading an epoch, being deposed (truncating its own tail or not), following."""
    directory = tmp_path / "b2" / "t-0"
    log = Log.open(directory, LogConfig(), now_ms=NOW)
    me = Partition("t", 0, ME, log)
    other.apply_state(leads(OTHER, 225), NOW)
    me.apply_state(leads(OTHER, 225), NOW)
    produce(other, 0, 4)
    replicate(other, me)
    log.close()  # a clean restart: a snapshot at offset 5
    log = Log.open(directory, LogConfig(), now_ms=NOW)
    me = Partition("t", 0, ME, log)
    me.apply_state(leads(OTHER, 226), NOW)
    other.apply_state(leads(OTHER, 226), NOW)
    produce(other, 5, 9)
    replicate(other, me)
    if crashed:  # killed: the snapshot at 5 and a replay of 5-9 rebuild the state
        log.close_files()
        log = Log.open(directory, LogConfig(), now_ms=NOW, recovery_point=5, clean_shutdown=False)
        me = Partition("t", 0, ME, log)
        me.apply_state(leads(OTHER, 226), NOW)
    me.apply_state(leads(ME, 227), NOW)
    if own_tail:
        produce(me, 10, 10)  # appended in 227, never replicated: OTHER gets 10 again in 228
    other.apply_state(leads(OTHER, 228), NOW)
    me.apply_state(leads(OTHER, 228), NOW)
    me.truncate_to(10)  # KIP-101: where epoch 227 (ME's latest) ends on OTHER
    assert me.log_end_offset == 10
    assert me.log.producer_state.producers[PID].last_seq == 9
    produce(other, 10, 19)
    replicate(other, me)
    assert me.log_end_offset == other.log_end_offset == 20
    me.apply_state(leads(ME, 229), NOW)
    retry = me.append_as_leader(idem(19), NOW)  # its ack was lost with OTHER
    assert retry.duplicate and retry.first_offset == 19
    assert me.append_as_leader(idem(20), NOW).first_offset == 20
    assert refusal(me, 22).code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    log.close()
