"""`highwater perf produce|consume`: Kafka's producer-perf / consumer-perf tools, plus a yardstick.

Each run also measures, in the same process, the client-side floor of the work: how fast this
process merely *builds* the same batches (`protocol.records.build_batch`, what the producer
must do anyway) or merely *decodes* the same batches (`decode_batches`, what the consumer must
do anyway), and prints the end-to-end rate as a ratio of it, as information: the share of the
client's own ceiling that reached the cluster. The output lines follow Kafka's tools (MB = 2^20
bytes): docs/operations.md ("Benchmark") shows them.
"""

from __future__ import annotations

import math
import random
import string
import time
from array import array
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import trio

from client.cli.common import cli_security
from client.consumer import Consumer
from client.errors import HighwaterClientError, HighwaterTimeoutError
from client.metadata import ClusterMetadata
from client.producer import DeliveryFuture, Producer, estimate_record_bytes
from protocol.compression import codec_named
from protocol.errors import ErrorCode
from protocol.messages.fetch import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
)
from protocol.records import BATCH_HEADER_BYTES, Record, build_batch, decode_batches, read_header

__all__ = [
    "ConsumeResult",
    "LatencyStats",
    "ProduceResult",
    "build_only_rate",
    "consumer_lines",
    "decode_only_rate",
    "format_ratio",
    "payload",
    "percentile",
    "producer_summary_line",
    "producer_window_line",
    "records_per_batch",
    "run_consume_perf",
    "run_end_to_end_perf",
    "run_produce_perf",
]

MB = 1024 * 1024
REPORT_INTERVAL_S = 5.0  # Kafka's producer-perf prints a window line every 5 s
MAX_YARDSTICK_RECORDS = 1_000_000  # the build/decode yardstick needs a sample, not everything
YIELD_EVERY_BYTES = 64 * 1024  # perf produce yields to the producer's sender this often

Echo = Callable[[str], None]


# --- pure: statistics and output lines -----------------------------------------------------


def percentile(sorted_values: Sequence[float], fraction: float) -> float:
    """The value at `fraction` (0..1) of sorted values, nearest rank (Kafka's percentiles)."""
    if not sorted_values:
        return 0.0
    index = min(len(sorted_values) - 1, max(0, math.ceil(fraction * len(sorted_values)) - 1))
    return sorted_values[index]


@dataclass
class LatencyStats:
    """Latencies (ms) of completed records, in completion order. The delivery callback only
    appends; window lines are computed from the array's tail when one is due."""

    started_s: float
    record_size: int
    latencies_ms: array[float] = field(default_factory=lambda: array("d"))
    window_start_s: float = 0.0
    window_index: int = 0

    def __post_init__(self) -> None:
        self.window_start_s = self.started_s

    def record(self, latency_ms: float) -> None:
        self.latencies_ms.append(latency_ms)

    @property
    def bytes_total(self) -> int:
        return len(self.latencies_ms) * self.record_size

    def take_window(self, now_s: float) -> str | None:
        """The window line if REPORT_INTERVAL_S passed (starting a new window), else None."""
        elapsed = now_s - self.window_start_s
        if elapsed < REPORT_INTERVAL_S:
            return None
        window = self.latencies_ms[self.window_index :]
        count = len(window)
        line = producer_window_line(
            count,
            elapsed,
            count * self.record_size,
            sum(window) / max(1, count),
            max(window, default=0.0),
        )
        self.window_start_s = now_s
        self.window_index += count
        return line


def producer_window_line(
    count: int, elapsed_s: float, size: int, avg_ms: float, max_ms: float
) -> str:
    rate = count / elapsed_s if elapsed_s > 0 else 0.0
    mb_rate = size / MB / elapsed_s if elapsed_s > 0 else 0.0
    return (
        f"{count} records sent, {rate:.1f} records/sec ({mb_rate:.2f} MB/sec), "
        f"{avg_ms:.1f} ms avg latency, {max_ms:.1f} ms max latency."
    )


def producer_summary_line(latencies_ms: Sequence[float], elapsed_s: float, size: int) -> str:
    count = len(latencies_ms)
    ordered = sorted(latencies_ms)
    rate = count / elapsed_s if elapsed_s > 0 else 0.0
    mb_rate = size / MB / elapsed_s if elapsed_s > 0 else 0.0
    avg = sum(ordered) / count if count else 0.0
    worst = ordered[-1] if ordered else 0.0
    p50, p95, p99, p999 = (percentile(ordered, f) for f in (0.5, 0.95, 0.99, 0.999))
    return (
        f"{count} records sent, {rate:.1f} records/sec ({mb_rate:.2f} MB/sec), "
        f"{avg:.2f} ms avg latency, {worst:.2f} ms max latency, {p50:.1f} ms 50th, "
        f"{p95:.1f} ms 95th, {p99:.1f} ms 99th, {p999:.1f} ms 99.9th."
    )


