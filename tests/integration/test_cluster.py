"""A real cluster: ZooKeeper + 3 broker processes on loopback, driven through the client library.

One cluster per module (starting brokers costs seconds); tests use their own topics. Tests
that kill brokers restart them and wait for the cluster to be whole again before returning.
"""

from __future__ import annotations

import subprocess
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.consumer import Consumer, ConsumerRecord
from client.network import connect
from client.partitioner import partition_for_key
from client.producer import Producer
from protocol.errors import ErrorCode
from protocol.messages.update_metadata import UpdateMetadataRequest
from tests.integration.cluster_harness import Cluster, eventually, fetch_metadata

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    cluster = Cluster(zookeeper.port, tmp_path_factory.mktemp("cluster"), 3)
    cluster.start()
    try:
        trio.run(_wait_whole, cluster)
        yield cluster
    except BaseException:
        print(cluster.logs())
        raise
    finally:
        cluster.stop()


async def _wait_whole(cluster: Cluster, timeout_s: float = 60) -> None:
    """Every broker answers and knows all brokers and a controller."""

    async def whole() -> bool:
        for broker in cluster.brokers.values():
            meta = await fetch_metadata(broker.port)
            if meta is None or len(meta.brokers) != len(cluster.brokers) or meta.controller_id < 0:
                return False
        return True

    await eventually(whole, timeout_s, "all brokers registered with a controller")


@pytest.fixture
async def admin(cluster: Cluster) -> AsyncIterator[Admin]:
    await _wait_whole(cluster)
    async with Admin(cluster.bootstrap) as admin:
        yield admin


