"""Compacted topics on real brokers: the log cleaner under acks=all writes, a follower killed
during cleaning, a leader failover, SIGKILL at random points of a cleaning, and idempotent
retries across a cleaning. What is checked is what a compacted topic promises: every key's
latest value, on every replica, and never an older value after a newer one for a reader.
"""

from __future__ import annotations

import functools
import json
import random
import shutil
import time
from collections.abc import Iterator

import pytest
import trio

from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.consumer import Consumer
from client.errors import HighwaterClientError
from client.producer import Producer
from protocol.errors import ErrorCode
from protocol.records import BatchHeader, Record, build_batch, decode_batches
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually, wait_until
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    ZkView,
    create_topic,
    log_end_offset,
    logged_events,
    running_cluster,
    wait_led,
    whole_cluster_around,
    zk_view,
)
from tests.integration.test_cli_tools import cli
from tests.integration.wire import init_producer_id, produce_to

pytestmark = [pytest.mark.integration]

OVERRIDES = {**FAST_REPLICATION, "log.cleaner.backoff.ms": "50"}
COMPACTED = {
    "cleanup.policy": "compact",
    "segment.bytes": "16384",
    "min.cleanable.dirty.ratio": "0.01",
}
KEYS = 50
Latest = dict[bytes, bytes | None]


@pytest.fixture(scope="module")
def compaction_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("compaction"), OVERRIDES) as c:
        yield c


