"""Consumer-group benchmarks (docs/groups.md, "Figures"), run by `make bench-groups`, on a
real 3-broker cluster (__consumer_offsets RF 3, acks=all):

1. commit rate: OffsetCommit requests of one partition each, answered only once the ISR has
   the record, from 1 and from 8 concurrent connections, commits/s, beside the same number
   of connections sending one-record acks=all Produce requests (the ceiling);
2. join time: from a fourth consumer's subscribe() to a stable group (every member owns its
   target assignment) when three members are already stable; p50/p99 over 20 joins, with
   the default heartbeat interval (5 s) and with 500 ms (brokers restarted between);
3. consume throughput of one group member against the same consumer with assign(), over the
   same prefilled topic, interleaved, median of 3 (aim >= 0.9).

Figures, not pass/fail checks; the aims are printed beside them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

from client.admin import Admin
from client.consumer import Consumer
from client.network import connect
from client.producer import Producer
from protocol.errors import ErrorCode
from protocol.messages.find_coordinator import FindCoordinatorRequest, FindCoordinatorResponse
from protocol.messages.offset_commit import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
)
from protocol.messages.produce import (
    ProducePartitionData,
    ProduceRequest,
    ProduceResponse,
    ProduceTopicData,
)
from protocol.records import Record, build_batch
from tests.integration.cluster_harness import Cluster
from tests.integration.replication_checks import FAST_REPLICATION, create_topic, prepare_cluster

PARTITIONS = 6
VALUE_BYTES = 100
SPREAD = [[1, 2, 3], [2, 3, 1], [3, 1, 2]] * 2  # six partitions, leaders spread


# -- 1. commit rate -------------------------------------------------------------------------


async def coordinator_address(cluster: Cluster, group: str) -> tuple[str, int]:
    conn = await connect("127.0.0.1", cluster.brokers[1].port)
    try:
        while True:
            response = await conn.request(FindCoordinatorRequest((group,)))
            assert isinstance(response, FindCoordinatorResponse)
            (found,) = response.coordinators
            if found.error_code == ErrorCode.NONE:
                return found.host, found.port
            await trio.sleep(0.1)  # the offsets topic is being created: ask again
    finally:
        await conn.aclose()


async def requests_per_s(
    addresses: list[tuple[str, int]],
    request_for: Callable[[int, int], Any],
    error_of: Callable[[Any], int],
    seconds: float,
) -> float:
    """One connection per address, each sending `request_for(connection, n)` one at a time
    for `seconds`; every answer's `error_of` must be NONE."""
    done = 0
    deadline = trio.current_time() + seconds

    async def loop(i: int, host: str, port: int) -> None:
        nonlocal done
        conn = await connect(host, port)
        try:
            n = 0
            while trio.current_time() < deadline:
                code = error_of(await conn.request(request_for(i, n)))
                assert code == ErrorCode.NONE, ErrorCode(code)
                n += 1
            done += n
        finally:
            await conn.aclose()

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for i, (host, port) in enumerate(addresses):
            nursery.start_soon(loop, i, host, port)
    return done / (trio.current_time() - start)


async def commit_rate(cluster: Cluster, connections: int, seconds: float) -> float:
    """OffsetCommits of one partition each (connection i commits partition i % PARTITIONS)."""
    group = f"committers-{connections}"
    coordinator = await coordinator_address(cluster, group)

    def commit(i: int, n: int) -> OffsetCommitRequest:
        topic = OffsetCommitTopic("bench", (OffsetCommitPartition(i % PARTITIONS, n),))
        return OffsetCommitRequest(group, (topic,))

    def error_of(response: OffsetCommitResponse) -> int:
        return response.topics[0].partitions[0].error_code

    return await requests_per_s([coordinator] * connections, commit, error_of, seconds)


async def produce_rate(cluster: Cluster, connections: int, seconds: float) -> float:
    """The ceiling for commits: one-record Produce requests, acks=all, each connection to the
    leader of its partition (a commit is one record appended the same way)."""
    batch = build_batch([Record(b"x" * 60, key=b"k")], now_ms=0)
    leaders = [cluster.brokers[SPREAD[i % PARTITIONS][0]] for i in range(connections)]

    def produce(i: int, n: int) -> ProduceRequest:
        data = ProducePartitionData(i % PARTITIONS, batch)
        return ProduceRequest(-1, 30_000, (ProduceTopicData("bench", (data,)),))

    def error_of(response: ProduceResponse) -> int:
        return response.responses[0].partition_responses[0].error_code

    addresses = [(b.host, b.port) for b in leaders]
    return await requests_per_s(addresses, produce, error_of, seconds)


# -- 2. join time ---------------------------------------------------------------------------


async def stable(admin: Admin, group: str, members: int) -> bool:
    (described,) = await admin.describe_groups([group])
    return (
        described.state == "Stable"
        and len(described.members) == members
        and all(m.assignment == m.target_assignment and m.assignment for m in described.members)
    )


async def wait_for(condition: Callable[[], Awaitable[bool]], timeout_s: float, what: str) -> None:
    deadline = trio.current_time() + timeout_s
    while not await condition():
        if trio.current_time() > deadline:
            raise TimeoutError(f"no {what} after {timeout_s} s")
        await trio.sleep(0.01)  # polling a describe: the figure's resolution is ~10 ms


