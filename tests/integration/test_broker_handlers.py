"""The broker's request handlers on real sockets, with the test playing the controller.

No ZooKeeper: each test starts an in-process broker, sends LeaderAndIsr + UpdateMetadata for
the partitions it needs, then drives Produce/Fetch/ListOffsets/OffsetForLeaderEpoch through
client.network (or a raw stream, for pipelining) and checks what comes back.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest
import trio
import trio.testing

from broker.config.broker_config import load_config
from broker.context import BrokerContext
from broker.core.replica_manager import ReplicaManager
from broker.log.manager import LogManager
from broker.server import BrokerServer
from client.network import BrokerConnection, BrokerConnectionError, connect
from protocol.client_protocol import ClientProtocol, ReceivedResponse
from protocol.errors import ErrorCode
from protocol.framing import NEED_DATA
from protocol.messages.common import BrokerEndpoint
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest, MetadataResponse
from protocol.messages.offset_for_leader_epoch import (
    OffsetForLeaderEpochPartition,
    OffsetForLeaderEpochPartitionResult,
    OffsetForLeaderEpochRequest,
    OffsetForLeaderEpochTopic,
)
from protocol.messages.produce import (
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from protocol.messages.stop_replica import (
    StopReplicaPartitionState,
    StopReplicaRequest,
    StopReplicaTopicState,
)
from protocol.messages.update_metadata import UpdateMetadataPartitionState, UpdateMetadataRequest
from protocol.records import Record, build_batch, decode_batches
from protocol.topic_partition import TopicPartition

pytestmark = pytest.mark.integration

ME = 1
OTHER = 2  # a follower that exists only on paper: it never fetches
CONTROLLER_EPOCH = 1


@dataclass
class Broker:
    server: BrokerServer
    ctx: BrokerContext
    conn: BrokerConnection
    endpoint: BrokerEndpoint

    async def lead(
        self,
        topic: str = "t",
        partition: int = 0,
        *,
        epoch: int = 0,
        isr: tuple[int, ...] = (ME,),
        leader: int = ME,
        replicas: tuple[int, ...] = (),
    ) -> None:
        """Play the controller: LeaderAndIsr, then UpdateMetadata, for one partition."""
        replicas = replicas or tuple(sorted({ME, *isr}))
        state = dict(
            topic_name=topic,
            partition_index=partition,
            controller_epoch=CONTROLLER_EPOCH,
            leader=leader,
            leader_epoch=epoch,
            isr=isr,
            partition_epoch=0,
            replicas=replicas,
        )
        lai = await self.conn.request(
            LeaderAndIsrRequest(
                ME,
                CONTROLLER_EPOCH,
                0,
                (LeaderAndIsrPartitionState(**state),),  # type: ignore[arg-type]
                (self.endpoint,),
            )
        )
        assert lai.error_code == 0 and lai.partition_errors[0].error_code == 0
        um = await self.conn.request(
            UpdateMetadataRequest(
                ME,
                CONTROLLER_EPOCH,
                0,
                (UpdateMetadataPartitionState(**state),),  # type: ignore[arg-type]
                (self.endpoint, BrokerEndpoint(OTHER, "127.0.0.1", 1)),
            )
        )
        assert um.error_code == 0

    async def connect(self) -> BrokerConnection:
        return await connect("127.0.0.1", self.server.port)


@asynccontextmanager
async def running_broker(tmp_path: Path, overrides: Sequence[str] = ()) -> AsyncIterator[Broker]:
    config = load_config(
        None,
        [f"broker.id={ME}", "zookeeper.connect=127.0.0.1:1", f"log.dirs={tmp_path}", *overrides],
    )
    log_manager = LogManager([tmp_path], config.log_config())
    log_manager.startup(0)
    ctx = BrokerContext(config, ReplicaManager(ME, log_manager))
    ctx.broker_epoch = 0  # as if registered: a broker takes controller requests only then
    server = BrokerServer(ctx, "127.0.0.1", 0, config.socket_request_max_bytes)
    try:
        async with trio.open_nursery() as nursery:
            port = await nursery.start(server.run)
            conn = await connect("127.0.0.1", port)
            yield Broker(server, ctx, conn, BrokerEndpoint(ME, "127.0.0.1", port))
            await conn.aclose()
            with trio.move_on_after(15):
                await server.stop()
            nursery.cancel_scope.cancel()
    finally:
        log_manager.shutdown(0)


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[Broker]:
    async with running_broker(tmp_path) as b:
        await b.lead("t", 0)
        yield b


# -- request builders ----------------------------------------------------------------------


def batch(*values: bytes, now_ms: int = 1000) -> bytes:
    return build_batch([Record(v) for v in values], now_ms=now_ms)


def produce(
    records: bytes,
    topic: str = "t",
    partition: int = 0,
    *,
    acks: int = 1,
    timeout_ms: int = 5000,
) -> ProduceRequest:
    return ProduceRequest(
        acks, timeout_ms, (ProduceTopicData(topic, (ProducePartitionData(partition, records),)),)
    )


def produce_result(response: ProduceResponse) -> ProducePartitionResponse:
    return response.responses[0].partition_responses[0]


def fetch(
    offset: int = 0,
    topic: str = "t",
    partition: int = 0,
    *,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    current_leader_epoch: int = -1,
    replica_id: int = -1,
) -> FetchRequest:
    return FetchRequest(
        replica_id,
        max_wait_ms,
        min_bytes,
        max_bytes,
        (
            FetchTopic(
                topic,
                (FetchPartition(partition, offset, partition_max_bytes, current_leader_epoch),),
            ),
        ),
    )


def values(records: bytes) -> list[bytes | None]:
    return [r.value for b in decode_batches(records) for r in b.records]


async def list_offset(
    conn: BrokerConnection,
    timestamp: int,
    *,
    replica_id: int = -1,
    current_leader_epoch: int = -1,
) -> ListOffsetsPartitionResponse:
    response = await conn.request(
        ListOffsetsRequest(
            replica_id,
            (ListOffsetsTopic("t", (ListOffsetsPartition(0, timestamp, current_leader_epoch),)),),
        )
    )
    return response.topics[0].partitions[0]  # type: ignore[no-any-return]


# -- ListOffsets ----------------------------------------------------------------------------


async def test_list_offsets_by_timestamp(broker: Broker) -> None:
    conn = broker.conn
    for ts in (1000, 2000, 3000):  # offsets 0, 1, 2: one batch each
        assert produce_result(await conn.request(produce(batch(b"v", now_ms=ts)))).error_code == 0
    # offsets 3, 4, 5 in one batch, with distinct per-record timestamps
    mixed = build_batch(
        [
            Record(b"x", timestamp_ms=4000),
            Record(b"y", timestamp_ms=5000),
            Record(b"z", timestamp_ms=6000),
        ],
        now_ms=9999,
    )
    assert produce_result(await conn.request(produce(mixed))).base_offset == 3

    expected = {
        0: (0, 1000),
        1000: (0, 1000),
        1001: (1, 2000),
        2500: (2, 3000),
        3000: (2, 3000),
        3001: (3, 4000),
        4500: (4, 5000),
        6000: (5, 6000),
    }
    for query, (offset, timestamp) in expected.items():
        found = await list_offset(conn, query)
        assert found.error_code == 0
        assert (found.offset, found.timestamp) == (offset, timestamp), query
        assert found.leader_epoch == 0
    none = await list_offset(conn, 6001)
    assert (none.error_code, none.offset, none.timestamp) == (0, -1, -1)
    latest = await list_offset(conn, -1)
    earliest = await list_offset(conn, -2)
    assert (latest.offset, earliest.offset) == (6, 0)


async def test_list_offsets_max_timestamp(broker: Broker) -> None:
    """-3 (MAX_TIMESTAMP, KIP-734): the offset of the record with the largest timestamp, not
    the base offset of its batch; the first such record when several share it."""
    conn = broker.conn
    await conn.request(produce(batch(b"a", now_ms=5000)))  # offset 0
    three = [Record(b"x", timestamp_ms=t) for t in (4000, 9000, 6000, 9000)]  # offsets 1-4
    await conn.request(produce(build_batch(three)))
    await conn.request(produce(batch(b"c", now_ms=7000)))  # offset 5
    found = await list_offset(conn, -3)
    assert found.error_code == 0
    assert (found.offset, found.timestamp) == (2, 9000)
    assert found.leader_epoch == 0
    await conn.request(produce(batch(b"d", now_ms=9000)))  # a tie in a later batch: not it
    assert (await list_offset(conn, -3)).offset == 2


async def test_list_offsets_max_timestamp_sees_only_committed(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        conn = broker.conn
        await broker.lead("t", 0)
        await conn.request(produce(build_batch([Record(b"a", timestamp_ms=t) for t in (1, 3, 2)])))
        await broker.lead("t", 0, epoch=1, isr=(ME, OTHER))  # OTHER never fetches: HW stays 3
        timed_out = await conn.request(produce(batch(b"later", now_ms=50), acks=-1, timeout_ms=50))
        assert produce_result(timed_out).error_code == ErrorCode.REQUEST_TIMED_OUT
        committed = await list_offset(conn, -3)
        assert (committed.offset, committed.timestamp) == (1, 3)
        debug = await list_offset(conn, -3, replica_id=-2)  # sees up to the LEO
        assert (debug.offset, debug.timestamp) == (3, 50)


async def test_list_offsets_consumer_sees_only_committed(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        await broker.lead("t", 0, isr=(ME, OTHER))
        conn = broker.conn
        result = produce_result(
            await conn.request(produce(batch(b"a", now_ms=5000), acks=-1, timeout_ms=100))
        )
        assert result.error_code == ErrorCode.REQUEST_TIMED_OUT
        assert (await list_offset(conn, -1)).offset == 0  # consumer: the HW
        assert (await list_offset(conn, 5000)).offset == -1  # not committed yet
        debug_latest = await list_offset(conn, -1, replica_id=-2)
        assert debug_latest.offset == 1  # the debug id sees the LEO
        assert (await list_offset(conn, 5000, replica_id=-2)).offset == 0


async def test_list_offsets_by_timestamp_over_an_undecodable_batch(broker: Broker) -> None:
    """A batch with a valid CRC but a malformed record (an int key) is refused by the leader;
    one already stored (an older version wrote it: here a follower append) makes a timestamp
    lookup that decodes it answer with CORRUPT_MESSAGE, not kill the connection."""
    conn = broker.conn
    bad = build_batch([Record(b"v", key=123, timestamp_ms=5000)], now_ms=5000)  # type: ignore[arg-type]
    refused = produce_result(await conn.request(produce(bad)))
    assert refused.error_code == ErrorCode.CORRUPT_MESSAGE
    assert "key and value must be bin or nil" in (refused.error_message or "")
    assert (await list_offset(conn, -1)).offset == 0  # nothing appended
    log = broker.ctx.replica_manager.partitions[TopicPartition("t", 0)].log
    log.append_as_follower(bad, 0)
    with trio.fail_after(5):
        for timestamp in (1000, -3):
            found = await list_offset(conn, timestamp, replica_id=-2)
            assert found.error_code == ErrorCode.CORRUPT_MESSAGE
    assert not conn.broken


async def test_list_offsets_leader_epoch_is_the_epoch_of_the_batch_found(broker: Broker) -> None:
    """docs/protocol.md: `leader_epoch` is the epoch of the batch that holds `offset` (as in
    Kafka, so a consumer can validate its position), not the partition's current epoch."""
    conn = broker.conn
    await broker.lead("t", 0, epoch=3)
    await conn.request(produce(batch(b"old", now_ms=1000)))
    await broker.lead("t", 0, epoch=5)
    await conn.request(produce(batch(b"new", now_ms=2000)))
    old = await list_offset(conn, 1000)
    new = await list_offset(conn, 1500)
    assert (old.offset, new.offset) == (0, 1)
    assert new.leader_epoch == 5
    assert old.leader_epoch == 3


