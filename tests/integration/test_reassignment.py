"""Partition reassignment with real brokers and a real ZooKeeper: move an RF=2 topic from
two brokers to two others while producing (acks=all) and consuming, with the controller
alive throughout, and with it killed (SIGKILL) in the middle (the next one finishes).

Outcomes checked: no acknowledged record lost, the consumer's offsets strictly increase (no
duplicates), the removed replica's log directory is gone, ZooKeeper's assignment is the
target, and the plan znode is removed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.consumer import Consumer
from client.producer import Producer
from controller import zk_data
from protocol.errors import ErrorCode
from tests.integration.cluster_harness import Cluster, eventually
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    ZkView,
    create_topic,
    logged_events,
    running_cluster,
    whole_cluster_around,
    zk_view,
)
from tests.integration.test_leader_balance import (
    AckedLog,
    assert_no_acked_record_lost,
    controller_id,
    produce_until,
    soon,
)

pytestmark = [pytest.mark.integration]

OVERRIDES = {**FAST_REPLICATION, "zookeeper.session.timeout.ms": "4000"}


@pytest.fixture(scope="module")
def reassign_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("reassign"), OVERRIDES) as c:
        yield c


@pytest.fixture
def cluster(reassign_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    for _ in whole_cluster_around(reassign_cluster, request):
        yield reassign_cluster


class ConsumedLog:
    """What a background consumer read: partition -> [(offset, value)]."""

    def __init__(self) -> None:
        self.records: dict[int, list[tuple[int, bytes | None]]] = {}


async def consume_until(
    cluster: Cluster, topic: str, partitions: int, log: ConsumedLog, stop: trio.Event
) -> None:
    async with Consumer(
        cluster.bootstrap,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        metadata_max_age_ms=1_000,
        request_timeout_ms=5_000,
    ) as consumer:
        consumer.assign([(topic, p) for p in range(partitions)])
        while not stop.is_set():
            for record in await consumer.poll(timeout_ms=200):
                log.records.setdefault(record.partition, []).append((record.offset, record.value))


def assert_consumed_in_order(consumed: ConsumedLog, acked: AckedLog) -> None:
    """Strictly increasing offsets (no duplicate, no going back), and each acked record the
    consumer got is the acked value."""
    by_offset = {(p, o): v for p, o, v in acked.acked}
    for partition, records in consumed.records.items():
        offsets = [o for o, _ in records]
        assert offsets == sorted(set(offsets)), f"partition {partition} offsets not increasing"
        for offset, value in records:
            expected = by_offset.get((partition, offset))
            assert expected is None or expected == value, (partition, offset)


async def assignment(zk: ZkView, topic: str) -> dict[int, tuple[int, ...]]:
    found = await zk.zk.get(zk_data.topic_path(topic))
    assert found is not None
    return dict(zk_data.TopicAssignment.decode(found[0]).partitions)


async def plan_exists(zk: ZkView) -> bool:
    return await zk.zk.exists(zk_data.REASSIGN_PARTITIONS_PATH) is not None


async def wait_reassigned(
    cluster: Cluster, zk: ZkView, topic: str, plan: dict[int, tuple[int, ...]], removed: int
) -> None:
    """The target assignment in ZooKeeper, the ISR within it, the plan gone, and the removed
    replica's logs deleted."""

    async def done() -> bool:
        if await assignment(zk, topic) != plan or await plan_exists(zk):
            return False
        for partition, target in plan.items():
            state = await zk.partition_state(topic, partition)
            if state is None or not set(state.isr) <= set(target) or state.leader not in target:
                return False
            if cluster.brokers[removed].partition_dir(topic, partition).exists():
                return False
        return True

    await eventually(done, 45, f"{topic} reassigned to {plan}")


def run_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client.cli", *args, "-b", cluster.live_bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )


def write_plan(path: Path, topic: str, plan: dict[int, tuple[int, ...]]) -> str:
    entries = [{"topic": topic, "partition": p, "replicas": list(r)} for p, r in plan.items()]
    path.write_text(json.dumps({"version": 1, "partitions": entries}))
    return str(path)