async def member(bootstrap: str, group: str, stop: trio.Event, ready: trio.Event) -> None:
    async with Consumer(bootstrap, group_id=group, auto_offset_reset="latest") as consumer:
        consumer.subscribe(["bench"])
        ready.set()
        while not stop.is_set():
            await consumer.poll(timeout_ms=100)


async def join_times(bootstrap: str, joins: int, label: str) -> list[float]:
    group = f"joiners-{label}"
    times: list[float] = []
    async with Admin(bootstrap) as admin, trio.open_nursery() as nursery:
        stop_all = trio.Event()
        for _ in range(3):
            nursery.start_soon(member, bootstrap, group, stop_all, trio.Event())
        await wait_for(lambda: stable(admin, group, 3), 120, "three stable members")
        for _ in range(joins):
            stop, ready = trio.Event(), trio.Event()
            start = time.perf_counter()
            nursery.start_soon(member, bootstrap, group, stop, ready)
            await wait_for(lambda: stable(admin, group, 4), 120, "four stable members")
            times.append(time.perf_counter() - start)
            stop.set()  # it leaves (epoch -1); its partitions go back to the three
            await wait_for(lambda: stable(admin, group, 3), 120, "three stable again")
        stop_all.set()
    return times


# -- 3. consume throughput ------------------------------------------------------------------


async def fill(bootstrap: str, count: int) -> None:
    value = os.urandom(VALUE_BYTES)
    async with Producer(bootstrap, linger_ms=5) as producer:
        for i in range(count):
            try:
                producer.send_nowait("bench", value, partition=i % PARTITIONS)
            except trio.WouldBlock:
                await producer.send("bench", value, partition=i % PARTITIONS)
            if i % 100 == 0:
                await trio.lowlevel.checkpoint()
        await producer.flush()


async def consume_rate(bootstrap: str, count: int, group: str | None) -> float:
    async with Consumer(bootstrap, group_id=group, auto_offset_reset="earliest") as consumer:
        if group is None:
            consumer.assign(("bench", p) for p in range(PARTITIONS))
        else:
            consumer.subscribe(["bench"])
        seen = 0
        start = time.perf_counter()
        while seen < count:
            seen += len(await consumer.poll(timeout_ms=1000))
        return seen / (time.perf_counter() - start)


# -- the run --------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer joins, fewer records")
    args = parser.parse_args()
    from client.cli.zookeeper_server import ZooKeeperServer, free_port

    directory = Path(tempfile.mkdtemp(prefix="highwater-bench-groups-"))
    joins = 5 if args.quick else 20
    records = 100_000 if args.quick else 300_000
    zookeeper = ZooKeeperServer(directory / "zookeeper", free_port())
    zookeeper.start()
    overrides = {**FAST_REPLICATION, "offsets.topic.replication.factor": "3"}
    cluster = Cluster(zookeeper.port, directory / "cluster", 3, overrides)
    try:
        cluster.start()
        prepare_cluster(cluster, timeout_s=60)
        trio.run(create_topic, cluster, "bench", SPREAD)
        bootstrap = cluster.bootstrap

        print("== commit rate: OffsetCommit, acks=all, __consumer_offsets RF 3")
        print("(beside one-record acks=all Produce requests, the same way of appending)")
        for connections in (1, 8):
            commits = trio.run(commit_rate, cluster, connections, 5.0)
            produces = trio.run(produce_rate, cluster, connections, 5.0)
            print(
                f"{connections} connection(s): {commits:8.0f} commits/s  "
                f"{produces:8.0f} produces/s  ratio {commits / produces:.2f}"
            )

        trio.run(fill, bootstrap, records)
        print(f"\n== consume {records} records of {VALUE_BYTES} B, {PARTITIONS} partitions")
        plain: list[float] = []
        grouped: list[float] = []
        for run in range(3):
            plain.append(trio.run(consume_rate, bootstrap, records, None))
            grouped.append(trio.run(consume_rate, bootstrap, records, f"reader-{run}"))
        p, g = statistics.median(plain), statistics.median(grouped)
        print(f"assign():         {p:9.0f} records/s  (runs {[round(r) for r in plain]})")
        print(f"group member:     {g:9.0f} records/s  (runs {[round(r) for r in grouped]})")
        print(f"ratio {g / p:.2f}  aim >= 0.9")

        print(f"\n== join time: a fourth member to a stable group of three, {joins} joins")
        for interval_ms in (5000, 500):
            for broker in cluster.brokers.values():
                broker.overrides["group.consumer.heartbeat.interval.ms"] = str(interval_ms)
                broker.restart()
            prepare_cluster(cluster, timeout_s=60)
            times = trio.run(join_times, bootstrap, joins, str(interval_ms))
            print(
                f"heartbeat {interval_ms:5} ms: p50 {percentile(times, 0.5):6.2f} s  "
                f"p99 {percentile(times, 0.99):6.2f} s  max {max(times):6.2f} s"
            )
    finally:
        cluster.stop()
        zookeeper.stop()
        shutil.rmtree(directory, ignore_errors=True)


if __name__ == "__main__":
    main()