def _clock_text(wall_s: float) -> str:
    """Kafka's consumer-perf date format: yyyy-MM-dd HH:mm:ss:SSS."""
    millis = int(wall_s * 1000) % 1000
    return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(wall_s)) + f":{millis:03d}"


def consumer_lines(
    start_wall_s: float, end_wall_s: float, size: int, count: int, fetch_s: float
) -> list[str]:
    """Kafka's consumer-perf CSV header and line (no group rebalance here: 0 ms)."""
    elapsed = max(end_wall_s - start_wall_s, 1e-9)
    fetch = max(fetch_s, 1e-9)
    mb = size / MB
    return [
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec",
        f"{_clock_text(start_wall_s)}, {_clock_text(end_wall_s)}, {mb:.4f}, {mb / elapsed:.4f}, "
        f"{count}, {count / elapsed:.4f}, 0, {fetch * 1000:.0f}, {mb / fetch:.4f}, "
        f"{count / fetch:.4f}",
    ]


def format_ratio(
    what: str, rate: float, yardstick: str, floor_rate: float, *, capped: bool = False
) -> list[str]:
    """The yardstick lines: the ceiling's rate and the end-to-end / ceiling ratio; for a rate
    `capped` by --throughput, no ratio (it would measure the cap, not the client)."""
    ratio = rate / floor_rate if floor_rate > 0 else 0.0
    return [
        f"{yardstick} only (same process, same batches): {floor_rate:.1f} records/sec",
        f"{what} / {yardstick}-only ratio: "
        + ("not meaningful under --throughput (the rate was capped)" if capped else f"{ratio:.2f}"),
    ]


def payload(record_size: int, seed: int = 0) -> bytes:
    """One random payload of upper-case letters, reused for every record (as Kafka's tool)."""
    rng = random.Random(seed)
    return "".join(rng.choices(string.ascii_uppercase, k=record_size)).encode()