async def test_list_offsets_errors(broker: Broker) -> None:
    conn = broker.conn
    await broker.lead("t", 0, epoch=4)
    assert (await list_offset(conn, -1, current_leader_epoch=3)).error_code == 74
    assert (await list_offset(conn, -1, current_leader_epoch=5)).error_code == 75
    assert (await list_offset(conn, -1, current_leader_epoch=4)).error_code == 0
    unknown = await conn.request(
        ListOffsetsRequest(-1, (ListOffsetsTopic("nope", (ListOffsetsPartition(0, -1),)),))
    )
    assert unknown.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


# -- Fetch ------------------------------------------------------------------------------------


async def test_fetch_min_bytes_waits_for_max_wait_then_returns_what_there_is(
    broker: Broker,
) -> None:
    conn = broker.conn
    await conn.request(produce(batch(b"small")))
    start = trio.current_time()
    with trio.fail_after(10):
        response = await conn.request(fetch(0, max_wait_ms=600, min_bytes=1 << 20))
    elapsed = trio.current_time() - start
    data = response.responses[0].partitions[0]
    assert data.error_code == 0
    assert values(data.records) == [b"small"]
    assert 0.55 <= elapsed < 5, elapsed


async def test_fetch_min_bytes_met_by_a_later_produce_returns_early(broker: Broker) -> None:
    conn = broker.conn
    other = await broker.connect()
    first = batch(b"x" * 100)
    await conn.request(produce(first))
    got: list[FetchResponse] = []

    async def poll() -> None:
        got.append(await other.request(fetch(0, max_wait_ms=20_000, min_bytes=len(first) + 1)))

    start = trio.current_time()
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(0.3)
            assert got == []  # min_bytes not yet met
            await conn.request(produce(batch(b"y" * 100)))
    assert trio.current_time() - start < 5
    assert values(got[0].responses[0].partitions[0].records) == [b"x" * 100, b"y" * 100]
    await other.aclose()


