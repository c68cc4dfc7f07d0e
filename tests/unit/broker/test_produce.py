"""broker.core.produce: what a Produce appends and what it answers, on real logs."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.core.isr import IsrCore, IsrSettings
from broker.core.produce import append_produce, produce_response
from broker.core.replica_manager import ReplicaManager
from broker.core.state import BrokerState
from broker.log.manager import LogManager
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.topic_partition import TopicPartition
from tests.unit.log.helpers import T0, make_batch


def _leader(partition: int) -> LeaderAndIsrPartitionState:
    return LeaderAndIsrPartitionState("t", partition, 1, 1, 0, (1,), 0, (1,))


@pytest.fixture
def state(tmp_path: Path) -> Iterator[BrokerState]:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(T0)
    replicas = ReplicaManager(1, manager)
    replicas.become_leader_or_follower((_leader(0), _leader(1)), T0, wall_ms=T0)
    yield BrokerState(replicas, IsrCore(1, IsrSettings(30_000, 5_000, 60_000), T0), 1)
    manager.shutdown(T0)


def _end(state: BrokerState, partition: int) -> int:
    return state.replica_manager.partitions[TopicPartition("t", partition)].log.log_end_offset


@pytest.mark.parametrize("acks", [1, -1])
def test_a_partition_named_twice_is_refused_at_every_mention_and_nothing_appended(
    state: BrokerState, acks: int
) -> None:
    """Found by the handler fuzz target: t-0 named twice, the first good and the second bad,
    was appended and then answered only with the second's error, so a client would resend
    data already stored (with both good, both answers carried the second's offset)."""
    good, bad = make_batch(3), b"\x00" * 70
    request = ProduceRequest(
        acks,
        1000,
        (
            ProduceTopicData("t", (ProducePartitionData(0, good), ProducePartitionData(1, good))),
            ProduceTopicData("t", (ProducePartitionData(0, bad),)),
        ),
    )
    append = append_produce(state, request, T0)
    answers = [
        (topic.name, p.index, p.error_code, p.base_offset)
        for topic in produce_response(request, append).responses
        for p in topic.partition_responses
    ]
    assert answers == [
        ("t", 0, ErrorCode.INVALID_REQUEST, -1),
        ("t", 1, ErrorCode.NONE, 0),
        ("t", 0, ErrorCode.INVALID_REQUEST, -1),
    ]
    assert "t-0 is named more than once" in (
        append.results[TopicPartition("t", 0)].error_message or ""
    )
    assert (_end(state, 0), _end(state, 1)) == (0, 3)
    assert list(append.waiting) == ([TopicPartition("t", 1)] if acks == -1 else [])
