"""A fetch session opened by topic id (KIP-516, Fetch v13+) keeps the id of each partition,
and every read checks it against the log's: a topic deleted and created again under the
same name is answered INCONSISTENT_TOPIC_ID, never read as the old one (Kafka's
ReplicaManager.readFromLog, sessions keyed by TopicIdPartition). Real logs in tmp_path."""

from __future__ import annotations

import dataclasses
import logging
import uuid
from pathlib import Path

import pytest
import structlog

from broker.config.log_config import LogConfig
from broker.core.fetch import read_fetch
from broker.core.fetch_session import FetchSessionCache, answer_fetch, open_fetch
from broker.core.isr import IsrCore, IsrSettings
from broker.core.replica_manager import ReplicaManager
from broker.core.state import BrokerState
from broker.log.manager import LogManager
from protocol.errors import ErrorCode
from protocol.messages.fetch import INITIAL_EPOCH, FetchPartition, FetchRequest, FetchTopic
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.records import Record, build_batch
from protocol.topic_id import from_uuid
from protocol.topic_partition import TopicPartition

NOW_MS = 1_700_000_000_000
ME = 1
TP = TopicPartition("t", 0)
ID_A = from_uuid(uuid.UUID(int=10))
ID_B = from_uuid(uuid.UUID(int=11))


@pytest.fixture(autouse=True)
def _quiet() -> None:
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.WARNING))


def lead(state: BrokerState, topic_id: str, epoch: int) -> None:
    given = LeaderAndIsrPartitionState(
        topic_name=TP.topic,
        partition_index=TP.partition,
        controller_epoch=1,
        leader=ME,
        leader_epoch=epoch,
        isr=(ME,),
        partition_epoch=0,
        replicas=(ME,),
        topic_id=topic_id,
    )
    assert state.replica_manager.become_leader_or_follower((given,), NOW_MS, wall_ms=NOW_MS) == [
        (*TP, ErrorCode.NONE)
    ]
    batch = build_batch([Record(f"{topic_id}-record".encode())], now_ms=NOW_MS)
    assert state.replica_manager.append(TP, batch, NOW_MS).error_code == ErrorCode.NONE


def test_an_incremental_fetch_of_a_recreated_topic_answers_inconsistent_topic_id(
    tmp_path: Path,
) -> None:
    logs = LogManager([tmp_path], LogConfig())
    logs.startup(NOW_MS)
    state = BrokerState(
        ReplicaManager(ME, logs), IsrCore(ME, IsrSettings(30_000, 5_000, 60_000), NOW_MS), 1
    )
    try:
        lead(state, ID_A, epoch=0)
        cache = FetchSessionCache(max_slots=10)
        # The full fetch as resolve_topic_ids leaves it: the name, and the id it was asked by.
        full = FetchRequest(
            -1,
            0,
            1,
            1 << 20,
            (FetchTopic("t", (FetchPartition(0, 0, 1 << 20),), topic_id=ID_A),),
            session_epoch=INITIAL_EPOCH,
        )
        opened = open_fetch(cache, full, NOW_MS)
        assert opened.session is not None
        first = answer_fetch(opened, read_fetch(state, opened.request, NOW_MS).response)
        (was,) = (p for t in first.responses for p in t.partitions)
        assert (was.error_code, bool(was.records)) == (ErrorCode.NONE, True)

        # The topic is deleted and created again (id B) while the consumer's session lives.
        state.replica_manager.stop_replica(TP, delete=True)
        lead(state, ID_B, epoch=1)
        assert state.replica_manager.partitions[TP].log.topic_id == ID_B

        incremental = dataclasses.replace(
            full, topics=(), session_id=opened.session.session_id, session_epoch=1
        )
        context = open_fetch(cache, incremental, NOW_MS)
        assert context.error == ErrorCode.NONE and context.incremental
        read = read_fetch(state, context.request, NOW_MS)
        answer = answer_fetch(context, read.response)
        (partition,) = (p for t in answer.responses for p in t.partitions)
        assert partition.error_code == ErrorCode.INCONSISTENT_TOPIC_ID
        assert partition.records == b"", "the new topic's records are not read as the old one's"
        assert read.has_error, "a delayed fetch answers at once"
    finally:
        logs.shutdown(NOW_MS)
