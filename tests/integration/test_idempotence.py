"""The idempotent producer against real brokers and a real ZooKeeper (KIP-98: a produce whose
acknowledgement is lost is retried, and must not be written twice).

These tests speak the wire protocol directly, so each step is exact: send a batch and drop the
connection before the answer, SIGKILL the leader after its followers copied the batch, SIGKILL
and restart a single replica, then resend the very same bytes. Outcomes are read from the
replicas' files: one copy of every batch, at the offset first given.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer, free_port
from client.network import BrokerConnection, connect
from client.producer import Producer
from controller import zk_producer_ids
from protocol.errors import ErrorCode
from protocol.messages.produce import (
    ProducePartitionResponse,
)
from protocol.records import BatchHeader, Record, build_batch
from tests.chaos.workload import read_partition
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually
from tests.integration.lossy_proxy import LossyProxy
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    ZkView,
    create_topic,
    log_end_offset,
    running_cluster,
    wait_converged,
    wait_whole,
    whole_cluster_around,
    zk_view,
)
from tests.integration.wire import init_producer_id, produce_request, produce_to

pytestmark = [pytest.mark.integration]

OVERRIDES = {**FAST_REPLICATION, "zookeeper.session.timeout.ms": "4000"}


@pytest.fixture(scope="module")
def idempotence_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("idempotence"), OVERRIDES) as c:
        yield c


@pytest.fixture
def cluster(idempotence_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    for _ in whole_cluster_around(idempotence_cluster, request):
        yield idempotence_cluster


# -- wire helpers -------------------------------------------------------------------------


def idempotent_batch(pid: int, epoch: int, seq: int, count: int = 2) -> bytes:
    records = [Record(f"{pid}/{epoch}/{seq + i}".encode()) for i in range(count)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


async def send_and_drop(broker: BrokerProcess, topic: str, batch: bytes) -> BrokerConnection:
    """Send the produce and never read its answer (the caller closes the connection)."""
    conn = await connect("127.0.0.1", broker.port, timeout_ms=5000)
    await conn.request(produce_request(topic, batch), expect_response=False)
    return conn


async def leader_of(zk: ZkView, topic: str) -> int:
    state = await zk.partition_state(topic, 0)
    assert state is not None
    return state.leader


def copies(headers: list[BatchHeader], pid: int, seq: int) -> list[int]:
    """Base offsets of the stored batches with this producer id and base sequence."""
    return [h.base_offset for h in headers if (h.producer_id, h.base_sequence) == (pid, seq)]


async def wait_log_end(broker: BrokerProcess, topic: str, wanted: int) -> None:
    async def reached() -> bool:
        found = await log_end_offset(broker, topic, 0)
        return found is not None and found >= wanted

    await eventually(reached, 20, f"broker {broker.broker_id} LEO >= {wanted}")


# -- tests --------------------------------------------------------------------------------


@pytest.mark.timeout(60)
async def test_a_produce_whose_answer_is_lost_is_stored_once(cluster: Cluster) -> None:
    topic = "idem-lost-ack"
    await create_topic(cluster, topic, [(1, 2, 3)])
    async with zk_view(cluster) as zk:
        leader = cluster.brokers[await leader_of(zk, topic)]
    pid, epoch = await init_producer_id(leader)
    first = await produce_to(leader, topic, idempotent_batch(pid, epoch, 0))
    assert (first.error_code, first.base_offset) == (ErrorCode.NONE, 0)

    lost = idempotent_batch(pid, epoch, 2)
    conn = await send_and_drop(leader, topic, lost)
    await wait_log_end(leader, topic, 4)  # appended...
    conn.close_now()  # ...and the answer never arrives
    retry = await produce_to(leader, topic, lost)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, 2)
    after = await produce_to(leader, topic, idempotent_batch(pid, epoch, 4))
    assert (after.error_code, after.base_offset) == (ErrorCode.NONE, 4)

    await wait_converged(list(cluster.brokers.values()), topic, 0, 6)
    for broker in cluster.brokers.values():
        headers = broker.batch_headers(topic, 0)
        assert copies(headers, pid, 2) == [2], f"broker {broker.broker_id}"
        assert len(headers) == 3


@pytest.mark.timeout(90)
async def test_a_retry_after_the_leader_is_killed_is_deduplicated_by_the_new_leader(
    cluster: Cluster,
) -> None:
    """The batch reached every follower, then the leader died before answering; the producer
    resends to the new leader, which knows the batch from replication."""
    topic = "idem-leader-killed"
    async with zk_view(cluster) as zk:
        found = await zk.controller()
        assert found is not None
        # The leader is not the controller: killing it must not also move the controller.
        old_id = next(b for b in sorted(cluster.brokers) if b != found[0])
        others = [b for b in sorted(cluster.brokers) if b != old_id]
        await create_topic(cluster, topic, [(old_id, *others)])
        old = cluster.brokers[old_id]
        pid, epoch = await init_producer_id(old)
        for seq in (0, 2):
            answer = await produce_to(old, topic, idempotent_batch(pid, epoch, seq))
            assert answer.error_code == ErrorCode.NONE
        unacked = idempotent_batch(pid, epoch, 4)
        conn = await send_and_drop(old, topic, unacked)
        for follower in others:
            await wait_log_end(cluster.brokers[follower], topic, 6)
        old.kill()
        conn.close_now()

        async def new_leader() -> int | None:
            leader = await leader_of(zk, topic)
            return leader if leader in others else None

        successor = cluster.brokers[await eventually(new_leader, 30, "a new leader")]

        async def retried() -> ProducePartitionResponse | None:
            answer = await produce_to(successor, topic, unacked)
            return answer if answer.error_code == ErrorCode.NONE else None

        retry = await eventually(retried, 30, "the retry accepted by the new leader")
        assert retry.base_offset == 4, "the original offset, not a second copy"
        old.start()
        await wait_whole(cluster)
        replicas = list(cluster.brokers.values())
        await wait_converged(replicas, topic, 0, 6)
        for broker in replicas:
            assert copies(broker.batch_headers(topic, 0), pid, 4) == [4], broker.broker_id


@pytest.mark.timeout(90)
async def test_a_restarted_single_replica_rebuilds_producer_state_from_its_log(
    cluster: Cluster,
) -> None:
    """SIGKILL (no snapshot at close): the restarted broker replays its log's batch headers
    and still recognises the last batch when it is resent."""
    topic = "idem-single-restart"
    broker = cluster.brokers[3]
    await create_topic(cluster, topic, [(3,)])
    pid, epoch = await init_producer_id(broker)
    for seq in range(0, 10, 2):
        answer = await produce_to(broker, topic, idempotent_batch(pid, epoch, seq), acks=1)
        assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, seq)
    broker.kill()
    broker.start()
    await wait_whole(cluster)

    async def resent() -> ProducePartitionResponse | None:
        answer = await produce_to(broker, topic, idempotent_batch(pid, epoch, 8), acks=1)
        return answer if answer.error_code == ErrorCode.NONE else None

    retry = await eventually(resent, 30, "the resend answered")
    assert retry.base_offset == 8
    gap = await produce_to(broker, topic, idempotent_batch(pid, epoch, 14), acks=1)
    assert gap.error_code == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    headers = broker.batch_headers(topic, 0)
    assert [h.base_sequence for h in headers] == [0, 2, 4, 6, 8]


@pytest.mark.timeout(60)
async def test_the_error_matrix_over_the_wire(cluster: Cluster) -> None:
    topic = "idem-errors"
    await create_topic(cluster, topic, [(1, 2)])
    async with zk_view(cluster) as zk:
        leader = cluster.brokers[await leader_of(zk, topic)]
    pid, _ = await init_producer_id(leader)

    async def send(epoch: int, seq: int) -> tuple[ErrorCode, int]:
        answer = await produce_to(leader, topic, idempotent_batch(pid, epoch, seq))
        return ErrorCode(answer.error_code), answer.base_offset

    assert await send(0, 0) == (ErrorCode.NONE, 0)
    assert await send(0, 2) == (ErrorCode.NONE, 2)
    assert await send(0, 0) == (ErrorCode.NONE, 0), "a duplicate: its original offset"
    assert (await send(0, 6))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "a gap"
    assert await send(1, 0) == (ErrorCode.NONE, 4), "a new epoch starts at 0"
    assert (await send(0, 4))[0] == ErrorCode.INVALID_PRODUCER_EPOCH, "fenced"
    assert (await send(2, 5))[0] == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER, "new epoch not at 0"
    assert await send(1, 2) == (ErrorCode.NONE, 6)
    assert await log_end_offset(leader, topic, 0) == 8, "the refused batches wrote nothing"


@pytest.mark.timeout(60)
async def test_producer_ids_are_unique_across_the_cluster(cluster: Cluster) -> None:
    brokers = list(cluster.brokers.values())
    ids: list[int] = []
    async with trio.open_nursery() as nursery:

        async def ask(broker: BrokerProcess) -> None:
            for _ in range(20):
                pid, epoch = await init_producer_id(broker)
                assert epoch == 0
                ids.append(pid)

        for broker in brokers:
            nursery.start_soon(ask, broker)
    assert len(ids) == 60 and len(set(ids)) == 60
    async with zk_view(cluster) as zk:
        found = await zk.zk.get(zk_producer_ids.PRODUCER_ID_BLOCK_PATH)
    assert found is not None
    block = zk_producer_ids.ProducerIdBlock.decode(found[0])
    assert max(ids) <= block.block_end


@pytest.mark.timeout(120)
@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "not-idempotent"])
async def test_lost_acks_duplicate_records_only_without_idempotence(
    zookeeper: ZooKeeperServer, tmp_path: Path, idempotent: bool
) -> None:
    """The client's own retries through a link that loses answers (KIP-98). The producer
    reaches its broker only through a LossyProxy (the broker advertises the proxy's port); a
    consumer then reads everything back. Idempotent: every value exactly once, in order.
    Without idempotence the same losses must show up as duplicates, or this test could not
    tell the two apart."""
    proxy_port = free_port()
    single = Cluster(
        zookeeper.port,
        tmp_path,
        1,
        {**OVERRIDES, "advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy_port}"},
    )
    proxy = LossyProxy(single.brokers[1].port, drop_probability=0.2, seed=LOSSY_SEED)
    values = [f"v{i:05d}".encode() for i in range(LOSSY_RECORDS)]
    single.start()
    try:
        async with trio.open_nursery() as nursery:
            await nursery.start(proxy.serve, proxy_port)
            await wait_whole(single)
            await create_topic(single, "lossy", [(1,)])
            proxy.armed = True
            async with Producer(
                f"127.0.0.1:{proxy_port}",
                enable_idempotence=idempotent,
                acks="all",
                linger_ms=2,
                batch_size=400,
                retry_backoff_ms=20,
                request_timeout_ms=3_000,
            ) as producer:
                # Groups of 10, each awaited: one request per group, so the proxy has a few
                # hundred requests to lose answers of (however large batches may grow).
                offsets: list[int] = []
                for start in range(0, len(values), 10):
                    group = [
                        await producer.send("lossy", v, partition=0)
                        for v in values[start : start + 10]
                    ]
                    offsets += [(await f).offset for f in group]
            proxy.armed = False
            assert proxy.drops > 0, "the proxy lost no answers: the test proves nothing"
            got = await read_partition(f"127.0.0.1:{proxy_port}", "lossy", 0)
            nursery.cancel_scope.cancel()
    finally:
        single.stop()
    counts = Counter(got)
    assert set(counts) == set(values), "every acknowledged value is stored"
    duplicated = sorted(v or b"" for v, n in counts.items() if n > 1)
    print(f"seed {LOSSY_SEED}: {proxy.drops} answers lost, {len(duplicated)} values duplicated")
    if idempotent:
        assert duplicated == [], f"seed {LOSSY_SEED}: duplicates {duplicated[:5]}"
        assert got == values, "in send order"
        assert offsets == list(range(len(values))), "each ack is the record's one offset"
    else:
        assert duplicated, f"seed {LOSSY_SEED}: {proxy.drops} lost answers but no duplicate"


LOSSY_SEED = 3
LOSSY_RECORDS = 2_000


@pytest.mark.timeout(120)
@pytest.mark.parametrize(
    ("segment_bytes", "refusal"),
    [(300_000, "requests of several batches"), (100_000, "grown batches")],
)
async def test_small_segments_take_every_record_once_in_order(
    cluster: Cluster, segment_bytes: int, refusal: str
) -> None:
    """A topic whose segment.bytes is below what a backlogged idempotent producer sends at
    once (up to five 256 KiB batches per request): the leader refuses those requests
    (RECORD_LIST_TOO_LARGE), and the producer goes batch by batch and splits refused batches
    (KIP-126) rather than failing records that each fit. Read back from the brokers: every
    record once, in order, at the offset its future gave."""
    topic = f"small-segments-{segment_bytes}"
    await create_topic(cluster, topic, [(1, 2, 3)], {"segment.bytes": str(segment_bytes)})
    values = [b"%06d" % i + bytes(94) for i in range(30_000)]
    async with Producer(cluster.bootstrap, acks="all", linger_ms=5) as producer:
        await producer.partitions_for(topic)
        futures = []
        for start in range(0, len(values), 1_000):  # fast enough for batches to pile up
            group = values[start : start + 1_000]
            futures += [producer.send_nowait(topic, v, partition=0) for v in group]
            await trio.lowlevel.checkpoint()
        await producer.flush()
        refused = producer._accumulator.one_per_request
    assert [f.result().offset for f in futures] == list(range(len(values)))
    assert (topic, 0) in refused, f"no {refusal} were refused: the test proves nothing"
    assert await read_partition(cluster.bootstrap, topic, 0) == values
