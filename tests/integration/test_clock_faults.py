"""Clock faults: one broker's wall clock jumps 10 minutes ahead, then 20 minutes back.

Three real brokers, each with libfaketime preloaded (tests/integration/clock_faults.py, only
the wall clock moves, as when NTP or an operator steps it), RF=3, min.insync.replicas=2, an
idempotent acks=all producer throughout, half its records with timestamps it sets itself (an
hour back) and half with its own clock's. On the leader of the partition:
- ahead by 10 minutes: no follower leaves the ISR (lag checks use the monotonic clock; on the
  wall clock every follower looked 10 minutes behind) and acks go on;
- then back by 20 minutes: a follower that stops fetching (SIGSTOP) leaves the ISR within
  about 1.5 x replica.lag.time.max.ms, not 20 minutes later, so acks=all writes go on
  with the other two; it rejoins when it runs again; the leader's high-watermark checkpoint
  keeps being written on its interval (the scheduler's timers are monotonic).
At the end, clocks back: every acknowledged record is at its offset once, in the order sent,
with the timestamp its producer set, and the replicas hold identical batches.

Skipped where libfaketime is missing or does not work (`apt-get install faketime`).
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer
from client.errors import HighwaterClientError
from client.producer import Producer
from tests.chaos.workload import read_partition_records
from tests.integration.clock_faults import PICKUP_S, FakeClock, unavailable
from tests.integration.cluster_harness import Cluster, eventually
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    ZkView,
    create_topic,
    log_end_offset,
    wait_converged,
    wait_whole,
    zk_view,
)

pytestmark = [pytest.mark.integration]

TOPIC = "clock-faults"
LAG_MS = 4000
AHEAD_S = 600
BACK_S = -600  # from +600: a step back of 20 minutes


@pytest.mark.timeout(300)
async def test_a_broker_clock_stepped_ahead_and_back_loses_nothing_and_keeps_an_honest_isr(
    zookeeper: ZooKeeperServer, tmp_path: Path
) -> None:
    reason = unavailable(tmp_path)
    if reason is not None:
        pytest.skip(reason)
    overrides = {
        **FAST_REPLICATION,
        "replica.lag.time.max.ms": str(LAG_MS),
        # Longer than a lag check takes: a stopped follower leaves the ISR by its leader's
        # lag check, not by its session's expiry.
        "zookeeper.session.timeout.ms": "30000",
        "min.insync.replicas": "2",
        "replica.high.watermark.checkpoint.interval.ms": "500",
    }
    cluster = Cluster(zookeeper.port, tmp_path, 3, overrides)
    clocks = {b: FakeClock(tmp_path / f"clock-{b}") for b in cluster.brokers}
    for broker in cluster.brokers.values():
        broker.env = clocks[broker.broker_id].env()
    cluster.start()
    try:
        async with zk_view(cluster) as view:
            await _story(cluster, view, clocks)
    except BaseException:
        print(cluster.logs(tail_chars=20_000))
        raise
    finally:
        cluster.stop()


async def _story(cluster: Cluster, view: ZkView, clocks: dict[int, FakeClock]) -> None:
    await wait_whole(cluster, timeout_s=60)
    found = await view.controller()
    assert found is not None
    controller = found[0]
    # The leader is not the controller, so its clock is the only one that moves here.
    others = [b for b in sorted(cluster.brokers) if b != controller]
    await create_topic(cluster, TOPIC, [[*others, controller]], {"min.insync.replicas": "2"})
    leader, follower = others

    async def isr() -> tuple[int, ...]:
        state = await view.partition_state(TOPIC, 0)
        assert state is not None
        return state.isr

    async def full_isr() -> bool:
        return len(await isr()) == 3

    await eventually(full_isr, 30, "an ISR of three")
    acked: list[tuple[int, bytes, int]] = []  # offset, value, timestamp the producer set
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_produce_until, cluster.bootstrap, acked, stop)
        await _acks_beyond(acked, 50)

        # Ahead by 10 minutes: nobody leaves the ISR, acks go on.
        smallest_isr = 3
        clocks[leader].set_offset_s(AHEAD_S)
        skewed_from = len(acked)
        with trio.move_on_after(PICKUP_S + 3 * LAG_MS / 1000):
            while True:
                smallest_isr = min(smallest_isr, len(await isr()))
                await trio.sleep(0.05)
        assert smallest_isr == 3, f"the ISR shrank to {smallest_isr} with the clock 10 min ahead"
        await _acks_beyond(acked, skewed_from + 50)

        # Back by 20 minutes, then a follower stops: it leaves the ISR within the lag time.
        clocks[leader].set_offset_s(BACK_S)
        await trio.sleep(PICKUP_S)
        before = await view.partition_state(TOPIC, 0)
        assert before is not None
        cluster.brokers[follower].pause()
        paused_at = trio.current_time()

        async def follower_out() -> bool:
            return follower not in await isr()

        await eventually(follower_out, 1.5 * LAG_MS / 1000 + 12, f"broker {follower} out")
        out_after_s = trio.current_time() - paused_at
        after = await view.partition_state(TOPIC, 0)
        assert after is not None
        # The leader's own ISR write keeps the leader epoch; the controller's removal of a
        # broker whose session expired would have bumped it.
        assert after.leader_epoch == before.leader_epoch, "the leader dropped it, not a session"
        await _acks_beyond(acked, len(acked) + 50)
        cluster.brokers[follower].resume()
        resumed_at = trio.current_time()
        await eventually(full_isr, 60, f"broker {follower} back in the ISR")
        back_after_s = trio.current_time() - resumed_at

        # The leader's high-watermark checkpoint is still written on its interval.
        target = len(acked)

        async def checkpointed() -> bool:
            hw = cluster.brokers[leader].checkpointed_high_watermark(TOPIC, 0)
            return hw is not None and hw >= target

        target_at = trio.current_time()
        await eventually(checkpointed, 30, "the leader's HW checkpoint after the step back")
        checkpoint_after_s = trio.current_time() - target_at
        stop.set()

    for clock in clocks.values():
        clock.set_offset_s(0)
    print(
        f"clock 10 min ahead: smallest ISR {smallest_isr}; 20 min back: the stopped follower"
        f" out of the ISR after {out_after_s:.1f} s (lag time {LAG_MS / 1000:.0f} s), back"
        f" {back_after_s:.1f} s after it resumed; the HW checkpoint reached the acked end"
        f" {checkpoint_after_s:.1f} s later (interval 0.5 s); {len(acked)} records acked"
    )
    stored = await read_partition_records(cluster.bootstrap, TOPIC, 0)
    for offset, value, timestamp in acked:
        assert offset < len(stored), f"acked offset {offset} lost"
        assert stored[offset] == (value, timestamp), (offset, value, timestamp, stored[offset])
    values = [v for v, _ in stored]
    assert len(set(values)) == len(values), "no record twice"
    sequence = [int(v.split(b"-")[1]) for v in values if v is not None]
    assert sequence == sorted(sequence), "records in the order the producer sent them"
    brokers = list(cluster.brokers.values())
    end = max([e for b in brokers if (e := await log_end_offset(b, TOPIC, 0)) is not None])
    await wait_converged(brokers, TOPIC, 0, end, timeout_s=60)


async def _acks_beyond(acked: list[tuple[int, bytes, int]], count: int) -> None:
    async def enough() -> bool:
        return len(acked) >= count

    await eventually(enough, 60, f"{count} acknowledged records")


async def _produce_until(
    bootstrap: str, acked: list[tuple[int, bytes, int]], stop: trio.Event
) -> None:
    async with Producer(
        bootstrap,
        acks="all",
        linger_ms=5,
        delivery_timeout_ms=60_000,
        request_timeout_ms=5_000,
        retry_backoff_ms=100,
        metadata_max_age_ms=2_000,
    ) as producer:
        i = 0
        an_hour_ago_ms = time.time_ns() // 1_000_000 - 3_600_000
        while not stop.is_set():
            value = f"v-{i}".encode()
            timestamp = an_hour_ago_ms + i if i % 2 else None
            i += 1
            try:
                meta = await (
                    await producer.send(TOPIC, value, partition=0, timestamp_ms=timestamp)
                )
            except HighwaterClientError:
                continue  # not acknowledged: no promise made
            acked.append((meta.offset, value, meta.timestamp))
            await trio.sleep(0.01)