def records_per_batch(record_size: int, batch_size: int) -> int:
    """How many records of this size the producer puts in one batch of batch_size bytes."""
    size = estimate_record_bytes(None, b"x" * record_size, ())
    return max(1, (batch_size - BATCH_HEADER_BYTES) // size)


# --- the yardsticks --------------------------------------------------------------------------


def build_only_rate(
    num_records: int, record_size: int, batch_size: int, compression: str = "none"
) -> float:
    """Records/s at which this process builds the producer's batches (Record objects included)."""
    value = payload(record_size)
    per_batch = records_per_batch(record_size, batch_size)
    codec = codec_named(compression)
    num_records = min(num_records, MAX_YARDSTICK_RECORDS)
    started = time.perf_counter()
    built = 0
    while built < num_records:
        n = min(per_batch, num_records - built)
        now_ms = time.time_ns() // 1_000_000
        build_batch([Record(value, None, now_ms) for _ in range(n)], compression=codec)
        built += n
    elapsed = time.perf_counter() - started
    return built / elapsed if elapsed > 0 else 0.0


def decode_only_rate(buffers: Sequence[bytes]) -> float:
    """Records/s at which this process decodes the given Fetch record bytes."""
    started = time.perf_counter()
    decoded = 0
    for buf in buffers:
        for batch in decode_batches(buf):
            decoded += len(batch.records)
    elapsed = time.perf_counter() - started
    return decoded / elapsed if elapsed > 0 else 0.0


# --- perf produce ----------------------------------------------------------------------------


@dataclass
class ProduceResult:
    sent: int
    failed: int
    elapsed_s: float
    bytes_total: int
    latencies_ms: array[float]
    first_error: str | None = None

    @property
    def rate(self) -> float:
        return self.sent / self.elapsed_s if self.elapsed_s > 0 else 0.0


async def run_produce_perf(
    bootstrap: str,
    topic: str,
    *,
    num_records: int,
    record_size: int,
    acks: int,
    throughput: float = -1,
    batch_size: int = 16_384,
    linger_ms: float = 5,
    compression: str = "none",
    enable_idempotence: bool | None = None,
    echo: Echo = print,
) -> ProduceResult:
    """Send num_records records of record_size bytes as fast as allowed; time every delivery.

    Records go out through `send_nowait` (no await per record), yielding to trio every
    YIELD_EVERY_BYTES of records so the producer's sender ships the full batches (requests
    in flight) while the loop keeps building the next ones."""
    value = payload(record_size)
    errors: list[str] = []
    # Yield about every 64 KiB of records (4 default batches): the sender then finds several
    # full batches and ships them in one request, as Kafka's sender thread does when the
    # application outpaces it; yielding per batch makes one small request per batch.
    batches_per_yield = max(1, YIELD_EVERY_BYTES // max(1, batch_size))
    per_yield = (
        1 if throughput > 0 else batches_per_yield * records_per_batch(record_size, batch_size)
    )
    async with Producer(
        bootstrap,
        security=cli_security(),
        acks=acks,
        batch_size=batch_size,
        linger_ms=linger_ms,
        compression=compression,
        enable_idempotence=enable_idempotence,
        client_id="highwater-perf",
    ) as producer:
        await producer.partitions_for(topic)  # metadata first: not part of the measurement
        clock = time.perf_counter
        wall = time.time
        started = clock()
        stats = LatencyStats(started, record_size)
        record_latency = stats.latencies_ms.append
        next_window_s = started + REPORT_INTERVAL_S

        def on_delivery(future: DeliveryFuture) -> None:
            # Latency from the record's own timestamp (wall-clock ms at send), so the hot loop
            # adds no per-record state: ms resolution, as Kafka's tool has.
            error = future.exception()
            if error is None:
                record_latency(wall() * 1000 - future.timestamp_ms)
            else:
                errors.append(str(error))

        send_nowait = producer.send_nowait
        sent = 0
        while sent < num_records:
            chunk = min(per_yield, num_records - sent)
            for _ in range(chunk):
                try:
                    send_nowait(topic, value, callback=on_delivery)
                except trio.WouldBlock:  # buffer memory full: wait for it, as Kafka's send
                    await producer.send(topic, value, callback=on_delivery)
            sent += chunk
            await trio.lowlevel.checkpoint()  # the sender runs: full batches leave now
            now = clock()
            if throughput > 0:
                ahead_s = started + sent / throughput - now
                if ahead_s > 0:
                    await trio.sleep(ahead_s)
            if now >= next_window_s:
                line = stats.take_window(now)
                next_window_s = now + REPORT_INTERVAL_S
                if line is not None:
                    echo(line)
        await producer.flush()
        elapsed = clock() - started
    return ProduceResult(
        sent=len(stats.latencies_ms),
        failed=len(errors),
        elapsed_s=elapsed,
        bytes_total=stats.bytes_total,
        latencies_ms=stats.latencies_ms,
        first_error=errors[0] if errors else None,
    )


# --- perf consume ----------------------------------------------------------------------------


@dataclass
class ConsumeResult:
    count: int
    bytes_total: int
    start_wall_s: float
    end_wall_s: float
    fetch_s: float
    # (partition, first offset, next offset) consumed, for the decode-only yardstick
    ranges: list[tuple[int, int, int]]

    @property
    def rate(self) -> float:
        return self.count / self.fetch_s if self.fetch_s > 0 else 0.0


async def run_consume_perf(
    bootstrap: str, topic: str, *, messages: int, timeout_ms: int
) -> ConsumeResult:
    """Read `messages` records from the beginning of every partition of topic."""
    async with Consumer(bootstrap, client_id="highwater-perf", security=cli_security()) as consumer:
        partitions = await consumer.partitions_for(topic)
        tps = [(topic, p) for p in partitions]
        consumer.assign(tps)
        consumer.seek_to_beginning(tps)
        count = size = 0
        start_wall = time.time()
        started = time.perf_counter()
        # Each partition's first offset, resolved now (the first poll would ask for it anyway)
        # so that the loop below counts bytes only, as Kafka's ConsumerPerformance does.
        first = {tp: await consumer.position(tp) for tp in tps}
        idle_since = started
        while count < messages:
            records = await consumer.poll(timeout_ms=100, max_records=messages - count)
            now = time.perf_counter()
            if not records:
                if (now - idle_since) * 1000 >= timeout_ms:
                    raise HighwaterTimeoutError(
                        f"no record for {timeout_ms} ms after {count} of {messages} records "
                        f"(is the topic that full? lower --messages or raise --timeout)"
                    )
                continue
            idle_since = now
            for r in records:
                size += len(r.value or b"") + len(r.key or b"")
            count += len(records)
        fetch_s = time.perf_counter() - started
        end_wall = time.time()
        ends = {tp: await consumer.position(tp) for tp in tps}
    ranges = [(tp[1], first[tp], ends[tp]) for tp in tps if ends[tp] > first[tp]]
    return ConsumeResult(count, size, start_wall, end_wall, fetch_s, ranges)


async def fetch_raw_batches(
    bootstrap: str, topic: str, ranges: Sequence[tuple[int, int, int]], max_bytes: int = MB
) -> list[bytes]:
    """The stored batches covering each (partition, first, next) range, as Fetch returns them."""
    metadata = ClusterMetadata(bootstrap, client_id="highwater-perf", security=cli_security())
    buffers: list[bytes] = []
    try:
        await metadata.wait_for_topic(topic, 10_000)
        for partition, offset, end in ranges:
            while offset < end:
                leader = metadata.leader_for(topic, partition)
                if leader is None:
                    raise HighwaterClientError(f"no leader for {topic}-{partition}")
                request = FetchRequest(
                    replica_id=CONSUMER_REPLICA_ID,
                    max_wait_ms=0,
                    min_bytes=0,
                    max_bytes=max_bytes,
                    topics=(FetchTopic(topic, (FetchPartition(partition, offset, max_bytes),)),),
                )
                response: FetchResponse = await metadata.request(leader, request)
                data = response.responses[0].partitions[0]
                if data.error_code != ErrorCode.NONE:
                    name = ErrorCode(data.error_code).name
                    raise HighwaterClientError(f"fetching {topic}-{partition} at {offset}: {name}")
                whole, offset = _whole_batches(data.records, offset)
                if not whole:
                    raise HighwaterClientError(f"no whole batch at {topic}-{partition} {offset}")
                buffers.append(whole)
    finally:
        await metadata.aclose()
    return buffers


def _whole_batches(records: bytes, offset: int) -> tuple[bytes, int]:
    """The complete batches at the start of a Fetch's records, and the offset after them."""
    pos = 0
    while len(records) - pos >= BATCH_HEADER_BYTES:
        header = read_header(records, pos)
        if pos + header.size > len(records):
            break
        pos += header.size
        offset = header.next_offset
    return records[:pos], offset


# --- perf end-to-end -------------------------------------------------------------------------

_WARM_UP = (2**64 - 1).to_bytes(8, "big")  # a sequence number no timed record has


async def run_end_to_end_perf(
    bootstrap: str,
    topic: str,
    *,
    num_records: int,
    record_size: int,
    throughput: float,
    acks: int = -1,
    linger_ms: float = 0,
    timeout_s: float = 120,
    enable_idempotence: bool | None = None,
) -> list[float]:
    """Produce at a fixed rate to partition 0 while a consumer in the same process reads it;
    return each record's produce-to-consume latency in ms (sorted). The consumer sees a record
    only once it is committed (below the HW), so with RF>1 this includes replication."""
    size = max(record_size, 8)
    filler = payload(size - 8)
    sent_at: dict[int, float] = {}
    latencies: list[float] = []
    clock = time.perf_counter
    async with (
        Producer(
            bootstrap,
            security=cli_security(),
            acks=acks,
            linger_ms=linger_ms,
            enable_idempotence=enable_idempotence,
            client_id="highwater-e2e",
        ) as producer,
        Consumer(bootstrap, client_id="highwater-e2e", security=cli_security()) as consumer,
    ):
        await producer.partitions_for(topic)
        consumer.assign([(topic, 0)])
        consumer.seek_to_end([(topic, 0)])
        await consumer.poll(timeout_ms=0)  # resolve the end offset before the first send
        # One record through the whole path first, untimed: a partition created a moment ago
        # may wait for its followers' first fetch (replica.fetch.backoff.ms after a fetch that
        # came before the leader knew it led), which is not the steady state measured here.
        delivery = await producer.send(topic, _WARM_UP + filler, partition=0)
        warm_up = (await delivery).offset
        while not any(r.offset >= warm_up for r in await consumer.poll(timeout_ms=100)):
            pass

        async def consume() -> None:
            while len(latencies) < num_records:
                for r in await consumer.poll(timeout_ms=100):
                    sequence = int.from_bytes((r.value or b"")[:8], "big")
                    started = sent_at.pop(sequence, None)
                    if started is not None:
                        latencies.append((clock() - started) * 1000)

        with trio.fail_after(timeout_s):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(consume)
                started = clock()
                for sequence in range(num_records):
                    ahead_s = started + sequence / throughput - clock()
                    if ahead_s > 0:
                        await trio.sleep(ahead_s)
                    sent_at[sequence] = clock()
                    producer.send_nowait(topic, sequence.to_bytes(8, "big") + filler, partition=0)
                await producer.flush()
    return sorted(latencies)


def end_to_end_line(latencies_ms: Sequence[float], throughput: float) -> str:
    p50, p99, p999 = (percentile(latencies_ms, f) for f in (0.5, 0.99, 0.999))
    return (
        f"{len(latencies_ms)} records at {throughput:.0f} records/sec, produce to consume: "
        f"{p50:.1f} ms 50th, {p99:.1f} ms 99th, {p999:.1f} ms 99.9th, "
        f"{latencies_ms[-1] if latencies_ms else 0:.1f} ms max."
    )
