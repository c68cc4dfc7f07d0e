"""A broker's data path on real sockets, with the test playing the controller.

No ZooKeeper: the test sends LeaderAndIsr and UpdateMetadata itself, then produces, fetches
and lists offsets through client.network, and checks the bytes on disk were served as stored.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import trio

from broker.config.broker_config import load_config
from broker.context import BrokerContext
from broker.core.replica_manager import ReplicaManager
from broker.log.manager import LogManager
from broker.server import BrokerServer
from client.network import BrokerConnection, BrokerConnectionError, connect
from protocol.errors import ErrorCode
from protocol.messages.common import BrokerEndpoint
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchTopic
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from protocol.messages.list_offsets import (
    ListOffsetsPartition,
    ListOffsetsRequest,
    ListOffsetsTopic,
)
from protocol.messages.metadata import MetadataRequest
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.messages.update_metadata import UpdateMetadataPartitionState, UpdateMetadataRequest
from protocol.records import Record, build_batch, decode_batches

BROKER_ID = 1


@pytest.fixture
async def broker(tmp_path: Path) -> AsyncIterator[tuple[BrokerServer, BrokerConnection]]:
    config = load_config(
        None,
        [f"broker.id={BROKER_ID}", "zookeeper.connect=127.0.0.1:1", f"log.dirs={tmp_path}"],
    )
    log_manager = LogManager([tmp_path], config.log_config())
    log_manager.startup(0)
    ctx = BrokerContext(config, ReplicaManager(BROKER_ID, log_manager))
    ctx.broker_epoch = 0  # as if registered: a broker takes controller requests only then
    server = BrokerServer(ctx, "127.0.0.1", 0, config.socket_request_max_bytes)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(server.run)
        conn = await connect("127.0.0.1", port)
        endpoint = BrokerEndpoint(BROKER_ID, "127.0.0.1", port)
        state = dict(
            topic_name="t",
            partition_index=0,
            controller_epoch=1,
            leader=BROKER_ID,
            leader_epoch=3,
            isr=(BROKER_ID,),
            partition_epoch=0,
            replicas=(BROKER_ID,),
        )
        lai = await conn.request(
            LeaderAndIsrRequest(1, 1, 0, (LeaderAndIsrPartitionState(**state),), (endpoint,))
        )
        assert lai.error_code == 0 and lai.partition_errors[0].error_code == 0
        um = await conn.request(
            UpdateMetadataRequest(1, 1, 0, (UpdateMetadataPartitionState(**state),), (endpoint,))
        )
        assert um.error_code == 0
        yield server, conn
        await conn.aclose()
        await server.stop()
        nursery.cancel_scope.cancel()
    log_manager.shutdown(0)


def produce(records: list[bytes], acks: int = 1) -> ProduceRequest:
    batch = build_batch([Record(v) for v in records], now_ms=1000)
    return ProduceRequest(acks, 5000, (ProduceTopicData("t", (ProducePartitionData(0, batch),)),))


def fetch(offset: int, max_wait_ms: int = 0, min_bytes: int = 1) -> FetchRequest:
    return FetchRequest(
        -1,
        max_wait_ms,
        min_bytes,
        1 << 20,
        (FetchTopic("t", (FetchPartition(0, offset, 1 << 20),)),),
    )


async def test_produce_fetch_list_offsets(broker: tuple[BrokerServer, BrokerConnection]) -> None:
    _, conn = broker
    first = await conn.request(produce([b"a", b"b"]))
    second = await conn.request(produce([b"c"]))
    assert first.responses[0].partition_responses[0].base_offset == 0
    assert second.responses[0].partition_responses[0].base_offset == 2
    response = await conn.request(fetch(0))
    data = response.responses[0].partitions[0]
    assert data.error_code == 0 and data.high_watermark == 3
    values = [r.value for b in decode_batches(data.records) for r in b.records]
    assert values == [b"a", b"b", b"c"]
    assert all(b.header.partition_leader_epoch == 3 for b in decode_batches(data.records))
    offsets = await conn.request(
        ListOffsetsRequest(
            -1, (ListOffsetsTopic("t", (ListOffsetsPartition(0, -1), ListOffsetsPartition(0, -2))),)
        )
    )
    assert [p.offset for p in offsets.topics[0].partitions] == [3, 0]
    meta = await conn.request(MetadataRequest(None))
    assert meta.controller_id == 1 and meta.topics[0].partitions[0].leader_id == BROKER_ID


async def test_long_poll_fetch_wakes_on_produce(
    broker: tuple[BrokerServer, BrokerConnection],
) -> None:
    server, conn = broker
    other = await connect("127.0.0.1", server.port)
    got: list[bytes] = []

    async def poll() -> None:
        response = await other.request(fetch(0, max_wait_ms=10_000))
        got.append(response.responses[0].partitions[0].records)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.sleep(0.2)  # let the fetch park (it would also be correct if it had not)
            await conn.request(produce([b"late"]))
    assert [r.value for b in decode_batches(got[0]) for r in b.records] == [b"late"]
    await other.aclose()


async def test_errors_per_partition(broker: tuple[BrokerServer, BrokerConnection]) -> None:
    _, conn = broker
    bad_acks = await conn.request(produce([b"x"], acks=2))
    assert (
        bad_acks.responses[0].partition_responses[0].error_code == ErrorCode.INVALID_REQUIRED_ACKS
    )
    batch = bytearray(build_batch([Record(b"x")], now_ms=0))
    batch[-1] ^= 1  # CRC no longer matches
    corrupt = await conn.request(
        ProduceRequest(1, 1000, (ProduceTopicData("t", (ProducePartitionData(0, bytes(batch)),)),))
    )
    assert corrupt.responses[0].partition_responses[0].error_code == ErrorCode.CORRUPT_MESSAGE
    unknown = await conn.request(
        ProduceRequest(
            1, 1000, (ProduceTopicData("nope", (ProducePartitionData(0, bytes(batch)),)),)
        )
    )
    assert (
        unknown.responses[0].partition_responses[0].error_code
        == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    )
    out_of_range = await conn.request(fetch(99))
    assert out_of_range.responses[0].partitions[0].error_code == ErrorCode.OFFSET_OUT_OF_RANGE
    nothing = await conn.request(fetch(0))
    assert nothing.responses[0].partitions[0].records == b""  # the corrupt batch left no trace


async def test_stale_controller_epoch_rejected(
    broker: tuple[BrokerServer, BrokerConnection],
) -> None:
    _, conn = broker
    stale = await conn.request(UpdateMetadataRequest(1, 0, 0, (), ()))
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH


async def test_garbage_closes_only_that_connection(
    broker: tuple[BrokerServer, BrokerConnection],
) -> None:
    server, conn = broker
    for garbage in (b"\x7f\xff\xff\xff", b"\x00\x00\x00\x03abc", b"\x00\x00\x00\x02\x92\x01"):
        raw = await trio.open_tcp_stream("127.0.0.1", server.port)
        await raw.send_all(garbage)
        with trio.fail_after(5):
            assert await raw.receive_some(100) == b""  # closed by the broker
        await raw.aclose()
    acks = await conn.request(produce([b"still fine"]))
    assert acks.responses[0].partition_responses[0].error_code == 0
    half = await trio.open_tcp_stream("127.0.0.1", server.port)
    await half.send_all(b"\x00\x00\x01\x00\x92")  # a frame cut off mid-way, then silence
    acks = await conn.request(produce([b"again"]))
    assert acks.responses[0].partition_responses[0].error_code == 0
    await half.aclose()
    with pytest.raises(BrokerConnectionError):
        dead = await connect("127.0.0.1", 1, timeout_ms=1000)
        await dead.aclose()
