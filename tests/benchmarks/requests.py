"""Per-request broker CPU: a small Produce, a replica Fetch of one batch, a long-poll
(docs/performance.md, "Per request").

Run: `make bench-requests` (or `.venv/bin/python -m tests.benchmarks.requests [--profile DIR]`).
Starts its own local cluster (3 brokers) and drives it in lockstep from one connection per
role, so each round is exactly the request named, then reads each broker's CPU from /proc
(utime + stime: robust to other load on the machine, unlike wall-clock figures) and divides by
the rounds, less the broker's idle CPU over the same time:
- produce: Produce acks=1 of one batch of one 100-byte record, RF=1 (the leader's CPU);
- replica fetch: Produce acks=all of one batch to RF=2 (min.insync.replicas=1): per round the
  follower handles exactly one Fetch response carrying that batch and sends its next Fetch
  (the follower's CPU), and the leader answers it and takes the next one, which moves the HW
  (the leader's CPU less a produce round's);
- long-poll: a consumer Fetch parks at the end of an RF=1 log, then a Produce acks=1 wakes it
  (the leader's CPU less a produce round's).
`--profile DIR` runs each measure again under py-spy (--gil: only time the broker runs Python)
and writes DIR/<measure>-broker<N>.txt (collapsed stacks, for flame graphs or reading).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import trio

from client.metadata import ClusterMetadata
from client.network import BrokerConnection, connect
from protocol.errors import ErrorCode
from protocol.messages.create_topics import (
    CreatableReplicaAssignment,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
)
from protocol.messages.fetch import (
    CONSUMER_REPLICA_ID,
    FetchPartition,
    FetchRequest,
    FetchTopic,
)
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.records import Record, build_batch
from tests.benchmarks.proc_cpu import broker_pids, cpu_seconds, load_average
from tests.benchmarks.replication import local_cluster

RECORD_BYTES = 100
IDLE_S = 2.0  # how long each broker's idle CPU rate is sampled
PARK_S = 0.002  # a long-poll Fetch is given this long to park before the produce that wakes it

Round = Callable[[], Awaitable[None]]


@dataclass
class Measure:
    name: str
    broker: int  # whose CPU is the figure
    minus: str | None  # the measure whose per-round CPU is subtracted (its own part)
    rounds_per_s: float = 0.0
    cpu_us: list[float] | None = None  # per round, one value per repetition


def produce_request(topic: str, acks: int) -> ProduceRequest:
    batch = build_batch([Record(b"x" * RECORD_BYTES)])
    return ProduceRequest(
        acks, 30_000, (ProduceTopicData(topic, (ProducePartitionData(0, batch),)),)
    )


async def create_topics(bootstrap: str) -> ClusterMetadata:
    metadata = ClusterMetadata(bootstrap, client_id="bench-requests")
    await metadata.maybe_refresh()

    def topic(name: str, replicas: tuple[int, ...], min_isr: int) -> CreatableTopic:
        return CreatableTopic(
            name,
            -1,
            -1,
            (CreatableReplicaAssignment(0, replicas),),
            (CreatableTopicConfig("min.insync.replicas", str(min_isr)),),
        )

    request = CreateTopicsRequest(
        (topic("req-rf1", (1,), 1), topic("req-rf2", (1, 2), 1), topic("req-poll", (1,), 1)),
        30_000,
    )
    conn = await metadata.any_connection()
    response = await conn.request(request)
    for result in response.topics:
        if result.error_code not in (ErrorCode.NONE, ErrorCode.TOPIC_ALREADY_EXISTS):
            raise SystemExit(f"create {result.name}: {ErrorCode(result.error_code).name}")
    for name in ("req-rf1", "req-rf2", "req-poll"):
        await metadata.wait_for_topic(name, 30_000)
    return metadata


class Driver:
    """The lockstep rounds, each on its own connections to broker 1."""

    def __init__(self, producer: BrokerConnection, consumer: BrokerConnection) -> None:
        self.producer = producer
        self.consumer = consumer
        self.produce_rf1 = produce_request("req-rf1", 1)
        self.produce_rf2 = produce_request("req-rf2", -1)
        self.produce_poll = produce_request("req-poll", 1)
        self.poll_offset = 0

    async def produce(self) -> None:
        response = await self.producer.request(self.produce_rf1)
        _check(response.responses[0].partition_responses[0].error_code)

    async def replicated(self) -> None:
        response = await self.producer.request(self.produce_rf2)
        _check(response.responses[0].partition_responses[0].error_code)

    async def long_poll(self) -> None:
        request = FetchRequest(
            CONSUMER_REPLICA_ID,
            10_000,
            1,
            1 << 20,
            (FetchTopic("req-poll", (FetchPartition(0, self.poll_offset, 1 << 20),)),),
        )
        async with trio.open_nursery() as nursery:

            async def fetch() -> None:
                response = await self.consumer.request(request)
                data = response.responses[0].partitions[0]
                _check(data.error_code)
                if not data.records:
                    raise SystemExit("the long-poll Fetch returned nothing")
                self.poll_offset = data.high_watermark

            nursery.start_soon(fetch)
            await trio.sleep(PARK_S)
            response = await self.producer.request(self.produce_poll)
            _check(response.responses[0].partition_responses[0].error_code)


def _check(code: int) -> None:
    if code != ErrorCode.NONE:
        raise SystemExit(f"request failed: {ErrorCode(code).name}")


async def idle_rates(pids: dict[int, int]) -> dict[int, float]:
    before = {b: cpu_seconds(p) for b, p in pids.items()}
    started = time.perf_counter()
    await trio.sleep(IDLE_S)
    elapsed = time.perf_counter() - started
    return {b: (cpu_seconds(p) - before[b]) / elapsed for b, p in pids.items()}


async def run_rounds(
    fn: Round, rounds: int, pids: dict[int, int]
) -> tuple[dict[int, float], float]:
    """Per-round CPU seconds of each broker (idle not yet subtracted) and the elapsed time."""
    before = {b: cpu_seconds(p) for b, p in pids.items()}
    started = time.perf_counter()
    for _ in range(rounds):
        await fn()
    elapsed = time.perf_counter() - started
    return {b: (cpu_seconds(p) - before[b]) for b, p in pids.items()}, elapsed


async def measure(
    bootstrap: str,
    pids: dict[int, int],
    rounds: int,
    repeats: int,
    profile: Path | None,
    profile_rounds: int,
) -> dict[str, Measure]:
    metadata = await create_topics(bootstrap)
    try:
        broker = metadata.brokers[1]
        producer = await connect(broker.host, broker.port, client_id="bench-producer")
        consumer = await connect(broker.host, broker.port, client_id="bench-consumer")
        driver = Driver(producer, consumer)
        replicated = driver.replicated  # one object: the two replica fetch figures share it
        measures = {
            "produce": (Measure("produce", 1, None), driver.produce),
            "replica fetch (follower)": (Measure("replica fetch (follower)", 2, None), replicated),
            "replica fetch (leader)": (Measure("replica fetch (leader)", 1, "produce"), replicated),
            "long-poll": (Measure("long-poll", 1, "produce"), driver.long_poll),
        }
        for fn in {id(fn): fn for _, fn in measures.values()}.values():
            for _ in range(200):  # warm up: the first rounds pay imports and caches
                await fn()
        idle = await idle_rates(pids)
        per_round: dict[str, list[dict[int, float]]] = {name: [] for name in measures}
        elapsed_by: dict[str, list[float]] = {name: [] for name in measures}
        # Interleaved repetitions: a change in the machine's load touches every measure alike.
        for _ in range(repeats):
            done: dict[int, tuple[dict[int, float], float]] = {}
            for name, (_, fn) in measures.items():
                key = id(fn)
                if key not in done:  # the two replica fetch figures share their rounds
                    done[key] = await run_rounds(fn, rounds, pids)
                used, elapsed = done[key]
                per_round[name].append({b: (used[b] - idle[b] * elapsed) / rounds for b in pids})
                elapsed_by[name].append(elapsed)
        out = {}
        for name, (m, _) in measures.items():
            m.rounds_per_s = rounds / statistics.median(elapsed_by[name])
            values = []
            for i, sample in enumerate(per_round[name]):
                own = sample[m.broker]
                if m.minus is not None:
                    own -= per_round[m.minus][i][m.broker]
                values.append(own * 1e6)
            m.cpu_us = values
            out[name] = m
        if profile is not None:
            seen: set[int] = set()
            for name, (_, fn) in measures.items():
                if id(fn) in seen:
                    continue
                seen.add(id(fn))
                await profiled(name, fn, profile_rounds, pids, profile)
        await producer.aclose()
        await consumer.aclose()
        return out
    finally:
        await metadata.aclose()


async def profiled(name: str, fn: Round, rounds: int, pids: dict[int, int], out: Path) -> None:
    """The same rounds under py-spy, one recorder per broker."""
    stem = name.split(" (")[0].replace(" ", "-")
    spies = [
        subprocess.Popen(  # noqa: ASYNC220 (started once, left running while trio runs)
            [
                str(Path(sys.executable).with_name("py-spy")),
                "record",
                "--gil",
                "--nonblocking",
                "-r",
                "500",
                "-f",
                "raw",
                "-p",
                str(pid),
                "-o",
                str(out / f"{stem}-broker{b}.txt"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        for b, pid in pids.items()
    ]
    await trio.sleep(1.0)  # py-spy attaches
    for _ in range(rounds):
        await fn()
    for spy in spies:
        spy.send_signal(2)  # SIGINT: py-spy writes its file and exits
    for spy in spies:
        spy.wait(timeout=30)


def report(measures: dict[str, Measure], rounds: int) -> None:
    print(f"{rounds} lockstep rounds per repetition; {load_average()}")
    print(f"{'measure':<28}{'broker':>7}{'CPU us/request (median, range)':>36}{'rounds/s':>10}")
    for m in measures.values():
        assert m.cpu_us is not None
        med = statistics.median(m.cpu_us)
        text = f"{med:.0f} ({min(m.cpu_us):.0f}-{max(m.cpu_us):.0f})"
        print(f"{m.name:<28}{m.broker:>7}{text:>36}{m.rounds_per_s:>10.0f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--base-port", type=int, default=19292)
    parser.add_argument("--zk-port", type=int, default=32381)
    parser.add_argument("--profile", type=Path, default=None, help="write py-spy profiles here")
    parser.add_argument("--profile-rounds", type=int, default=10_000)
    args = parser.parse_args()
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    with local_cluster(args.base_port, args.zk_port) as (bootstrap, root):
        pids = broker_pids(root / "cluster")
        measures = trio.run(
            measure, bootstrap, pids, args.rounds, args.repeats, args.profile, args.profile_rounds
        )
    report(measures, args.rounds)


if __name__ == "__main__":
    main()