async def test_fetch_max_bytes_below_one_batch_returns_one_whole_batch(tmp_path: Path) -> None:
    """KIP-74: the first partition with data gets one whole batch even if over the limits;
    later partitions get nothing once the response limit is used up."""
    async with running_broker(tmp_path) as broker:
        await broker.lead("t", 0)
        await broker.lead("t", 1)
        conn = broker.conn
        big0 = batch(b"a" * 1000, b"b" * 1000)
        big1 = batch(b"c" * 1000)
        await conn.request(produce(big0, partition=0))
        await conn.request(produce(batch(b"d"), partition=0))
        await conn.request(produce(big1, partition=1))
        request = FetchRequest(
            -1,
            0,
            1,
            100,  # max_bytes: far below one batch
            (FetchTopic("t", (FetchPartition(0, 0, 50), FetchPartition(1, 0, 50))),),
        )
        response = await conn.request(request)
        p0, p1 = response.responses[0].partitions
        assert p0.error_code == 0 and p1.error_code == 0
        # Exactly one whole batch, not two, not a fragment.
        assert len(p0.records) == len(big0)
        assert values(p0.records) == [b"a" * 1000, b"b" * 1000]
        assert p1.records == b""
        assert (p0.high_watermark, p1.high_watermark) == (3, 1)