@pytest.fixture
def cluster(compaction_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    for _ in whole_cluster_around(compaction_cluster, request):
        yield compaction_cluster


# -- what the replicas hold, read from their files -----------------------------------------


def latest_on_disk(broker: BrokerProcess, topic: str) -> Latest:
    """Each key's latest value in partition 0 as the broker's files hold it (the broker is
    stopped; a tombstone's key maps to None)."""
    latest: Latest = {}
    for segment in broker.segments(topic, 0):
        for batch in decode_batches(segment.read_bytes()):
            for record in batch.records:
                assert record.key is not None
                latest[record.key] = record.value
    return latest


def cleanings(broker: BrokerProcess, topic: str, since: int = 0) -> int:
    return len(logged_events(broker, "log cleaned", since=since, topic=topic, partition=0))


def debris(broker: BrokerProcess, topic: str) -> list[str]:
    directory = broker.partition_dir(topic, 0)
    return sorted(p.name for p in directory.iterdir() if p.suffix in (".cleaned", ".swap"))


def value(key: int, seq: int) -> bytes:
    return f"k{key}/{seq}".encode()


def key_and_seq(record_value: bytes) -> tuple[str, int]:
    key, seq = record_value.decode().split("/")
    return key, int(seq)


async def write(
    cluster: Cluster, topic: str, count: int, start_seq: int, rng: random.Random
) -> Latest:
    """`count` acks=all keyed writes (idempotent producer), about one in ten a tombstone;
    returns the latest value each key was given."""
    latest: Latest = {}
    async with Producer(cluster.live_bootstrap, linger_ms=5, retry_backoff_ms=50) as producer:
        futures = []
        for seq in range(start_seq, start_seq + count):
            k = rng.randrange(KEYS)
            v = None if rng.random() < 0.1 else value(k, seq) + b"." * 120
            futures.append(await producer.send(topic, v, key=f"k{k}".encode(), partition=0))
            latest[f"k{k}".encode()] = v
        await producer.flush()
        for future in futures:
            await future
    return latest


async def read_in_order(cluster: Cluster, topic: str, timeout_s: float = 60) -> Latest:
    """Read partition 0 from offset 0 to the high watermark; for each key the sequence
    numbers must increase (an older value never after a newer one)."""
    tp = (topic, 0)
    latest: Latest = {}
    seen: dict[str, int] = {}
    async with Consumer(
        cluster.live_bootstrap, auto_offset_reset="earliest", fetch_max_wait_ms=100
    ) as consumer:
        consumer.assign([tp])
        consumer.seek(tp, 0)
        with trio.fail_after(timeout_s):
            end = (await consumer.end_offsets([tp]))[tp]  # type: ignore[index]
            last_offset = -1
            while await consumer.position(tp) < end:
                for record in await consumer.poll(timeout_ms=500):
                    assert record.offset > last_offset, "offsets strictly increase"
                    last_offset = record.offset
                    assert record.key is not None
                    latest[record.key] = record.value
                    if record.value is None:
                        continue
                    key, seq = key_and_seq(record.value.rstrip(b"."))
                    assert seq > seen.get(key, -1), f"{key}: {seq} after {seen[key]}"
                    seen[key] = seq
    return latest


def live(latest: Latest) -> dict[bytes, bytes]:
    return {k: v for k, v in latest.items() if v is not None}


async def wait_in_sync(cluster: Cluster, zk: ZkView, topic: str, timeout_s: float = 60) -> None:
    """Every replica back in the ISR with the leader's log end offset (compacted replicas'
    files differ, so batches are not compared)."""

    async def in_sync() -> bool:
        state = await zk.partition_state(topic, 0)
        if state is None or sorted(state.isr) != sorted(cluster.brokers):
            return False
        ends = {await log_end_offset(b, topic, 0) for b in cluster.brokers.values()}
        return len(ends) == 1 and None not in ends

    await eventually(in_sync, timeout_s, f"{topic}: every replica in sync")


async def wait_new_leader(cluster: Cluster, zk: ZkView, topic: str, old: int) -> int:
    async def elected() -> int | None:
        state = await zk.partition_state(topic, 0)
        return state.leader if state is not None and state.leader not in (old, -1) else None

    leader = await eventually(elected, 30, f"{topic}: a leader other than {old}")
    await wait_led(cluster, zk, topic, 0, leader)
    return leader


# -- the tests -----------------------------------------------------------------------------


async def test_replicas_agree_through_cleaning_a_follower_kill_and_a_failover(
    cluster: Cluster,
) -> None:
    """RF=3 under acks=all: a follower SIGKILLed while the leader cleans, restarted; then the
    leader SIGKILLed. Readers from 0 during all this never see a key go back in time, and
    every replica ends with the same latest value for every key."""
    rng = random.Random(18)
    topic = "compacted-failover"
    await create_topic(cluster, topic, [[1, 2, 3]], COMPACTED)
    expected = await write(cluster, topic, 3000, 0, rng)
    wait_until(lambda: cleanings(cluster.brokers[1], topic), 60, "the leader cleaned")

    cluster.brokers[3].kill()
    marks = cluster.log_marks()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_in_order, cluster, topic)
        expected |= await write(cluster, topic, 2000, 3000, rng)
    cluster.brokers[3].start()
    async with zk_view(cluster) as zk:
        await wait_in_sync(cluster, zk, topic)
    assert cleanings(cluster.brokers[1], topic, since=marks[1]) > 0, "cleaned while 3 was down"

    cluster.brokers[1].kill()
    async with zk_view(cluster) as zk:
        await wait_new_leader(cluster, zk, topic, old=1)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_in_order, cluster, topic)
        expected |= await write(cluster, topic, 2000, 5000, rng)
    cluster.brokers[1].start()
    async with zk_view(cluster) as zk:
        await wait_in_sync(cluster, zk, topic)
    assert live(await read_in_order(cluster, topic)) == live(expected)

    for broker in cluster.brokers.values():
        broker.stop()
    held = {b.broker_id: live(latest_on_disk(b, topic)) for b in cluster.brokers.values()}
    assert held[1] == held[2] == held[3] == live(expected)
    assert sum(len(list(b.segments(topic, 0))) for b in cluster.brokers.values()) > 3


async def test_a_broker_killed_while_cleaning_recovers_every_latest_value(
    cluster: Cluster,
) -> None:
    """Rounds, each with its own seed: with the cleaner off, write to a compacted RF=1
    partition; restart with the cleaner on and SIGKILL at a random moment of its cleaning;
    restarted with the cleaner off, the log reads every key's latest value and holds no
    .cleaned or .swap file. (The exact points of a swap are the unit tests' crash points.)"""
    broker = cluster.brokers[2]
    topic = "compacted-kill"
    await create_topic(cluster, topic, [[broker.broker_id]], COMPACTED)
    expected: Latest = {}
    phases: list[str] = []
    _bounce(broker, cleaner=False)
    for seed in range(6):
        rng = random.Random(seed)
        expected |= await write(cluster, topic, 15_000, seed * 15_000, rng)
        marks = cluster.log_marks()
        _bounce(broker, cleaner=True)
        # Kill once .cleaned files show (or the cleaning ended unseen), then up to 100 ms on.
        under_way = functools.partial(_cleaning_seen, broker, topic, marks[broker.broker_id])
        wait_until(under_way, 60, "a cleaning under way")
        await trio.sleep(rng.random() * 0.1)  # fault timing, not a wait for a condition
        phases.append(",".join(debris(broker, topic)) or "after")
        broker.kill()
        broker.overrides["log.cleaner.enable"] = "false"
        broker.start()
        reads_latest = functools.partial(_reads_latest, cluster, topic, dict(expected))
        await eventually(reads_latest, 60, f"round {seed}: latest values")
        assert debris(broker, topic) == [], f"round {seed}"
    broker.overrides.pop("log.cleaner.enable")
    broker.restart()
    print("killed during:", phases)


