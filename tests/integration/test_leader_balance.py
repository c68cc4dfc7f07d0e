"""Leadership balance with real brokers and a real ZooKeeper: the automatic leader rebalance
after a bounce, preferred elections on demand (the CLI), and partitions added to a live topic.

Producers run throughout with acks=all; every acknowledged record must be readable after.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.errors import HighwaterClientError
from client.producer import Producer
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from tests.integration.cluster_harness import Cluster, eventually
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    ZkView,
    create_topic,
    logged_events,
    produce,
    read_committed,
    running_cluster,
    wait_isr,
    wait_led,
    whole_cluster_around,
    zk_view,
)

pytestmark = [pytest.mark.integration]

OVERRIDES = {**FAST_REPLICATION, "zookeeper.session.timeout.ms": "4000"}
AUTO_REBALANCE = {
    **OVERRIDES,
    "auto.leader.rebalance.enable": "true",
    "leader.imbalance.check.interval.seconds": "1",
    "leader.imbalance.per.broker.percentage": "0",
}
MANUAL = {**OVERRIDES, "auto.leader.rebalance.enable": "false"}


@pytest.fixture(scope="module")
def auto_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("auto"), AUTO_REBALANCE) as c:
        yield c


@pytest.fixture(scope="module")
def manual_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("manual"), MANUAL) as c:
        yield c


@pytest.fixture
def auto(auto_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    for _ in whole_cluster_around(auto_cluster, request):
        yield auto_cluster


@pytest.fixture
def manual(manual_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    for _ in whole_cluster_around(manual_cluster, request):
        yield manual_cluster


class AckedLog:
    """What a background producer got acknowledged: (partition, offset, value)."""

    def __init__(self) -> None:
        self.acked: list[tuple[int, int, bytes]] = []
        self.failed = 0

    def partitions(self) -> set[int]:
        return {p for p, _, _ in self.acked}


async def produce_until(
    cluster: Cluster,
    topic: str,
    log: AckedLog,
    stop: trio.Event,
    *,
    partitions: int | None,
    metadata_max_age_ms: int = 300_000,
) -> None:
    """acks=all, one record at a time, until `stop`: to partition i % `partitions`, or (None)
    keyed by i and placed by the partitioner."""
    async with Producer(
        cluster.bootstrap,
        acks="all",
        linger_ms=0,
        max_in_flight_requests_per_connection=1,
        delivery_timeout_ms=20_000,
        request_timeout_ms=5_000,
        retry_backoff_ms=50,
        metadata_max_age_ms=metadata_max_age_ms,
    ) as producer:
        i = 0
        while not stop.is_set():
            value = f"v{i}".encode()
            partition = None if partitions is None else i % partitions
            key = None if partitions is not None else f"k{i}".encode()
            future = await producer.send(topic, value, key=key, partition=partition)
            try:
                meta = await future
            except HighwaterClientError:
                log.failed += 1  # not acknowledged: no promise made
            else:
                log.acked.append((meta.partition, meta.offset, value))
            i += 1


async def assert_no_acked_record_lost(
    cluster: Cluster, topic: str, log: AckedLog, partitions: int
) -> None:
    """Every acked record is readable at its offset (so each partition keeps the order of
    acknowledgement); records whose send failed may or may not be there."""
    for partition in range(partitions):
        read = await read_committed(cluster, topic, partition)
        for p, offset, value in log.acked:
            if p == partition:
                assert offset < len(read) and read[offset] == value, (topic, p, offset, value)


async def soon(predicate: Callable[[], object], timeout_s: float, what: str) -> None:
    """`eventually` for a plain (non-async) condition."""

    async def check() -> object:
        return predicate()

    await eventually(check, timeout_s, what)


async def controller_id(zk: ZkView) -> int:
    found = await zk.controller()
    assert found is not None
    return found[0]


def sigkill_and_start(cluster: Cluster, broker_id: int) -> None:
    """A crash: no controlled shutdown; the controller notices when the session expires,
    then the broker starts again (possibly before that)."""
    cluster.brokers[broker_id].kill()
    cluster.brokers[broker_id].start()


def sigterm_and_start(cluster: Cluster, broker_id: int) -> None:
    """SIGTERM: a controlled shutdown moves its leaderships away first."""
    cluster.brokers[broker_id].restart()


@pytest.mark.timeout(90)
@pytest.mark.parametrize("bounce", [sigterm_and_start, sigkill_and_start])
async def test_automatic_rebalance_restores_preferred_leaders_after_a_bounce(
    auto: Cluster, bounce: Callable[[Cluster, int], None]
) -> None:
    topic = f"rebalance-{bounce.__name__.split('_')[0]}"
    async with zk_view(auto) as zk:
        controller = await controller_id(zk)
        victim = next(b for b in auto.brokers if b != controller)
        other = next(b for b in auto.brokers if b not in (controller, victim))
        # The victim is the preferred leader of partitions 0 and 1.
        replicas = [(victim, other), (victim, controller), (other, victim)]
        await create_topic(auto, topic, replicas)
        log, stop = AckedLog(), trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: produce_until(auto, topic, log, stop, partitions=len(replicas))
            )
            await soon(lambda: len(log.acked) >= 30, 20, "records acked before the bounce")
            mark = len(auto.brokers[controller].log_text())
            # The producer goes on while the victim is down and returns.
            await trio.to_thread.run_sync(bounce, auto, victim)
            for partition in (0, 1):
                await wait_led(auto, zk, topic, partition, victim, timeout_s=30)
            await wait_isr(auto, zk, topic, 2, [other, victim], leader=other)
            acked_before = len(log.acked)
            await soon(lambda: len(log.acked) >= acked_before + 30, 20, "acks after")
            stop.set()
        moved = [
            e
            for e in logged_events(auto.brokers[controller], "partition leader elected", since=mark)
            if e.get("topic") == topic and e.get("leader") == victim
        ]
        assert moved, "the controller elected the preferred replica again"
        checks = logged_events(auto.brokers[controller], "preferred replica imbalance", since=mark)
        counts = [e["preferred_replica_imbalance_count"] for e in checks]
        assert any(c > 0 for c in counts), counts  # the imbalance was seen ...
        await soon(
            lambda: logged_events(
                auto.brokers[controller],
                "preferred replica imbalance",
                since=mark,
                preferred_replica_imbalance_count=0,
            ),
            10,
            "an imbalance check with nothing left to move",
        )
    await assert_no_acked_record_lost(auto, topic, log, len(replicas))


def run_cli(cluster: Cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "client.cli", *args, "-b", cluster.bootstrap],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
        check=False,
    )


@pytest.mark.timeout(90)
async def test_preferred_election_on_demand_with_the_rebalance_off(manual: Cluster) -> None:
    topic = "manual"
    async with zk_view(manual) as zk:
        controller = await controller_id(zk)
        victim = next(b for b in manual.brokers if b != controller)
        other = next(b for b in manual.brokers if b not in (controller, victim))
        await create_topic(manual, topic, [(victim, other), (other, victim)])
        manual.brokers[victim].restart()
        # Back in the ISR, but with the rebalance off nobody moves leadership back to it.
        await wait_isr(manual, zk, topic, 0, [victim, other], leader=other)
        await wait_isr(manual, zk, topic, 1, [victim, other], leader=other)

        one = ["--topic", topic, "--partition", "0"]
        elected = run_cli(manual, "elect-leaders", "--election-type", "preferred", *one)
        assert elected.returncode == 0, elected.stderr
        assert elected.stdout.splitlines() == [f"{topic}-0: elected"]
        await wait_led(manual, zk, topic, 0, victim)

        every = ["--all-topic-partitions"]
        again = run_cli(manual, "elect-leaders", "--election-type", "preferred", *every)
        assert again.returncode == 0, again.stderr
        lines = [line for line in again.stdout.splitlines() if line.startswith(f"{topic}-")]
        assert lines == [
            f"{topic}-0: already led by the preferred replica",
            f"{topic}-1: already led by the preferred replica",
        ]

        # The preferred replica gone: not available, and nothing changes.
        manual.brokers[other].kill()
        await wait_led(manual, zk, topic, 1, victim)
        async with Admin(manual.live_bootstrap) as admin:
            results = await admin.elect_leaders(ElectionType.PREFERRED, [(topic, 1)])
        assert [(r.partition, r.error_code) for r in results] == [
            (1, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE)
        ]


@pytest.mark.timeout(90)
async def test_partitions_added_to_a_live_topic_receive_data(manual: Cluster) -> None:
    topic = "grow"
    async with zk_view(manual) as zk:
        ids = sorted(manual.brokers)
        await create_topic(manual, topic, [(ids[0], ids[1]), (ids[1], ids[2])])
        log, stop = AckedLog(), trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(
                lambda: produce_until(
                    manual, topic, log, stop, partitions=None, metadata_max_age_ms=1_000
                )
            )
            await soon(lambda: len(log.acked) >= 20, 20, "records acked before")
            assert log.partitions() <= {0, 1}
            alter = ("topics", "alter", topic, "--partitions", "4")
            result = await trio.to_thread.run_sync(run_cli, manual, *alter)
            assert result.returncode == 0, result.stderr
            assert result.stdout == f"Topic {topic} now has 4 partitions.\n"
            for partition in (2, 3):
                state = await zk.partition_state(topic, partition)
                assert state is not None and state.leader >= 0
            await soon(lambda: {2, 3} <= log.partitions(), 20, "new partitions used")
            stop.set()
        refused = run_cli(manual, "topics", "alter", topic, "--partitions", "3")
        assert refused.returncode == 1
        assert "INVALID_PARTITIONS" in refused.stderr
    # Every acked record is there, each partition in the order it was acknowledged.
    await assert_no_acked_record_lost(manual, topic, log, 4)


@pytest.mark.timeout(90)
async def test_unclean_election_on_demand_brings_an_offline_partition_back(
    manual: Cluster,
) -> None:
    """Leader a and follower b; b dies and leaves the ISR, then a dies: offline, and with
    unclean.leader.election.enable=false b coming back does not lead. The operator's
    `elect-leaders --election-type unclean` makes b leader, with a warning first."""
    topic = "unclean-on-demand"
    async with zk_view(manual) as zk:
        controller = await controller_id(zk)
        a, b = (x for x in sorted(manual.brokers) if x != controller)
        await create_topic(manual, topic, [(a, b)])
        await produce(manual, topic, 0, [b"before"])
        manual.brokers[b].kill()
        await wait_isr(manual, zk, topic, 0, [a], leader=a)
        manual.brokers[a].kill()
        manual.brokers[b].start()

        async def offline_with_b_back() -> bool:
            state = await zk.partition_state(topic, 0)
            registered = await zk.broker_registration(b)
            return state is not None and state.leader == -1 and registered is not None

        await eventually(offline_with_b_back, 30, f"{topic}-0 offline, broker {b} back")
        one = ["--topic", topic, "--partition", "0"]
        elected = run_cli(manual, "elect-leaders", "--election-type", "unclean", *one)
        assert elected.returncode == 0, elected.stdout + elected.stderr
        assert "unclean" in elected.stderr.lower()  # the warning
        assert elected.stdout.splitlines() == [f"{topic}-0: elected"]
        state = await wait_led(manual, zk, topic, 0, b)
        assert state.isr == (b,)
        assert await produce(manual, topic, 0, [b"after"]) == [1]