async def test_fetch_partition_max_bytes_below_one_batch(broker: Broker) -> None:
    big = batch(b"z" * 5000)
    await broker.conn.request(produce(big))
    response = await broker.conn.request(fetch(0, partition_max_bytes=10))
    records = response.responses[0].partitions[0].records
    assert len(records) == len(big) and values(records) == [b"z" * 5000]


async def test_fetch_multiple_partitions_and_topics(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        for topic, partition in (("t", 0), ("t", 1), ("u", 0)):
            await broker.lead(topic, partition)
        conn = broker.conn
        await conn.request(produce(batch(b"t0-a", b"t0-b"), "t", 0))
        await conn.request(produce(batch(b"t1-a"), "t", 1))
        await conn.request(produce(batch(b"u0-a", b"u0-b", b"u0-c"), "u", 0))
        request = FetchRequest(
            -1,
            0,
            1,
            1 << 20,
            (
                FetchTopic(
                    "t",
                    (FetchPartition(1, 0, 1 << 20), FetchPartition(0, 1, 1 << 20)),
                ),
                FetchTopic("u", (FetchPartition(0, 0, 1 << 20), FetchPartition(7, 0, 1000))),
            ),
        )
        response = await conn.request(request)
        assert [t.topic for t in response.responses] == ["t", "u"]
        t1, t0 = response.responses[0].partitions
        u0, u7 = response.responses[1].partitions
        assert (t1.partition_index, t0.partition_index) == (1, 0)
        assert values(t1.records) == [b"t1-a"] and t1.high_watermark == 1
        # Fetching from offset 1 returns the whole batch holding it (clients skip offset 0).
        assert values(t0.records) == [b"t0-a", b"t0-b"] and t0.high_watermark == 2
        assert values(u0.records) == [b"u0-a", b"u0-b", b"u0-c"] and u0.high_watermark == 3
        assert u7.partition_index == 7
        assert u7.error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION and u7.records == b""


async def test_fetch_leader_epoch_fencing(broker: Broker) -> None:
    conn = broker.conn
    await broker.lead("t", 0, epoch=7)
    await conn.request(produce(batch(b"a")))
    with trio.fail_after(5):  # an error answers at once, whatever max_wait_ms says
        older = await conn.request(fetch(0, current_leader_epoch=6, max_wait_ms=30_000))
        newer = await conn.request(fetch(0, current_leader_epoch=8, max_wait_ms=30_000))
    assert older.responses[0].partitions[0].error_code == ErrorCode.FENCED_LEADER_EPOCH == 74
    assert newer.responses[0].partitions[0].error_code == ErrorCode.UNKNOWN_LEADER_EPOCH == 75
    assert older.responses[0].partitions[0].records == b""
    same = await conn.request(fetch(0, current_leader_epoch=7))
    assert same.responses[0].partitions[0].error_code == 0
    assert values(same.responses[0].partitions[0].records) == [b"a"]


async def test_fetch_from_a_follower_is_not_leader(broker: Broker) -> None:
    await broker.lead("t", 0, epoch=1, leader=OTHER, isr=(OTHER, ME))
    response = await broker.conn.request(fetch(0))
    assert response.responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER


async def test_parked_fetch_wakes_when_leadership_moves(broker: Broker) -> None:
    other = await broker.connect()
    got: list[FetchResponse] = []

    async def poll() -> None:
        got.append(await other.request(fetch(0, max_wait_ms=30_000)))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(0.3)
            await broker.lead("t", 0, epoch=1, leader=OTHER, isr=(OTHER, ME))
    assert got[0].responses[0].partitions[0].error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
    await other.aclose()


async def test_stop_replica_delete_wakes_a_parked_fetch(broker: Broker, tmp_path: Path) -> None:
    other = await broker.connect()
    got: list[FetchResponse] = []

    async def poll() -> None:
        got.append(await other.request(fetch(0, max_wait_ms=30_000)))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(0.3)
            stop = await broker.conn.request(
                StopReplicaRequest(
                    ME,
                    CONTROLLER_EPOCH,
                    0,
                    (StopReplicaTopicState("t", (StopReplicaPartitionState(0, -2, True),)),),
                )
            )
            assert stop.error_code == 0 and stop.partition_errors[0].error_code == 0
    assert got[0].responses[0].partitions[0].error_code in (
        ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
    )
    assert not (tmp_path / "t-0").exists()
    await other.aclose()


async def test_fetch_with_a_made_up_replica_id_sees_only_committed(tmp_path: Path) -> None:
    """Only real replicas may read past the HW (Kafka's FetchIsolation): not the debug id."""
    async with running_broker(tmp_path) as broker:
        await broker.lead("t", 0, isr=(ME, OTHER))
        conn = broker.conn
        await conn.request(produce(batch(b"uncommitted"), acks=1))
        consumer = await conn.request(fetch(0))
        assert consumer.responses[0].partitions[0].records == b""
        debug = await conn.request(fetch(0, replica_id=-2))
        assert debug.responses[0].partitions[0].records == b""
        stranger = await conn.request(fetch(0, replica_id=42))
        data = stranger.responses[0].partitions[0]
        assert data.error_code != 0 or data.records == b""


# -- OffsetForLeaderEpoch ------------------------------------------------------------------


async def test_offset_for_leader_epoch_after_two_epochs(broker: Broker) -> None:
    conn = broker.conn
    await broker.lead("t", 0, epoch=3)
    await conn.request(produce(batch(b"a", b"b")))  # offsets 0-1 in epoch 3
    await broker.lead("t", 0, epoch=5)
    await conn.request(produce(batch(b"c", b"d", b"e")))  # offsets 2-4 in epoch 5

    async def ask(epoch: int, current: int = -1) -> OffsetForLeaderEpochPartitionResult:
        response = await conn.request(
            OffsetForLeaderEpochRequest(
                (
                    OffsetForLeaderEpochTopic(
                        "t", (OffsetForLeaderEpochPartition(0, epoch, current),)
                    ),
                )
            )
        )
        return response.topics[0].partitions[0]  # type: ignore[no-any-return]

    def answer(r: OffsetForLeaderEpochPartitionResult) -> tuple[int, int, int]:
        return (r.error_code, r.leader_epoch, r.end_offset)

    assert answer(await ask(3)) == (0, 3, 2)
    assert answer(await ask(4)) == (0, 3, 2)  # largest epoch <= 4 is 3, which ended at 2
    assert answer(await ask(5)) == (0, 5, 5)  # the latest epoch ends at the LEO
    assert answer(await ask(1)) == (0, 1, 0)  # below the first epoch: its start offset
    assert answer(await ask(6)) == (0, -1, -1)  # unknown: undefined
    assert answer(await ask(5, current=5)) == (0, 5, 5)
    assert (await ask(3, current=4)).error_code == ErrorCode.FENCED_LEADER_EPOCH
    assert (await ask(3, current=6)).error_code == ErrorCode.UNKNOWN_LEADER_EPOCH
    unknown = await conn.request(
        OffsetForLeaderEpochRequest(
            (OffsetForLeaderEpochTopic("nope", (OffsetForLeaderEpochPartition(0, 1),)),)
        )
    )
    assert unknown.topics[0].partitions[0].error_code == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    # The batches carry the epoch they were appended in.
    debug = await conn.request(fetch(0, replica_id=-2))
    epochs = [
        b.header.partition_leader_epoch
        for b in decode_batches(debug.responses[0].partitions[0].records)
    ]
    assert epochs == [3, 5]


# -- Produce -------------------------------------------------------------------------------


async def test_acks_zero_gets_no_response_but_the_data_is_there(broker: Broker) -> None:
    conn = broker.conn
    assert await conn.request(produce(batch(b"fire"), acks=0), expect_response=False) is None
    assert await conn.request(produce(batch(b"forget"), acks=0), expect_response=False) is None
    # The next response on this connection is the fetch's: nothing was sent for acks=0.
    with trio.fail_after(5):
        response = await conn.request(fetch(0))
    data = response.responses[0].partitions[0]
    assert values(data.records) == [b"fire", b"forget"]
    assert data.high_watermark == 2


async def test_acks_zero_on_a_raw_stream_sends_nothing_back(broker: Broker) -> None:
    protocol = ClientProtocol("raw")
    stream = await trio.open_tcp_stream("127.0.0.1", broker.server.port)
    _, data = protocol.send_request(produce(batch(b"q"), acks=0), expect_response=False)
    await stream.send_all(data)
    with trio.move_on_after(0.5):
        assert await stream.receive_some(1000) == b"never"  # nothing should arrive
    await stream.aclose()
    response = await broker.conn.request(fetch(0))
    assert values(response.responses[0].partitions[0].records) == [b"q"]


async def test_acks_all_with_isr_of_just_the_leader_answers_at_once(broker: Broker) -> None:
    start = trio.current_time()
    result = produce_result(
        await broker.conn.request(produce(batch(b"a"), acks=-1, timeout_ms=30_000))
    )
    assert trio.current_time() - start < 2
    assert (result.error_code, result.base_offset) == (0, 0)


async def test_acks_all_times_out_when_the_follower_never_fetches(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        await broker.lead("t", 0, isr=(ME, OTHER))
        conn = broker.conn
        start = trio.current_time()
        with trio.fail_after(10):
            response = await conn.request(produce(batch(b"a"), acks=-1, timeout_ms=400))
        elapsed = trio.current_time() - start
        assert produce_result(response).error_code == ErrorCode.REQUEST_TIMED_OUT
        assert 0.35 <= elapsed < 5, elapsed
        # The leader did append; it is just not committed.
        assert broker.ctx.replica_manager.partitions[("t", 0)].log_end_offset == 1
        consumer = await conn.request(fetch(0))
        assert consumer.responses[0].partitions[0].records == b""
        assert consumer.responses[0].partitions[0].high_watermark == 0


async def test_acks_all_completes_when_the_isr_shrinks_to_the_leader(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        await broker.lead("t", 0, isr=(ME, OTHER))
        producer = await broker.connect()
        got: list[ProduceResponse] = []

        async def send() -> None:
            got.append(await producer.request(produce(batch(b"a"), acks=-1, timeout_ms=30_000)))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send)
                await trio.sleep(0.3)
                assert got == []
                await broker.lead("t", 0, epoch=1, isr=(ME,))
        assert produce_result(got[0]).error_code == 0
        assert produce_result(got[0]).base_offset == 0
        await producer.aclose()


async def test_acks_all_waiting_when_leadership_moves_is_not_leader(tmp_path: Path) -> None:
    async with running_broker(tmp_path) as broker:
        await broker.lead("t", 0, isr=(ME, OTHER))
        producer = await broker.connect()
        got: list[ProduceResponse] = []

        async def send() -> None:
            got.append(await producer.request(produce(batch(b"a"), acks=-1, timeout_ms=30_000)))

        with trio.fail_after(10):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(send)
                await trio.sleep(0.3)
                await broker.lead("t", 0, epoch=1, leader=OTHER, isr=(OTHER, ME))
        assert produce_result(got[0]).error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        await producer.aclose()


async def test_acks_all_with_isr_below_min_insync_replicas(tmp_path: Path) -> None:
    """docs/protocol.md: ISR smaller than min.insync.replicas -> NOT_ENOUGH_REPLICAS (19) for
    acks=-1, and the leader appends nothing. acks=1 is not affected. (Kafka's effective minimum
    is min(min.insync.replicas, replication factor), so the partition has two replicas.)"""
    async with running_broker(tmp_path, ["min.insync.replicas=2"]) as broker:
        await broker.lead("t", 0, isr=(ME,), replicas=(ME, OTHER))
        conn = broker.conn
        with trio.fail_after(5):
            result = produce_result(
                await conn.request(produce(batch(b"a"), acks=-1, timeout_ms=2000))
            )
        assert result.error_code == ErrorCode.NOT_ENOUGH_REPLICAS == 19
        debug = await conn.request(fetch(0, replica_id=-2))
        assert debug.responses[0].partitions[0].records == b""  # nothing appended
        ok = produce_result(await conn.request(produce(batch(b"b"), acks=1)))
        assert (ok.error_code, ok.base_offset) == (0, 0)


async def test_message_too_large(tmp_path: Path) -> None:
    async with running_broker(tmp_path, ["message.max.bytes=1000"]) as broker:
        await broker.lead("t", 0)
        conn = broker.conn
        too_big = batch(b"x" * 2000)
        assert len(too_big) > 1000
        result = produce_result(await conn.request(produce(too_big)))
        assert result.error_code == ErrorCode.MESSAGE_TOO_LARGE == 10
        assert result.base_offset == -1
        ok = produce_result(await conn.request(produce(batch(b"y" * 100))))
        assert (ok.error_code, ok.base_offset) == (0, 0)  # the rejected batch took no offset
        response = await conn.request(fetch(0))
        assert values(response.responses[0].partitions[0].records) == [b"y" * 100]


async def test_produce_to_several_partitions_reports_each(tmp_path: Path) -> None:
    async with running_broker(tmp_path, ["message.max.bytes=1000"]) as broker:
        await broker.lead("t", 0)
        await broker.lead("t", 1)
        request = ProduceRequest(
            1,
            5000,
            (
                ProduceTopicData(
                    "t",
                    (
                        ProducePartitionData(0, batch(b"ok")),
                        ProducePartitionData(1, batch(b"x" * 2000)),
                        ProducePartitionData(9, batch(b"ok")),
                    ),
                ),
            ),
        )
        response = await broker.conn.request(request)
        codes = [p.error_code for p in response.responses[0].partition_responses]
        assert codes == [0, ErrorCode.MESSAGE_TOO_LARGE, ErrorCode.UNKNOWN_TOPIC_OR_PARTITION]
        assert [p.index for p in response.responses[0].partition_responses] == [0, 1, 9]


async def test_controller_requests_for_an_older_broker_epoch_are_rejected(
    broker: Broker,
) -> None:
    """docs/protocol.md: a LeaderAndIsr/UpdateMetadata/StopReplica addressed to an older
    incarnation of this broker (broker_epoch below ours) gets STALE_BROKER_EPOCH (77) and
    changes nothing."""
    broker.ctx.broker_epoch = 100
    conn = broker.conn
    state = dict(
        topic_name="t",
        partition_index=0,
        controller_epoch=CONTROLLER_EPOCH,
        leader=OTHER,
        leader_epoch=9,
        isr=(OTHER, ME),
        partition_epoch=1,
        replicas=(ME, OTHER),
    )
    lai = await conn.request(
        LeaderAndIsrRequest(
            ME,
            CONTROLLER_EPOCH,
            99,
            (LeaderAndIsrPartitionState(**state),),  # type: ignore[arg-type]
            (broker.endpoint,),
        )
    )
    um = await conn.request(
        UpdateMetadataRequest(
            ME,
            CONTROLLER_EPOCH,
            99,
            (UpdateMetadataPartitionState(**state),),  # type: ignore[arg-type]
            (broker.endpoint,),
        )
    )
    stop = await conn.request(
        StopReplicaRequest(
            ME,
            CONTROLLER_EPOCH,
            99,
            (StopReplicaTopicState("t", (StopReplicaPartitionState(0, -2, True),)),),
        )
    )
    assert [lai.error_code, um.error_code, stop.error_code] == [ErrorCode.STALE_BROKER_EPOCH] * 3
    assert broker.ctx.replica_manager.leader_partition(("t", 0)).leader_epoch == 0
    info = broker.ctx.metadata.partition("t", 0)
    assert info is not None and info.leader == ME


# -- connection behaviour ------------------------------------------------------------------


async def test_pipelined_requests_are_answered_in_order(broker: Broker) -> None:
    protocol = ClientProtocol("pipeliner")
    stream = await trio.open_tcp_stream("127.0.0.1", broker.server.port)
    sent: list[tuple[int, str]] = []
    frames = []
    for i in range(50):
        if i % 3 == 0:
            body: object = fetch(0)
            kind = "fetch"
        elif i % 3 == 1:
            body = produce(batch(f"r{i}".encode()))
            kind = "produce"
        else:
            body = MetadataRequest(None)
            kind = "metadata"
        correlation_id, data = protocol.send_request(body)
        sent.append((correlation_id, kind))
        frames.append(data)
    await stream.send_all(b"".join(frames))  # all 50 before reading any response

    received: list[ReceivedResponse] = []
    with trio.fail_after(20):
        while len(received) < len(sent):
            response = protocol.next_response()  # raises if a response is out of order
            if response is NEED_DATA:
                data = await stream.receive_some(1 << 16)
                assert data, "broker closed the connection"
                protocol.receive_data(data)
                continue
            assert isinstance(response, ReceivedResponse)
            received.append(response)
    await stream.aclose()
    assert [r.correlation_id for r in received] == [c for c, _ in sent]
    produced = [r.body for r, (_, kind) in zip(received, sent, strict=True) if kind == "produce"]
    assert [produce_result(p).base_offset for p in produced] == list(range(len(produced)))
    fetched = [r.body for r, (_, kind) in zip(received, sent, strict=True) if kind == "fetch"]
    # Each fetch saw every produce sent before it, none after: requests ran in order.
    for n, response in enumerate(fetched):
        assert len(values(response.responses[0].partitions[0].records)) == n
    for r, (_, kind) in zip(received, sent, strict=True):
        if kind == "metadata":
            assert isinstance(r.body, MetadataResponse)


async def test_stop_with_a_short_parked_fetch_answers_it(broker: Broker) -> None:
    other = await broker.connect()
    got: list[FetchResponse] = []

    async def poll() -> None:
        got.append(await other.request(fetch(0, max_wait_ms=1000)))

    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(0.3)
            await broker.server.stop()
    assert len(got) == 1 and got[0].responses[0].partitions[0].error_code == 0
    await other.aclose()


async def test_stop_while_a_long_poll_fetch_is_parked(broker: Broker) -> None:
    """Shutdown must not hang on (or drop) a fetch parked for up to max_wait_ms: the fetch
    gets its (empty) response promptly and stop returns."""
    other = await broker.connect()
    got: list[FetchResponse] = []
    errors: list[Exception] = []

    async def poll() -> None:
        try:
            got.append(await other.request(fetch(0, max_wait_ms=30_000)))
        except BrokerConnectionError as exc:
            errors.append(exc)

    start = trio.current_time()
    with trio.fail_after(20):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(0.3)
            await broker.server.stop()
            stopped_after = trio.current_time() - start
    assert errors == [], errors
    assert len(got) == 1 and got[0].responses[0].partitions[0].records == b""
    assert stopped_after < 5, f"stop took {stopped_after:.1f} s"
    await other.aclose()


async def test_new_connection_refused_after_stop(broker: Broker) -> None:
    await broker.server.stop()
    with pytest.raises(BrokerConnectionError):
        late = await connect("127.0.0.1", broker.server.port, timeout_ms=1000)
        await late.aclose()


async def test_controller_requests_wait_for_registration(broker: Broker) -> None:
    """Until this process has registered, the controller may still be addressing a previous
    (crashed) process of this broker id. Its requests are held (not refused, or a starting
    broker would miss its first LeaderAndIsr), then judged by the new broker epoch."""
    broker.ctx.broker_epoch = -1

    def leader_and_isr(broker_epoch: int, leader_epoch: int) -> LeaderAndIsrRequest:
        state = LeaderAndIsrPartitionState(
            topic_name="t",
            partition_index=0,
            controller_epoch=CONTROLLER_EPOCH,
            leader=ME,
            leader_epoch=leader_epoch,
            isr=(ME,),
            partition_epoch=leader_epoch,
            replicas=(ME,),
        )
        return LeaderAndIsrRequest(ME, CONTROLLER_EPOCH, broker_epoch, (state,), ())

    answers: list[int] = []

    async def send() -> None:
        answers.append((await broker.conn.request(leader_and_isr(3, 9))).error_code)

    partition = broker.ctx.replica_manager.partitions[("t", 0)]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(send)
        await trio.testing.wait_all_tasks_blocked()
        assert answers == [] and partition.leader_epoch != 9  # held
        broker.ctx.registered(5)
    assert answers == [ErrorCode.STALE_BROKER_EPOCH]  # meant for the old process
    assert partition.leader_epoch != 9
    fresh = await broker.conn.request(leader_and_isr(5, 9))
    assert fresh.error_code == ErrorCode.NONE and partition.leader_epoch == 9