def _bounce(broker: BrokerProcess, *, cleaner: bool) -> None:
    broker.overrides["log.cleaner.enable"] = str(cleaner).lower()
    broker.restart()


def _cleaning_seen(broker: BrokerProcess, topic: str, since: int) -> bool:
    """.cleaned files show, or a cleaning ended (unseen between two looks)."""
    return bool(debris(broker, topic)) or cleanings(broker, topic, since) > 0


async def _reads_latest(cluster: Cluster, topic: str, expected: Latest) -> bool:
    try:
        return live(await read_in_order(cluster, topic)) == live(expected)
    except HighwaterClientError:  # not led yet after the restart
        return False


async def test_the_documented_demo_drops_old_values(cluster: Cluster) -> None:
    """docs/operations.md "Compacted topics", as a user runs it with the `highwater` CLI:
    five values of two keys in one produce call (one idempotent producer's only batch), a
    tombstone for one key from a second call, a third call's write to roll past it; once
    cleaned, a read from the beginning shows each key's latest value and the tombstone. (The
    cleaner used to keep a producer's last batch whole, so nothing went.)"""
    topic = "users-demo"
    segment_ms = 5000
    config = {
        "cleanup.policy": "compact",
        "segment.ms": str(segment_ms),
        "min.cleanable.dirty.ratio": "0.01",
    }
    await create_topic(cluster, topic, [[1, 2, 3]], config)
    marks = cluster.log_marks()
    values = b"alice:v1\nbob:v1\nalice:v2\nalice:v3\nbob:v2\n"
    calls = [
        (values, ["-K", ":"]),
        (b'{"key":"bob","value":null}\n', ["--json"]),
        (b"carol:v1\n", ["-K", ":"]),
    ]
    written_s = 0.0
    for i, (stdin, args) in enumerate(calls):
        if i:  # this call's batch rolls the segment: segment.ms passed (by timestamps)
            _wait_past(written_s + segment_ms / 1000 + 0.1)
        done = cli(cluster, "produce", topic, *args, stdin=stdin)
        assert done.returncode == 0, done.stderr.decode()
        written_s = time.time()
    leader = cluster.brokers[1]

    def cleaned_below_carol() -> list[dict[str, object]]:
        events = logged_events(leader, "log cleaned", since=marks[1], topic=topic, partition=0)
        return [e for e in events if e["end_offset"] == 6]

    wait_until(cleaned_below_carol, 60, "the leader cleaned below carol's segment")
    consumed = cli(cluster, "consume", topic, "--from-beginning", "-e", "--format", "%o %k %s\n")
    assert consumed.returncode == 0, consumed.stderr.decode()
    assert consumed.stdout.decode().splitlines() == ["3 alice v3", "5 bob ", "6 carol v1"]
    as_json = cli(cluster, "consume", topic, "--from-beginning", "-e", "--json")
    bob = [json.loads(line) for line in as_json.stdout.decode().splitlines()][1]
    assert (bob["key"], bob["value"]) == ("bob", None), "the tombstone stays"


