"""The clients' side of a round: `highwater perf end-to-end` run in this process, with the
producer's and the consumer's request paths timed from outside.

Against a running cluster and an existing topic (docs/performance.md, "The clients' side of a
round"):

    python -m tests.benchmarks.client_gaps -b 127.0.0.1:9092 --topic e2e [--num-records N]

Prints the tool's latency line, then, over all but the first tenth of the run, medians and
means of: a Produce request's time in the producer (sent to answered); the gap from one
Produce's answer to the next Produce going out; and the gap from a Fetch answer that brought
records to `poll` returning them. A diagnostic: it wraps the clients' internal methods
(`BrokerConnection.request`, `Fetcher._handle_partition`, `Consumer.poll`), so it follows
their names (tests/unit/benchmarks/test_client_gaps.py checks them).
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import time
from collections.abc import Callable
from typing import Any

import trio

from client.cli.perf_tools import end_to_end_line, run_end_to_end_perf
from client.consumer import consumer as consumer_module
from client.consumer import fetcher as fetcher_module
from client.network import BrokerConnection
from protocol.messages.produce import ProduceRequest


class _Timings:
    def __init__(self) -> None:
        self.produce: list[tuple[float, float]] = []  # (sent, answered) per Produce
        self.fetched_at = 0.0  # the last Fetch answer that brought records
        self.to_poll: list[float] = []  # that answer to poll returning, seconds

    def install(self) -> Callable[[], None]:
        """Wrap the clients' methods; returns what undoes it."""
        timings = self
        request, handle, poll = (
            BrokerConnection.request,
            fetcher_module.Fetcher._handle_partition,
            consumer_module.Consumer.poll,
        )

        async def timed_request(conn: BrokerConnection, body: object, *a: Any, **k: Any) -> Any:
            if not isinstance(body, ProduceRequest):
                return await request(conn, body, *a, **k)
            sent = time.perf_counter()
            answer = await request(conn, body, *a, **k)
            timings.produce.append((sent, time.perf_counter()))
            return answer

        def timed_handle(fetcher: Any, *a: Any) -> bool:
            got = handle(fetcher, *a)
            if got:
                timings.fetched_at = time.perf_counter()
            return got

        async def timed_poll(consumer: Any, *a: Any, **k: Any) -> Any:
            records = await poll(consumer, *a, **k)
            if records and timings.fetched_at:
                timings.to_poll.append(time.perf_counter() - timings.fetched_at)
            return records

        BrokerConnection.request = timed_request  # type: ignore[method-assign,assignment]
        fetcher_module.Fetcher._handle_partition = timed_handle  # type: ignore[method-assign,assignment]
        consumer_module.Consumer.poll = timed_poll  # type: ignore[method-assign,assignment]

        def undo() -> None:
            BrokerConnection.request = request  # type: ignore[method-assign]
            fetcher_module.Fetcher._handle_partition = handle  # type: ignore[method-assign]
            consumer_module.Consumer.poll = poll  # type: ignore[method-assign]

        return undo

    def report(self) -> list[str]:
        produce = self.produce[len(self.produce) // 10 :]
        to_poll = self.to_poll[len(self.to_poll) // 10 :]
        gaps = [after[0] - before[1] for before, after in itertools.pairwise(produce)]
        return [
            f"Produce requests: {len(self.produce)}",
            _line("a Produce, sent to answered", [a - s for s, a in produce]),
            _line("a Produce answered to the next one sent", gaps),
            _line("a Fetch answer with records to poll returning them", to_poll),
        ]


def _line(what: str, seconds: list[float]) -> str:
    if not seconds:
        return f"{what}: none"
    median_ms, mean_ms = statistics.median(seconds) * 1000, statistics.fmean(seconds) * 1000
    return f"{what}: median {median_ms:.2f} ms, mean {mean_ms:.2f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-b", "--bootstrap-server", required=True)
    parser.add_argument("--topic", required=True)
    parser.add_argument("--num-records", type=int, default=100_000)
    parser.add_argument("--throughput", type=float, default=10_000)
    args = parser.parse_args()
    timings = _Timings()
    undo = timings.install()
    try:
        latencies = trio.run(
            lambda: run_end_to_end_perf(
                args.bootstrap_server,
                args.topic,
                num_records=args.num_records,
                record_size=100,
                throughput=args.throughput,
            )
        )
    finally:
        undo()
    print(end_to_end_line(latencies, args.throughput))
    print("\n".join(timings.report()))


if __name__ == "__main__":
    main()