@pytest.mark.timeout(90)
async def test_reassign_while_producing_and_consuming(cluster: Cluster, tmp_path: Path) -> None:
    topic = "moving"
    await create_topic(cluster, topic, [(1, 2), (2, 1)])
    plan = {0: (2, 3), 1: (3, 2)}
    plan_file = write_plan(tmp_path / "plan.json", topic, plan)
    acked, consumed, stop = AckedLog(), ConsumedLog(), trio.Event()
    async with zk_view(cluster) as zk, trio.open_nursery() as nursery:
        nursery.start_soon(lambda: produce_until(cluster, topic, acked, stop, partitions=2))
        nursery.start_soon(consume_until, cluster, topic, 2, consumed, stop)
        await soon(lambda: len(acked.acked) >= 200, 30, "records acked before")

        generated = await trio.to_thread.run_sync(
            lambda: run_cli(
                cluster, "reassign", "--generate", "--topics", topic, "--broker-list", "2,3"
            )
        )
        assert generated.returncode == 0, generated.stderr
        proposed = json.loads(generated.stdout.strip().splitlines()[-1])
        assert {tuple(e["replicas"]) for e in proposed["partitions"]} <= {(2, 3), (3, 2)}

        executed = await trio.to_thread.run_sync(
            lambda: run_cli(cluster, "reassign", "--execute", "--plan", plan_file)
        )
        assert executed.returncode == 0, executed.stderr
        assert f"{topic}-0: reassignment started" in executed.stdout
        await wait_reassigned(cluster, zk, topic, plan, removed=1)
        acked_before = len(acked.acked)
        await soon(lambda: len(acked.acked) >= acked_before + 100, 30, "acks after the move")
        stop.set()

    verified = run_cli(cluster, "reassign", "--verify", "--plan", plan_file)
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert f"{topic}-1: reassignment completed" in verified.stdout
    listed = run_cli(cluster, "reassign", "--list")
    assert listed.stdout.strip() == "No partition reassignments in progress."
    assert_consumed_in_order(consumed, acked)
    assert sum(len(r) for r in consumed.records.values()) > 0
    await assert_no_acked_record_lost(cluster, topic, acked, 2)


@pytest.mark.timeout(90)
async def test_reassignment_completes_after_the_controller_is_killed(cluster: Cluster) -> None:
    topic = "moving-failover"
    async with zk_view(cluster) as zk:
        controller = await controller_id(zk)
        removed, kept = (b for b in sorted(cluster.brokers) if b != controller)
        # From {removed, kept} to {kept, controller}: the controller is an adding replica,
        # killed before it can catch up.
        await create_topic(cluster, topic, [(removed, kept)])
        plan = {0: (kept, controller)}
        acked, consumed, stop = AckedLog(), ConsumedLog(), trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(lambda: produce_until(cluster, topic, acked, stop, partitions=1))
            nursery.start_soon(consume_until, cluster, topic, 1, consumed, stop)
            await soon(lambda: len(acked.acked) >= 300, 30, "records acked before")
            async with Admin(cluster.live_bootstrap) as admin:
                results = await admin.alter_partition_reassignments({(topic, 0): plan[0]})
                assert [(r.partition, r.error_code) for r in results] == [(0, ErrorCode.NONE)]
                cluster.brokers[controller].kill()
            # In the middle: RS = target + original, the plan still in ZooKeeper.
            assert await plan_exists(zk)
            assert await assignment(zk, topic) == {0: (kept, controller, removed)}
            await eventually(
                lambda: _new_controller(zk, controller), 30, "another controller elected"
            )
            successor = await controller_id(zk)
            cluster.brokers[controller].start()
            await wait_reassigned(cluster, zk, topic, plan, removed=removed)
            finished = logged_events(
                cluster.brokers[successor], "partition reassignment completed", since=0
            )
            assert [e["target_replicas"] for e in finished if e["topic"] == topic] == [
                list(plan[0])
            ], "the new controller finished it"
            acked_before = len(acked.acked)
            await soon(lambda: len(acked.acked) >= acked_before + 100, 30, "acks after")
            stop.set()
    assert_consumed_in_order(consumed, acked)
    await assert_no_acked_record_lost(cluster, topic, acked, 1)


async def _new_controller(zk: ZkView, old: int) -> bool:
    found = await zk.controller()
    return found is not None and found[0] != old