async def test_idempotent_retries_are_deduplicated_across_a_cleaning(cluster: Cluster) -> None:
    """An idempotent producer's last batch keeps its header when newer records of its keys
    supersede all of its records (Kafka's BatchRetention.RETAIN_EMPTY), so a replica rebuilt
    from the cleaned log still knows the producer: a retry of that batch, sent to it as the
    new leader, gets the original offset, the producer's next batch follows, and a sequence
    gap is refused."""
    topic = "compacted-idempotence"
    await create_topic(cluster, topic, [[1, 2, 3]], COMPACTED)
    leader = cluster.brokers[1]
    pid, epoch = await init_producer_id(leader)
    keys = [f"k{i}".encode() for i in range(3)]
    batch = b""
    first_offset = -1
    for seq in range(0, 300, 3):
        records = [Record(b"x" * 100, key=k) for k in keys]
        batch = build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)
        answer = await produce_to(leader, topic, batch)
        assert answer.error_code == ErrorCode.NONE, ErrorCode(answer.error_code).name
        first_offset = answer.base_offset
    marks = cluster.log_marks()
    for _ in range(300):  # a plain producer overwrites the same keys, over many segments
        plain = build_batch([Record(b"y" * 100, key=k) for k in keys])
        assert (await produce_to(leader, topic, plain)).error_code == ErrorCode.NONE
    wait_until(lambda: cleanings(leader, topic, marks[1]), 60, "the leader cleaned")
    emptied = functools.partial(_emptied_batch, leader, topic, first_offset)
    kept = wait_until(emptied, 60, "the producer's last batch emptied on the leader")
    assert (kept.producer_id, kept.base_sequence, kept.last_sequence) == (pid, 297, 299)

    # Broker 3 loses its copy and copies the cleaned log from the leader.
    rebuilt = cluster.brokers[3]
    rebuilt.kill()
    shutil.rmtree(rebuilt.partition_dir(topic, 0))
    rebuilt.start()
    async with zk_view(cluster) as zk:
        await wait_in_sync(cluster, zk, topic)
    end = await log_end_offset(leader, topic, 0)
    retry = await produce_to(leader, topic, batch)
    assert (retry.error_code, retry.base_offset) == (ErrorCode.NONE, first_offset)

    cluster.brokers[2].kill()
    leader.kill()
    async with zk_view(cluster) as zk:
        assert await wait_new_leader(cluster, zk, topic, old=1) == 3
    retry = await produce_to(rebuilt, topic, batch)
    answer = (ErrorCode(retry.error_code).name, retry.base_offset)
    assert answer == ("NONE", first_offset), "the rebuilt replica forgot the producer"
    assert await log_end_offset(rebuilt, topic, 0) == end, "a retry was written again"
    # The producer goes on at sequence 300; one that skips a sequence is refused, which an
    # unknown producer would not be (its first batch is taken at any sequence).
    records = [Record(b"z", key=k) for k in keys]
    gap = build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=304)
    refused = await produce_to(rebuilt, topic, gap)
    assert ErrorCode(refused.error_code) == ErrorCode.OUT_OF_ORDER_SEQUENCE_NUMBER
    following = build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=300)
    accepted = await produce_to(rebuilt, topic, following)
    assert (ErrorCode(accepted.error_code), accepted.base_offset) == (ErrorCode.NONE, end)
    headers = [h for h in rebuilt.batch_headers(topic, 0) if h.producer_id == pid]
    assert any(h.record_count == 0 for h in headers), "the rebuilt replica got the empty batch"


def _wait_past(wall_clock_s: float) -> None:
    """Until the wall clock passes `wall_clock_s` (a record timestamp's roll condition)."""
    wait_until(lambda: time.time() > wall_clock_s, wall_clock_s - time.time() + 5, "the time")


def _emptied_batch(broker: BrokerProcess, topic: str, base_offset: int) -> BatchHeader | None:
    """The batch at `base_offset` on the broker's disk if it holds no records any more."""
    for header in broker.batch_headers(topic, 0):
        if header.base_offset == base_offset and header.record_count == 0:
            return header
    return None


async def test_switching_a_topic_to_compact_starts_cleaning_it(cluster: Cluster) -> None:
    """A delete-policy topic altered to cleanup.policy=compact on the running cluster: every
    replica's cleaner takes it up, and a reader from 0 then gets each key's latest value."""
    rng = random.Random(7)
    topic = "switched-to-compact"
    await create_topic(cluster, topic, [[1, 2, 3]], {"segment.bytes": "16384"})
    expected = await write(cluster, topic, 3000, 0, rng)
    marks = cluster.log_marks()
    assert not any(cleanings(b, topic) for b in cluster.brokers.values())
    async with Admin(cluster.live_bootstrap) as admin:
        await admin.alter_topic_configs(
            topic, {"cleanup.policy": "compact", "min.cleanable.dirty.ratio": "0.01"}
        )
    for broker in cluster.brokers.values():
        cleaned = functools.partial(cleanings, broker, topic, marks[broker.broker_id])
        wait_until(cleaned, 60, f"broker {broker.broker_id} cleaned the switched topic")
    assert live(await read_in_order(cluster, topic)) == live(expected)
