"""ListOffsets and Fetch from the debug replica id (-2), with the test playing the controller
of one in-process broker (no ZooKeeper), as in test_broker_handlers.py.

Kafka serves the debugging consumer's ListOffsets from any replica (fetchOnlyFromLeader =
replicaId != DebuggingConsumerId): latest is that replica's log end offset, earliest its log
start offset. Every other replica id still needs the leader. Its Fetch reads only below the
high watermark, as any consumer's (FetchIsolation.of).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from client.network import BrokerConnection
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.list_offsets import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from tests.integration.test_broker_handlers import ME, OTHER, batch, produce, running_broker

pytestmark = pytest.mark.integration

DEBUG = -2
CONSUMER = -1


async def list_offset(
    conn: BrokerConnection,
    timestamp: int,
    replica_id: int,
    *,
    topic: str = "t",
    current_leader_epoch: int = -1,
) -> ListOffsetsPartitionResponse:
    response = await conn.request(
        ListOffsetsRequest(
            replica_id,
            (ListOffsetsTopic(topic, (ListOffsetsPartition(0, timestamp, current_leader_epoch),)),),
        )
    )
    return response.topics[0].partitions[0]  # type: ignore[no-any-return]


async def test_a_follower_answers_the_debug_id_with_its_own_offsets(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        conn = broker.conn
        await broker.lead("t", 0, epoch=0, isr=(ME,), replicas=(ME, OTHER))
        for value in (b"a", b"b", b"c"):
            answer = await conn.request(produce(batch(value)))
            assert answer.responses[0].partition_responses[0].error_code == 0
        # Leadership moves to OTHER (which only exists on paper): this broker now follows.
        await broker.lead("t", 0, epoch=1, leader=OTHER, isr=(OTHER, ME), replicas=(ME, OTHER))
        partition = broker.ctx.replica_manager.partitions[("t", 0)]
        assert not partition.is_leader

        latest = await list_offset(conn, LATEST_TIMESTAMP, DEBUG)
        earliest = await list_offset(conn, EARLIEST_TIMESTAMP, DEBUG)
        assert latest.error_code == earliest.error_code == ErrorCode.NONE
        assert latest.offset == partition.log.log_end_offset == 3
        assert earliest.offset == partition.log.log_start_offset == 0

        # Consumers (and any other replica id) still need the leader.
        for replica_id in (CONSUMER, OTHER):
            refused = await list_offset(conn, LATEST_TIMESTAMP, replica_id)
            assert refused.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER

        # The follower still fences on the leader epoch it knows.
        fenced = await list_offset(conn, LATEST_TIMESTAMP, DEBUG, current_leader_epoch=0)
        assert fenced.error_code == ErrorCode.FENCED_LEADER_EPOCH
        current = await list_offset(conn, LATEST_TIMESTAMP, DEBUG, current_leader_epoch=1)
        assert (current.error_code, current.offset) == (ErrorCode.NONE, 3)


async def test_the_leader_answers_the_debug_id_with_its_log_end_offset(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        conn = broker.conn
        await broker.lead("t", 0, isr=(ME, OTHER))  # OTHER never fetches: HW stays at 0
        answer = await conn.request(produce(batch(b"a"), acks=1))
        assert answer.responses[0].partition_responses[0].error_code == 0
        assert (await list_offset(conn, LATEST_TIMESTAMP, CONSUMER)).offset == 0  # the HW
        assert (await list_offset(conn, LATEST_TIMESTAMP, DEBUG)).offset == 1  # the LEO


async def test_the_debug_id_fetches_nothing_above_the_high_watermark(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        conn = broker.conn
        await broker.lead("t", 0, isr=(ME, OTHER))  # OTHER never fetches: HW stays at 0
        answer = await conn.request(produce(batch(b"uncommitted"), acks=1))
        assert answer.responses[0].partition_responses[0].error_code == 0
        assert (await list_offset(conn, LATEST_TIMESTAMP, DEBUG)).offset == 1  # the LEO
        for replica_id in (DEBUG, CONSUMER):
            fetched = await conn.request(
                FetchRequest(
                    replica_id, 0, 1, 1 << 20, (FetchTopic("t", (FetchPartition(0, 0, 1 << 20),)),)
                )
            )
            data = fetched.responses[0].partitions[0]
            assert (data.error_code, data.high_watermark) == (ErrorCode.NONE, 0)
            assert data.records == b"", replica_id


async def test_a_partition_not_hosted_here_is_refused_for_the_debug_id(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        await broker.lead("t", 0)
        missing = await list_offset(broker.conn, LATEST_TIMESTAMP, DEBUG, topic="nope")
        assert missing.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
