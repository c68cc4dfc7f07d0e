"""A continuous acks=all producer for fault tests, remembering when each acknowledgement came.

`AckLog` holds what was acknowledged (offset, value) and when (trio time), and answers the
questions a partition test asks: did the producer make progress after a moment, and what
was its longest stall within an interval. `produce_until` fills one, a record at a time.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import trio

from client.errors import HighwaterClientError
from client.producer import Producer
from tests.integration.cluster_harness import eventually

__all__ = ["AckLog", "produce_until"]


@dataclass
class AckLog:
    records: list[tuple[int, bytes]] = field(default_factory=list)  # (offset, value), in order
    times: list[float] = field(default_factory=list)  # trio.current_time() of each ack
    failed: int = 0  # sends that ended in an error (no promise made)

    def __len__(self) -> int:
        return len(self.records)

    def add(self, offset: int, value: bytes) -> None:
        self.records.append((offset, value))
        self.times.append(trio.current_time())

    def acked_after(self, moment: float) -> int:
        return sum(1 for t in self.times if t > moment)

    async def progress(
        self, count: int, timeout_s: float, what: str, since: float | None = None
    ) -> float:
        """Wait for `count` acks after `since` (default: now); returns when the first came."""
        start = trio.current_time() if since is None else since

        async def enough() -> bool:
            return self.acked_after(start) >= count

        await eventually(enough, timeout_s, f"{count} acks {what}")
        return next(t for t in self.times if t > start)

    def longest_stall(self, start: float, end: float) -> float:
        """The longest time without an ack within [start, end] (the edges count as acks)."""
        inside = [t for t in self.times if start < t < end]
        moments = [start, *inside, end]
        return max(b - a for a, b in itertools.pairwise(moments))


async def produce_until(
    bootstrap: str, topic: str, acks: AckLog, stop: trio.Event, request_timeout_ms: int = 5_000
) -> None:
    """Send distinct values one at a time (acks=all, idempotent) to partition 0 until `stop`."""
    async with Producer(
        bootstrap,
        acks="all",
        linger_ms=0,
        delivery_timeout_ms=30_000,
        request_timeout_ms=request_timeout_ms,
        retry_backoff_ms=100,
        metadata_max_age_ms=2_000,
    ) as producer:
        i = 0
        while not stop.is_set():
            value = f"v{i}".encode()
            i += 1
            try:
                meta = await (await producer.send(topic, value, partition=0))
            except HighwaterClientError:
                acks.failed += 1
                continue  # not acknowledged: no promise made
            acks.add(meta.offset, value)
            await trio.sleep(0.01)  # a steady trickle, not a flood, on a shared machine