async def consume_all(
    cluster: Cluster, topic: str, expected: int, timeout_s: float = 60
) -> list[ConsumerRecord]:
    got: list[ConsumerRecord] = []
    async with Consumer(cluster.bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.subscribe([topic])
        with trio.fail_after(timeout_s):
            while len(got) < expected:
                got.extend(await consumer.poll(timeout_ms=1000, max_records=50_000))
    return got


async def test_100k_keyed_records_round_trip(cluster: Cluster, admin: Admin) -> None:
    await admin.create_topic("keyed", partitions=6, replication_factor=1)
    count = 100_000
    async with Producer(cluster.bootstrap, acks=1, linger_ms=5) as producer:
        futures = [
            await producer.send("keyed", f"v{i}".encode(), key=f"k{i % 1000}".encode())
            for i in range(count)
        ]
        await producer.flush()
        placed = [await f for f in futures]
    assert all(
        m.partition == partition_for_key(f"k{i % 1000}".encode(), 6) for i, m in enumerate(placed)
    )
    records = await consume_all(cluster, "keyed", count)
    assert len(records) == count
    by_partition: dict[int, list[ConsumerRecord]] = defaultdict(list)
    key_partition: dict[bytes | None, set[int]] = defaultdict(set)
    for r in records:
        by_partition[r.partition].append(r)
        key_partition[r.key].add(r.partition)
    assert set(by_partition) == set(range(6))
    for partition_records in by_partition.values():
        offsets = [r.offset for r in partition_records]
        assert offsets == list(range(len(offsets)))  # in order, no gap, no duplicate
        values = [int(r.value[1:]) for r in partition_records if r.value]
        assert values == sorted(values)  # the producer's order per partition
    assert all(len(parts) == 1 for parts in key_partition.values())
    assert sorted(int(r.value[1:]) for r in records if r.value) == list(range(count))
    described = {t.name: t for t in await admin.describe_topics(["keyed"])}["keyed"]
    assert sum(p.high_watermark or 0 for p in described.partitions) == count


async def test_topic_admin_errors(cluster: Cluster, admin: Admin) -> None:
    await admin.create_topic("dup", partitions=1, replication_factor=1)
    for kwargs, code in (
        ({"name": "dup", "partitions": 1, "replication_factor": 1}, ErrorCode.TOPIC_ALREADY_EXISTS),
        (
            {"name": "bad name!", "partitions": 1, "replication_factor": 1},
            ErrorCode.INVALID_TOPIC_EXCEPTION,
        ),
        ({"name": "zero", "partitions": 0, "replication_factor": 1}, ErrorCode.INVALID_PARTITIONS),
        (
            {"name": "rf4", "partitions": 1, "replication_factor": 4},
            ErrorCode.INVALID_REPLICATION_FACTOR,
        ),
    ):
        with pytest.raises(Exception) as caught:
            await admin.create_topic(**kwargs)  # type: ignore[arg-type]
        assert getattr(caught.value, "code", None) == code, caught.value
    await admin.delete_topic("dup")

    async def gone_everywhere() -> bool:
        for broker in cluster.brokers.values():
            meta = await fetch_metadata(broker.port)
            if meta is None or "dup" in {t.name for t in meta.topics}:
                return False
        return True

    # The broker that took the request answers once it saw the deletion; the others follow.
    await eventually(gone_everywhere, 10, "every broker to forget the deleted topic")
    for broker in cluster.brokers.values():
        assert not list(broker.data_dir.glob("dup-*")), "replica data deleted"


async def test_sigkill_broker_partitions_offline_then_back(cluster: Cluster, admin: Admin) -> None:
    await admin.create_topic("rf1", partitions=6, replication_factor=1)
    async with Producer(cluster.bootstrap, acks=1) as producer:
        futures = [
            await producer.send("rf1", f"r{i}".encode(), key=str(i).encode()) for i in range(600)
        ]
        await producer.flush()
        for f in futures:
            await f
    victim_id = 2
    led = {
        p.partition
        for p in (await admin.describe_topics(["rf1"]))[0].partitions
        if p.leader == victim_id
    }
    assert led, "round-robin assignment gives every broker partitions"
    cluster.brokers[victim_id].kill()

    async def offline() -> bool:
        parts = (await admin.describe_topics(["rf1"]))[0].partitions
        return all(p.leader in (-1, None) for p in parts if p.partition in led)

    await eventually(offline, 30, "the killed broker's partitions to go offline")
    cluster.brokers[victim_id].start()

    async def back() -> bool:
        parts = (await admin.describe_topics(["rf1"]))[0].partitions
        return all(p.leader == victim_id for p in parts if p.partition in led)

    await eventually(back, 60, "the partitions to come back with their broker")
    records = await consume_all(cluster, "rf1", 600)
    assert sorted(r.value for r in records) == sorted(f"r{i}".encode() for i in range(600))


async def test_controller_failover_fences_old_epoch(cluster: Cluster, admin: Admin) -> None:
    before = await admin.describe_cluster()
    old_id, old_epoch = before.controller_id, before.controller_epoch
    cluster.brokers[old_id].kill()

    async def new_controller() -> tuple[int, int] | None:
        for broker in cluster.brokers.values():
            if broker.broker_id == old_id:
                continue
            meta = await fetch_metadata(broker.port)
            if (
                meta
                and meta.controller_id not in (-1, old_id)
                and meta.controller_epoch > old_epoch
            ):
                return meta.controller_id, meta.controller_epoch
        return None

    _new_id, new_epoch = await eventually(new_controller, 60, "a new controller")
    assert new_epoch > old_epoch
    survivor = next(b for b in cluster.brokers.values() if b.broker_id != old_id)
    conn = await connect("127.0.0.1", survivor.port)
    stale = await conn.request(UpdateMetadataRequest(old_id, old_epoch, -1, (), ()))
    await conn.aclose()
    assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
    cluster.brokers[old_id].start()
    await _wait_whole(cluster)


async def test_sigterm_is_clean(cluster: Cluster) -> None:
    broker = cluster.brokers[3]
    assert broker.stop() == 0
    marker = broker.data_dir / ".highwater_cleanshutdown"
    assert marker.exists()
    broker.start()
    await _wait_whole(cluster)


async def test_cli_round_trip(cluster: Cluster, admin: Admin, tmp_path: Path) -> None:
    await admin.create_topic("cli-src", partitions=3, replication_factor=1)
    await admin.create_topic("cli-dst", partitions=3, replication_factor=1)
    lines = [f"key{i % 7}:value {i}" for i in range(200)]
    source = tmp_path / "in.txt"
    source.write_text("\n".join(lines) + "\n")
    cli = [sys.executable, "-m", "client.cli"]
    bootstrap = ["-b", cluster.bootstrap]

    def run(*args: str, stdin: bytes | None = None) -> bytes:
        done = subprocess.run(
            [*cli, *args], input=stdin, capture_output=True, timeout=120, check=False
        )
        assert done.returncode == 0, done.stderr.decode()
        return done.stdout

    run("produce", "cli-src", *bootstrap, "-K", ":", stdin=source.read_bytes())
    dumped = run("consume", "cli-src", *bootstrap, "--from-beginning", "-e", "--json")
    assert len(dumped.splitlines()) == 200
    run("produce", "cli-dst", *bootstrap, "--json", stdin=dumped)
    copied = run("consume", "cli-dst", *bootstrap, "--from-beginning", "-e", "--format", "%k:%s\\n")
    assert sorted(copied.decode().splitlines()) == sorted(lines)


async def test_topic_config_applies_to_the_log(cluster: Cluster, admin: Admin) -> None:
    await admin.create_topic(
        "small-segments", partitions=1, replication_factor=1, config={"segment.bytes": "1024"}
    )
    async with Producer(cluster.bootstrap, acks=1, linger_ms=0) as producer:
        for i in range(50):
            await (await producer.send("small-segments", b"x" * 100 + str(i).encode()))
    leader = (await admin.describe_topics(["small-segments"]))[0].partitions[0].leader
    assert leader is not None
    segments = list(cluster.brokers[leader].data_dir.glob("small-segments-0/*.log"))
    assert len(segments) > 3, "segment.bytes=1024 rolls segments"
    records = await consume_all(cluster, "small-segments", 50)
    assert len(records) == 50
