"""A producer that sends one Produce at a time for a while and keeps what client quotas show:
the bytes acknowledged, the rate, the throttle times the broker answered with. It backs off
for each throttle time as Kafka's clients do (KIP-219); the broker also reads nothing more
from it meanwhile. `fetch_for` is its consumer twin. Used by test_client_quotas and the
quotas benchmark."""

from __future__ import annotations

from dataclasses import dataclass

import trio

from client.network import connect
from client.security import ClientSecurity
from protocol.errors import ErrorCode
from protocol.messages.fetch import FetchPartition, FetchRequest, FetchResponse, FetchTopic
from protocol.messages.produce import ProduceResponse
from protocol.records import Record, build_batch
from tests.integration.wire import produce_request

__all__ = ["ProduceLoad", "fetch_for", "produce_for"]


@dataclass
class ProduceLoad:
    client_id: str
    bytes_acked: int = 0
    requests: int = 0
    throttled: int = 0  # responses with throttle_time_ms > 0
    max_throttle_ms: int = 0
    elapsed_s: float = 0.0
    # After `warmup_s` (a quota's first window lets a burst through): the steady state.
    steady_bytes: int = 0
    steady_s: float = 0.0

    @property
    def rate_bytes_per_s(self) -> float:
        return self.bytes_acked / self.elapsed_s if self.elapsed_s > 0 else 0.0

    @property
    def steady_bytes_per_s(self) -> float:
        return self.steady_bytes / self.steady_s if self.steady_s > 0 else 0.0


async def produce_for(
    host: str,
    port: int,
    topic: str,
    client_id: str,
    duration_s: float,
    *,
    record_bytes: int = 16 * 1024,
    warmup_s: float = 0.0,
    back_off: bool = True,
    security: ClientSecurity | None = None,
) -> ProduceLoad:
    """Produce `record_bytes` records to partition 0 of `topic` (acks=1) for `duration_s`;
        the time counted ends when the last throttle time has passed. What is acknowledged after
        `warmup_s` is also counted on its own (`steady_bytes_per_s`). Without `back_off` it ignores
    throttle times (as Highwater's own clients do): only the broker's muting holds it back."""
    batch = build_batch([Record(b"q" * record_bytes)])
    load = ProduceLoad(client_id)
    conn = await connect(host, port, client_id=client_id, timeout_ms=10_000, security=security)
    try:
        start = trio.current_time()
        end = start + duration_s
        steady_from = start + warmup_s
        free_at = start  # when the broker reads this connection again
        while trio.current_time() < end:
            await trio.sleep_until(free_at)  # the client's own back-off (KIP-219)
            response: ProduceResponse = await conn.request(
                produce_request(topic, batch, acks=1), timeout_ms=30_000
            )
            (partition,) = response.responses[0].partition_responses
            assert partition.error_code == ErrorCode.NONE, ErrorCode(partition.error_code).name
            load.requests += 1
            load.bytes_acked += len(batch)
            if trio.current_time() >= steady_from:
                load.steady_bytes += len(batch)
            if back_off:
                free_at = trio.current_time() + response.throttle_time_ms / 1000
            if response.throttle_time_ms > 0:
                load.throttled += 1
                load.max_throttle_ms = max(load.max_throttle_ms, response.throttle_time_ms)
        load.elapsed_s = max(trio.current_time(), free_at) - start
        load.steady_s = max(0.0, max(trio.current_time(), free_at) - steady_from)
    finally:
        await conn.aclose()
    return load


async def fetch_for(
    host: str,
    port: int,
    topic: str,
    client_id: str,
    duration_s: float,
    *,
    max_bytes: int = 256 * 1024,
) -> ProduceLoad:
    """Fetch partition 0 of `topic` from offset 0 again and again for `duration_s`, as a
    consumer (no back-off: only the broker's muting holds it back); `bytes_acked` counts the
    records returned."""
    load = ProduceLoad(client_id)
    request = FetchRequest(
        -1, 100, 1, max_bytes, (FetchTopic(topic, (FetchPartition(0, 0, max_bytes),)),)
    )
    conn = await connect(host, port, client_id=client_id, timeout_ms=10_000)
    try:
        start = trio.current_time()
        while trio.current_time() < start + duration_s:
            response: FetchResponse = await conn.request(request, timeout_ms=30_000)
            (partition,) = response.responses[0].partitions
            assert partition.error_code == ErrorCode.NONE, ErrorCode(partition.error_code).name
            load.requests += 1
            load.bytes_acked += len(partition.records)
            if response.throttle_time_ms > 0:
                load.throttled += 1
                load.max_throttle_ms = max(load.max_throttle_ms, response.throttle_time_ms)
        load.elapsed_s = trio.current_time() - start
    finally:
        await conn.aclose()
    return load
