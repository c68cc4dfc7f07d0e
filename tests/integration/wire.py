"""An idempotent producer's requests over the wire, one exact batch at a time: for tests that
must resend the very same bytes (a lost acknowledgement, a retry to a new leader)."""

from __future__ import annotations

from client.network import connect
from protocol.errors import ErrorCode
from protocol.messages.init_producer_id import InitProducerIdRequest, InitProducerIdResponse
from protocol.messages.produce import (
    ProducePartitionData,
    ProducePartitionResponse,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from tests.integration.cluster_harness import BrokerProcess

__all__ = ["init_producer_id", "produce_request", "produce_to"]


async def init_producer_id(broker: BrokerProcess) -> tuple[int, int]:
    """A new (producer id, epoch) from `broker`."""
    conn = await connect(broker.host, broker.port, timeout_ms=5000)
    try:
        response: InitProducerIdResponse = await conn.request(
            InitProducerIdRequest(60_000), timeout_ms=10_000
        )
    finally:
        await conn.aclose()
    assert response.error_code == ErrorCode.NONE, ErrorCode(response.error_code).name
    return response.producer_id, response.producer_epoch


def produce_request(topic: str, batch: bytes, acks: int = -1) -> ProduceRequest:
    """`batch` to partition 0 of `topic`."""
    return ProduceRequest(
        acks=acks,
        timeout_ms=10_000,
        topic_data=(ProduceTopicData(topic, (ProducePartitionData(0, batch),)),),
    )


async def produce_to(
    broker: BrokerProcess, topic: str, batch: bytes, acks: int = -1
) -> ProducePartitionResponse:
    """Send `batch` to partition 0 of `topic` on `broker` and return its answer."""
    conn = await connect(broker.host, broker.port, timeout_ms=5000)
    try:
        response: ProduceResponse = await conn.request(
            produce_request(topic, batch, acks), timeout_ms=15_000
        )
    finally:
        await conn.aclose()
    return response.responses[0].partition_responses[0]
