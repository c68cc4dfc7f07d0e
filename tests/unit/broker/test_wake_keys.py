"""broker.core.wake_keys: an append wakes the fetches that read to the log end, a high
watermark that moves wakes consumers' fetches and acks=all produces, and nothing else does."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.core.fetch import fetch_keys, read_fetch
from broker.core.isr import IsrCore, IsrSettings
from broker.core.partition import DEBUG_REPLICA_ID
from broker.core.produce import append_produce, check_waiting, produce_keys
from broker.core.replica_manager import ReplicaManager
from broker.core.state import BrokerState
from broker.core.wake_keys import high_watermark_key, log_end_key, partition_keys
from broker.log.config import LogConfig
from broker.log.manager import LogManager
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.topic_partition import TopicPartition
from tests.unit.log.helpers import T0, make_batch

TP = TopicPartition("t", 0)


def leader_state(directory: Path, isr: tuple[int, ...]) -> Iterator[BrokerState]:
    manager = LogManager([directory], LogConfig())
    manager.startup(T0)
    replicas = ReplicaManager(1, manager)
    replicas.become_leader_or_follower(
        (LeaderAndIsrPartitionState("t", 0, 1, 1, 0, isr, 0, (1, 2, 3)),), T0, wall_ms=T0
    )
    yield BrokerState(replicas, IsrCore(1, IsrSettings(30_000, 5_000, 60_000), T0), 1)
    manager.shutdown(T0)


@pytest.fixture
def replicated(tmp_path: Path) -> Iterator[BrokerState]:
    yield from leader_state(tmp_path, (1, 2))


@pytest.fixture
def alone(tmp_path: Path) -> Iterator[BrokerState]:
    yield from leader_state(tmp_path, (1,))


def produce(records: int) -> ProduceRequest:
    data = ProducePartitionData(0, make_batch(records))
    return ProduceRequest(-1, 1000, (ProduceTopicData("t", (data,)),))


def fetch(replica_id: int, offset: int) -> FetchRequest:
    partition = FetchPartition(0, offset, 1 << 20)
    return FetchRequest(replica_id, 500, 1, 1 << 20, (FetchTopic("t", (partition,)),))


def test_who_waits_for_what() -> None:
    assert fetch_keys(fetch(2, 0)) == [log_end_key(TP)]  # a follower reads to the log end
    assert fetch_keys(fetch(DEBUG_REPLICA_ID, 0)) == [log_end_key(TP)]
    assert fetch_keys(fetch(-1, 0)) == [high_watermark_key(TP)]  # a consumer, to the HW
    assert set(partition_keys(TP)) == {log_end_key(TP), high_watermark_key(TP)}
    assert len({log_end_key(TP), high_watermark_key(TP), TP}) == 3  # no key is another's


def test_a_replicated_append_wakes_the_followers_and_their_fetch_the_rest(
    replicated: BrokerState,
) -> None:
    append = append_produce(replicated, produce(3), T0)
    assert append.wake == [log_end_key(TP)]  # the HW waits for the follower
    assert produce_keys(append) == [high_watermark_key(TP)]
    read = read_fetch(replicated, fetch(2, 0), T0)
    assert read.total_bytes > 0 and read.wake == []  # the follower's LEO is still 0
    read = read_fetch(replicated, fetch(2, 3), T0)
    assert read.wake == [high_watermark_key(TP)]  # its LEO moved the HW
    check_waiting(replicated, append)
    assert not append.waiting
    assert read_fetch(replicated, fetch(2, 3), T0).wake == []  # the HW did not move again


def test_an_append_to_a_leader_alone_in_its_isr_wakes_both(alone: BrokerState) -> None:
    append = append_produce(alone, produce(2), T0)
    assert append.wake == [log_end_key(TP), high_watermark_key(TP)]
