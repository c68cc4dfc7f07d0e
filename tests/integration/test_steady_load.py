"""Replication under steady load while brokers fail (reduced): docs/reliability.md, "The
scenarios, and where they are tested", 5.

3 brokers, a topic with 3 partitions, RF=3, min.insync.replicas=2. A producer (acks=all, the
client's retries) sends unique values at a steady rate and a consumer reads all the time,
while the leader of partition 0 and then the controller go through a clean bounce (SIGTERM,
controlled shutdown) and a hard bounce (SIGKILL, restart after the ZooKeeper session expired).
Afterwards every acknowledged value was consumed, at the offset it was acknowledged at, and
the consumer's offsets only increased within each partition. Without the idempotent producer
a retried send may appear twice; that is allowed here (docs/reliability.md, "Guarantees":
only the idempotent producer stores a retried send once).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer
from client.consumer import Consumer
from client.errors import HighwaterClientError
from client.producer import DeliveryFuture, Producer
from tests.integration.cluster_harness import BrokerProcess, Cluster
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    ZkView,
    create_topic,
    running_cluster,
    wait_isr,
    wait_whole,
    zk_view,
)

pytestmark = [pytest.mark.integration]

SESSION_TIMEOUT_MS = 6000
OVERRIDES = {**FAST_REPLICATION, "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS)}
SESSION_EXPIRY_S = SESSION_TIMEOUT_MS / 1000 + 2  # ZooKeeper checks sessions once per tick
PARTITIONS = 3
RATE_PER_S = 200


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("steady")
    with running_cluster(zookeeper.port, directory, OVERRIDES) as cluster:
        yield cluster


class Workload:
    """Unique values to round-robin partitions; what was acked where, and what was read."""

    def __init__(self, cluster: Cluster, topic: str) -> None:
        self.cluster = cluster
        self.topic = topic
        self.acked: dict[bytes, tuple[int, int]] = {}
        self.failed: list[bytes] = []
        self.consumed: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(PARTITIONS)}
        self.stop_producing = trio.Event()
        self.all_settled = trio.Event()  # every send acked or failed, the producer closed

    async def produce(self) -> None:
        async with (
            Producer(
                self.cluster.bootstrap, acks="all", linger_ms=1, delivery_timeout_ms=60_000
            ) as producer,
            trio.open_nursery() as nursery,
        ):
            sequence = 0
            while not self.stop_producing.is_set():
                value = b"v%06d" % sequence
                future = await producer.send(self.topic, value, partition=sequence % PARTITIONS)
                nursery.start_soon(self._settle, value, future)
                sequence += 1
                await trio.sleep(1 / RATE_PER_S)
        self.all_settled.set()

    async def _settle(self, value: bytes, future: DeliveryFuture) -> None:
        try:
            metadata = await future
        except HighwaterClientError:  # not acked: it may or may not be in the log
            self.failed.append(value)
            return
        self.acked[value] = (metadata.partition, metadata.offset)

    async def consume(self) -> None:
        async with Consumer(self.cluster.bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([(self.topic, p) for p in range(PARTITIONS)])
            consumer.seek_to_beginning()
            while True:
                for record in await consumer.poll(timeout_ms=200):
                    self.consumed[record.partition].append((record.offset, record.value or b""))
                # Only once every send has settled: a send still in flight when production
                # stopped may be acked after an earlier check found nothing missing.
                if self.all_settled.is_set() and self._all_acked_seen():
                    return

    def _all_acked_seen(self) -> bool:
        seen = {(p, offset) for p, items in self.consumed.items() for offset, _ in items}
        return all(where in seen for where in self.acked.values())


async def _leader_of(zk: ZkView, topic: str, partition: int) -> int:
    state = await zk.partition_state(topic, partition)
    assert state is not None
    return state.leader


async def _controller(zk: ZkView) -> int:
    found = await zk.controller()
    assert found is not None
    return found[0]


async def _bounce(cluster: Cluster, broker: BrokerProcess, *, hard: bool) -> None:
    if hard:
        broker.kill()
        await trio.sleep(SESSION_EXPIRY_S)  # restart after the session expired
    else:
        # SIGTERM and wait for the exit off the event loop: the workload keeps running.
        assert await trio.to_thread.run_sync(broker.stop) == 0
    broker.start()
    await wait_whole(cluster)


@pytest.mark.timeout(240)
async def test_acked_records_survive_bounces_under_load(cluster: Cluster) -> None:
    topic = "steady-load"
    ids = sorted(cluster.brokers)
    async with zk_view(cluster) as zk:
        await create_topic(
            cluster,
            topic,
            [ids[p:] + ids[:p] for p in range(PARTITIONS)],
            {"min.insync.replicas": "2"},
        )
        workload = Workload(cluster, topic)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(workload.produce)
            nursery.start_soon(workload.consume)
            for target in ("leader", "controller"):
                for hard in (False, True):
                    await trio.sleep(1)  # steady traffic before each fault
                    if target == "leader":
                        victim = await _leader_of(zk, topic, 0)
                    else:
                        victim = await _controller(zk)
                    await _bounce(cluster, cluster.brokers[victim], hard=hard)
                    for p in range(PARTITIONS):
                        await wait_isr(cluster, zk, topic, p, ids, timeout_s=60)
            await trio.sleep(1)
            workload.stop_producing.set()
            # In-flight sends settle and the consumer catches up; whatever is still missing
            # after this shows up in the assertions below.
            nursery.cancel_scope.deadline = trio.current_time() + 90

    print(f"acked {len(workload.acked)}, failed {len(workload.failed)}")
    assert len(workload.acked) > 10 * RATE_PER_S / 2, "the producer made progress"
    for p, items in workload.consumed.items():
        offsets = [offset for offset, _ in items]
        assert offsets == sorted(set(offsets)), f"partition {p}: offsets must strictly increase"
    at = {(p, offset): value for p, items in workload.consumed.items() for offset, value in items}
    lost = [v for v, where in workload.acked.items() if at.get(where) != v]
    assert lost == [], f"{len(lost)} acked records not consumed at their offsets: {lost[:5]}"
