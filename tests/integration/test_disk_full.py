"""A log dir that fills up (docs/reliability.md, "Disks"; KIP-112's offline log dirs), with real
brokers, a real ZooKeeper and a real full filesystem: broker 1's log.dirs is a 24 MiB tmpfs, and it
leads one partition of an RF=3 topic (min.insync.replicas=2) while an idempotent acks=all producer
writes 60,000 records of 1000 bytes (about 60 MB, so the disk fills a third of the way in).

Then: broker 1 is still running, took its log dir offline and no request handler failed; the
controller moved the leadership to another ISR member and took broker 1 out of the ISR;
every record was acknowledged, and every acknowledged record is in the log once, at its
offset; broker 1's files hold whole batches only (no torn batch, whatever it wrote last).
After the filesystem is grown (space freed) and broker 1 restarted, it catches up and
rejoins the ISR with the same batches as the others.

Also here: a segment that cannot be read under a stopped broker (its file replaced by a
directory, which even root cannot open as a file) makes that one partition offline when the
broker starts: a clear error for that partition, the broker up, its other partitions served.

Needs root to mount tmpfs; skipped, saying why, where mounting is impossible.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer
from client.errors import HighwaterClientError
from client.network import connect
from client.producer import Producer
from protocol.errors import ErrorCode
from protocol.messages.list_offsets import (
    LATEST_TIMESTAMP,
    ListOffsetsPartition,
    ListOffsetsPartitionResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
    ListOffsetsTopic,
)
from protocol.records import iter_batch_headers
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually
from tests.integration.replication_checks import (
    DEBUG_REPLICA_ID,
    FAST_REPLICATION,
    batch_ids,
    create_topic,
    log_end_offset,
    logged_events,
    partition_metadata,
    produce,
    read_committed,
    running_cluster,
    wait_converged,
    wait_isr,
    zk_view,
)

pytestmark = [pytest.mark.integration]

DISK_MIB = 24
RECORDS = 60_000
VALUE_BYTES = 1000
TOPIC = "full"
OVERRIDES = {**FAST_REPLICATION, "zookeeper.session.timeout.ms": "4000"}


def _mount_tmpfs(mountpoint: Path, size_mib: int) -> str | None:
    """Mount a tmpfs of `size_mib` there; None, or why it cannot be done here."""
    mountpoint.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size_mib}m", "tmpfs", str(mountpoint)],
        capture_output=True,
        text=True,
        check=False,
    )
    return None if done.returncode == 0 else (done.stderr.strip() or "mount failed")


def _resize(mountpoint: Path, size_mib: int) -> None:
    subprocess.run(
        ["mount", "-o", f"remount,size={size_mib}m", str(mountpoint)], check=True, timeout=30
    )


@pytest.fixture(scope="module")
def small_disk(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    mountpoint = tmp_path_factory.mktemp("small-disk") / "mnt"
    why = _mount_tmpfs(mountpoint, DISK_MIB)
    if why is not None:
        pytest.skip(f"cannot mount a {DISK_MIB} MiB tmpfs for a full log dir (needs root): {why}")
    try:
        yield mountpoint
    finally:
        subprocess.run(["umount", "-l", str(mountpoint)], check=False, timeout=30)


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, small_disk: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(
        zookeeper.port,
        tmp_path_factory.mktemp("disk-full"),
        OVERRIDES,
        broker_overrides={1: {"log.dirs": str(small_disk)}},
    ) as c:
        yield c


def whole_batches(directory: Path) -> int:
    """Batches in the partition's segment files; raises if any byte is not part of a whole,
    valid batch (a torn or corrupt one)."""
    return sum(
        len(list(iter_batch_headers(path.read_bytes()))) for path in sorted(directory.glob("*.log"))
    )


async def produce_all(cluster: Cluster) -> dict[int, bytes]:
    """Send RECORDS values (each unique) with an idempotent acks=all producer; offset ->
    value of every acknowledged one. Failures are collected, not raised."""
    acked: dict[int, bytes] = {}
    failures: list[HighwaterClientError] = []
    async with Producer(
        cluster.bootstrap,
        acks="all",
        linger_ms=5,
        delivery_timeout_ms=120_000,
        request_timeout_ms=10_000,
        retry_backoff_ms=50,
    ) as producer:
        async with trio.open_nursery() as nursery:
            for i in range(RECORDS):
                value = b"%08d" % i + b"x" * (VALUE_BYTES - 8)
                future = await producer.send(TOPIC, value, partition=0)

                async def settle(value: bytes = value, future: object = future) -> None:
                    try:
                        acked[(await future).offset] = value  # type: ignore[attr-defined]
                    except HighwaterClientError as exc:
                        failures.append(exc)

                nursery.start_soon(settle)
        await producer.flush()
    assert not failures, f"{len(failures)} records not acknowledged, e.g. {failures[0]!r}"
    return acked


async def test_a_full_log_dir_goes_offline_and_the_partition_stays_available(
    cluster: Cluster, small_disk: Path
) -> None:
    full = cluster.brokers[1]
    config = {"min.insync.replicas": "2", "segment.bytes": str(4 << 20)}
    await create_topic(cluster, TOPIC, [(1, 2, 3)], config)
    async with zk_view(cluster) as zk:
        state = await wait_isr(cluster, zk, TOPIC, 0, (1, 2, 3), leader=1)
        with trio.fail_after(600):
            acked = await produce_all(cluster)
        assert len(acked) == RECORDS  # all acknowledged, the disk filled on the way

        # Broker 1 is up, took its dir offline, handled every request.
        assert full.running
        assert logged_events(full, "log dir failed; it is offline until a restart")
        assert not logged_events(full, "request handler failed")
        assert "No space left on device" in full.log_text()
        moved = await zk.partition_state(TOPIC, 0)
        assert moved is not None
        assert moved.leader in (2, 3) and moved.leader_epoch > state.leader_epoch
        assert 1 not in moved.isr
        meta = await partition_metadata(cluster.brokers[2], TOPIC, 0)
        assert meta is not None and 1 in meta.offline_replicas

        # Nothing acknowledged is lost or duplicated.
        values = await read_committed(cluster, TOPIC, 0, timeout_s=120)
        assert len(values) == RECORDS
        assert [values[offset] for offset in sorted(acked)] == [acked[o] for o in sorted(acked)]

        # Broker 1's copy: whole batches only, fewer records than were acknowledged.
        stored = whole_batches(small_disk / f"{TOPIC}-0")
        held = sum(
            h.record_count
            for path in sorted((small_disk / f"{TOPIC}-0").glob("*.log"))
            for _, h in iter_batch_headers(path.read_bytes())
        )
        assert stored > 0 and 0 < held < RECORDS
        (failure,) = logged_events(full, "log dir failed; it is offline until a restart")
        print(
            f"{len(acked)} of {RECORDS} records acknowledged; broker 1 holds {held} records in "
            f"{stored} whole batches; {failure['reason']}; leader now broker {moved.leader} "
            f"(leader epoch {moved.leader_epoch}), ISR {list(moved.isr)}"
        )

        # Space freed, broker restarted: it recovers, catches up and rejoins.
        assert full.stop() == 0
        _resize(small_disk, 256)
        full.start()
        await wait_isr(cluster, zk, TOPIC, 0, (1, 2, 3), timeout_s=120)
        others = [cluster.brokers[2], cluster.brokers[3]]
        converged = await wait_converged(others, TOPIC, 0, RECORDS, timeout_s=120)

        async def caught_up() -> bool:
            if await log_end_offset(full, TOPIC, 0) != RECORDS:
                return False
            headers = [
                h
                for path in sorted((small_disk / f"{TOPIC}-0").glob("*.log"))
                for _, h in iter_batch_headers(path.read_bytes())
            ]
            return batch_ids(headers) == converged

        await eventually(caught_up, 120, "broker 1 to hold the same batches again")


async def test_an_unreadable_segment_takes_that_partition_offline(cluster: Cluster) -> None:
    """The broker must not crash on a segment it cannot open: that partition is offline
    there (KAFKA_STORAGE_ERROR, named in its log), the others are served, and the controller
    leads the damaged partition elsewhere."""
    broker = cluster.brokers[3]
    await create_topic(cluster, "readable", [(3, 1, 2)], {"min.insync.replicas": "2"})
    await create_topic(cluster, "damaged", [(3, 1, 2)], {"min.insync.replicas": "2"})
    async with zk_view(cluster) as zk:
        for topic in ("readable", "damaged"):
            await wait_isr(cluster, zk, topic, 0, (1, 2, 3), leader=3)
        for topic in ("readable", "damaged"):
            await produce(cluster, topic, 0, [b"before"])
        assert broker.stop() == 0
        segment = broker.segments("damaged", 0)[0]
        segment.unlink()
        segment.mkdir()  # a file that cannot be opened, even by root
        mark = len(broker.log_text())
        broker.start()

        async def reported() -> list[dict[str, object]]:
            return logged_events(broker, "log failed; it is offline until a restart", since=mark)

        (failed,) = await eventually(reported, 60, "broker 3 to report damaged-0 offline")
        assert "damaged-0" in str(failed["reason"]) and "Is a directory" in str(failed["reason"])
        assert broker.running
        await wait_isr(cluster, zk, "damaged", 0, (1, 2), timeout_s=60)  # never with 3
        await wait_isr(cluster, zk, "readable", 0, (1, 2, 3))  # broker 3 serves the others
        state = await zk.partition_state("damaged", 0)
        assert state is not None and 3 not in state.isr and state.leader != 3
        meta = await partition_metadata(broker, "damaged", 0)
        assert meta is not None and 3 in meta.offline_replicas
        answer = await list_offsets_debug(broker, "damaged", 0)
        assert answer.error_code == ErrorCode.KAFKA_STORAGE_ERROR
        await produce(cluster, "readable", 0, [b"after"])
        await produce(cluster, "damaged", 0, [b"after"])  # on its new leader
        assert await read_committed(cluster, "damaged", 0) == [b"before", b"after"]
        # Remove what cannot be read: after a restart the replica copies the partition again.
        assert broker.stop() == 0
        segment.rmdir()
        broker.start()
        await wait_isr(cluster, zk, "damaged", 0, (1, 2, 3), timeout_s=60)


async def list_offsets_debug(
    broker: BrokerProcess, topic: str, partition: int
) -> ListOffsetsPartitionResponse:
    """ListOffsets "latest" from the debug replica id: any replica answers for its own copy."""
    request = ListOffsetsRequest(
        DEBUG_REPLICA_ID,
        (ListOffsetsTopic(topic, (ListOffsetsPartition(partition, LATEST_TIMESTAMP),)),),
    )
    conn = await connect(broker.host, broker.port, timeout_ms=5000)
    try:
        response: ListOffsetsResponse = await conn.request(request, timeout_ms=5000)
    finally:
        await conn.aclose()
    (answer,) = response.topics[0].partitions
    return answer
