"""The chaos workload: producers (acks=all) and consumers over one topic, recording everything.

Every value is unique (`p<producer>-<n>`), so the checker can follow each write. Producers send
at a bounded rate and record each send's outcome when it completes: acked with its partition and
offset, failed when the broker said it was not written, unknown otherwise (a timeout, a lost
connection, or a producer stopped by a fatal error). Consumers read every partition from offset
0 and record each record they poll, in order.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import trio

from client.consumer import Consumer, TopicPartition
from client.errors import HighwaterClientError, LogTruncationError, ProducerFatalError
from client.producer import DeliveryFuture, Producer
from protocol.errors import ErrorCode
from tests.chaos.checker import Poll, SendOutcome, SendStatus

__all__ = ["History", "consume", "produce", "read_partition", "read_partition_records"]

# Errors after which the record is certainly not in the log.
_NOT_WRITTEN = frozenset({ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.MESSAGE_TOO_LARGE})


@dataclass
class History:
    sends: list[SendOutcome] = field(default_factory=list)
    polls: list[Poll] = field(default_factory=list)
    truncations: list[str] = field(default_factory=list)  # KIP-320 divergences consumers met
    producer_restarts: int = 0
    producer_errors: list[str] = field(default_factory=list)


def _outcome(value: bytes, future: DeliveryFuture) -> SendOutcome:
    error = future.exception()
    if error is None:
        meta = future.result()
        return SendOutcome(value, SendStatus.ACKED, meta.partition, meta.offset)
    if not isinstance(error, ProducerFatalError) and error.code in _NOT_WRITTEN:
        return SendOutcome(value, SendStatus.FAILED)
    return SendOutcome(value, SendStatus.UNKNOWN)


async def produce(
    bootstrap: str,
    topic: str,
    index: int,
    history: History,
    stop: trio.Event,
    *,
    rate_per_s: float,
    idempotent: bool,
) -> None:
    """Send until `stop`, then wait (bounded) for every outstanding send's outcome. A producer
    stopped by a fatal error is replaced by a new one (its pending sends are unknown)."""
    n = 0
    while not stop.is_set():
        pending: list[tuple[bytes, DeliveryFuture]] = []
        try:
            async with Producer(
                bootstrap,
                acks="all",
                enable_idempotence=idempotent,
                linger_ms=5,
                delivery_timeout_ms=20_000,
                request_timeout_ms=4_000,
                retry_backoff_ms=100,
                metadata_max_age_ms=2_000,
                max_block_ms=10_000,
                client_id=f"chaos-producer-{index}",
            ) as producer:
                while not stop.is_set():
                    value = f"p{index}-{n}".encode()
                    n += 1
                    future = await producer.send(topic, value, key=value)
                    pending.append((value, future))
                    pending = _collect(pending, history)
                    await trio.sleep(1 / rate_per_s)
                with trio.move_on_after(30):
                    await producer.flush()
        except* HighwaterClientError as group:
            # A fatal error (the producer stopped) surfaces from its nursery: a new producer.
            history.producer_restarts += 1
            history.producer_errors += [str(e) for e in group.exceptions]
        for value, future in pending:
            if future.done():
                history.sends.append(_outcome(value, future))
            else:
                history.sends.append(SendOutcome(value, SendStatus.UNKNOWN))


def _collect(
    pending: list[tuple[bytes, DeliveryFuture]], history: History
) -> list[tuple[bytes, DeliveryFuture]]:
    still: list[tuple[bytes, DeliveryFuture]] = []
    for value, future in pending:
        if future.done():
            history.sends.append(_outcome(value, future))
        else:
            still.append((value, future))
    return still


async def consume(
    bootstrap: str,
    topic: str,
    partitions: int,
    index: int,
    history: History,
    stop: trio.Event,
    ends: dict[int, int],
) -> None:
    """Poll every partition from offset 0 until `stop` is set and every position has reached
    `ends` (filled in by the runner once producing stopped)."""
    tps = [(topic, p) for p in range(partitions)]
    async with Consumer(
        bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=5_000,
        metadata_max_age_ms=2_000,
        client_id=f"chaos-consumer-{index}",
    ) as consumer:
        consumer.assign(tps)
        for tp in tps:
            consumer.seek(tp, 0)
        while True:
            if stop.is_set() and ends and await _reached(consumer, tps, ends):
                return
            try:
                records = await consumer.poll(timeout_ms=200)
            except LogTruncationError as exc:
                history.truncations.append(f"consumer {index}: {exc}")
                consumer.seek((exc.topic, exc.partition), exc.divergent_offset)
                continue
            except HighwaterClientError:
                await trio.sleep(0.2)  # the cluster is having a fault: try again
                continue
            for r in records:
                history.polls.append(Poll(index, r.partition, r.offset, r.value))


async def _reached(consumer: Consumer, tps: list[tuple[str, int]], ends: dict[int, int]) -> bool:
    for tp in tps:
        if await consumer.position(tp) < ends.get(tp[1], 0):
            return False
    return True


async def read_partition(
    bootstrap: str, topic: str, partition: int, timeout_s: float = 30
) -> list[bytes | None]:
    """Everything committed in the partition now, from offset 0 (index = offset); offsets
    must be dense from 0. Bounded by `timeout_s`."""
    return [
        value for value, _ in await read_partition_records(bootstrap, topic, partition, timeout_s)
    ]


async def read_partition_records(
    bootstrap: str, topic: str, partition: int, timeout_s: float = 30
) -> list[tuple[bytes | None, int]]:
    """As `read_partition`, each record with its timestamp: (value, timestamp ms)."""
    tp = (topic, partition)
    async with Consumer(bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100) as c:
        c.assign([tp])
        c.seek(tp, 0)
        got: list[tuple[bytes | None, int]] = []
        offsets: list[int] = []
        with trio.fail_after(timeout_s):
            end = (await c.end_offsets([tp]))[TopicPartition(*tp)]
            while await c.position(tp) < end:
                for r in await c.poll(timeout_ms=500):
                    if r.offset < end:
                        offsets.append(r.offset)
                        got.append((r.value, r.timestamp))
    if offsets != list(range(len(offsets))):
        raise AssertionError(f"partition {partition}: final read offsets not dense from 0")
    return got