@pytest.mark.timeout(60)
async def test_list_and_cancel_a_stalled_reassignment(cluster: Cluster) -> None:
    topic = "moving-cancelled"
    async with zk_view(cluster) as zk:
        # Move from (controller, a) to (a, b) and pause b, the adding replica (briefly: well
        # within its session timeout), so the reassignment cannot finish before it is
        # cancelled. The paused broker must not be the controller, which answers the admin.
        found = await zk.controller()
        assert found is not None
        controller = found[0]
        a, b = sorted(set(cluster.brokers) - {controller})
        await create_topic(cluster, topic, [(controller, a)])
        cluster.brokers[b].pause()
        try:
            async with Admin(cluster.live_bootstrap) as admin:
                started = await admin.alter_partition_reassignments({(topic, 0): (a, b)})
                assert [r.error_code for r in started] == [ErrorCode.NONE]
                (ongoing,) = await admin.list_partition_reassignments()
                assert (ongoing.topic, ongoing.partition) == (topic, 0)
                assert ongoing.replicas == (a, b, controller)
                assert (ongoing.adding_replicas, ongoing.removing_replicas) == ((b,), (controller,))
                cancelled = await admin.alter_partition_reassignments({(topic, 0): None})
                assert [r.error_code for r in cancelled] == [ErrorCode.NONE]
                again = await admin.alter_partition_reassignments({(topic, 0): None})
                assert [r.error_code for r in again] == [ErrorCode.NO_REASSIGNMENT_IN_PROGRESS]
                assert await admin.list_partition_reassignments() == []
        finally:
            cluster.brokers[b].resume()
        assert await assignment(zk, topic) == {0: (controller, a)}
        assert not await plan_exists(zk)

        async def added_replica_deleted() -> bool:
            return not cluster.brokers[b].partition_dir(topic, 0).exists()

        await eventually(added_replica_deleted, 20, "the cancelled replica's log deleted")
    listed = run_cli(cluster, "reassign", "--list")
    assert listed.stdout.strip() == "No partition reassignments in progress."


THROTTLE_BYTES_PER_SEC = 1_000_000


@pytest.mark.timeout(90)
async def test_a_throttled_reassignment_copies_no_faster_than_the_throttle(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Move a single-replica partition holding ~5 MB to (a, b) with --throttle 1 MB/s: the
    new replica's catch-up, and so the move, takes at least the time the throttle allows
    (less the first windows' allowance), and the copy is complete and whole afterwards."""
    topic = "moving-throttled"
    async with zk_view(cluster) as zk:
        controller = await controller_id(zk)
        a, b = sorted(set(cluster.brokers) - {controller})
        await create_topic(cluster, topic, [(a,)])
        async with Producer(cluster.live_bootstrap, acks=1, linger_ms=20) as producer:
            value = os.urandom(1000)
            for i in range(5000):
                await producer.send(topic, value, key=str(i).encode(), partition=0)
        copied_bytes = sum(p.stat().st_size for p in cluster.brokers[a].segments(topic, 0))
        assert copied_bytes > 4_500_000

        plan = {0: (a, b)}
        plan_file = write_plan(tmp_path / "plan.json", topic, plan)
        started = trio.current_time()
        executed = await trio.to_thread.run_sync(
            lambda: run_cli(
                cluster,
                *("reassign", "--execute", "--plan", plan_file),
                *("--throttle", str(THROTTLE_BYTES_PER_SEC)),
            )
        )
        assert executed.returncode == 0, executed.stderr
        assert f"throttle: {THROTTLE_BYTES_PER_SEC} B/s" in executed.stdout
        (state,) = [ZkPlanState.read(await zk.zk.get(zk_data.REASSIGN_PARTITIONS_PATH))]
        assert state == {(topic, 0): THROTTLE_BYTES_PER_SEC}, "the throttle is kept in the plan"

        async def moved() -> bool:
            found = await zk.partition_state(topic, 0)
            return (
                await assignment(zk, topic) == plan
                and not await plan_exists(zk)
                and found is not None
                and set(found.isr) == {a, b}
            )

        await eventually(moved, 60, f"{topic} reassigned to {plan}")
        elapsed_s = trio.current_time() - started
    # Kafka's quota lets roughly one window's worth through before it bites.
    floor_s = (copied_bytes - 2 * THROTTLE_BYTES_PER_SEC) / THROTTLE_BYTES_PER_SEC
    assert elapsed_s >= floor_s, f"{copied_bytes} B moved in {elapsed_s:.1f} s"
    new_copy = sum(p.stat().st_size for p in cluster.brokers[b].segments(topic, 0))
    assert new_copy == copied_bytes


class ZkPlanState:
    @staticmethod
    def read(found: tuple[bytes, object] | None) -> dict[tuple[str, int], int]:
        assert found is not None, "the plan znode exists while the move runs"
        return dict(zk_data.ReassignmentPlan.decode(found[0]).throttles)
