"""Crash recovery with damaged files (docs/reliability.md, "Crash recovery"), against real
brokers and a real ZooKeeper.

Each test creates an RF=3 topic (min.insync.replicas=2, 16 KiB segments, an index entry per
KiB) and runs an idempotent acks=all producer in the background. While it writes, one replica
(the leader in some tests, a follower in others) is SIGKILLed; before it starts again, one
fault is applied to its files (tests/integration/disk_faults.py): a torn tail at a random byte
of the active segment, flipped bits in its last batch, garbage appended, deleted `.index`
files, corrupt `.timeindex` files, each checkpoint file corrupted, a corrupt producer
snapshot. The producer keeps going through the crash and the restart. Then:

1. the broker is up and registered, and its replica is back in the ISR;
2. all replicas hold identical batches, and every segment file of every replica is whole
   batches end to end (no damaged byte survived anywhere);
3. every acknowledged value is readable once, at its acknowledged offset;
4. the log the restarted broker kept is the valid prefix of its damaged files: a damaged tail
   was cut exactly there (the `truncated corrupt log tail` event), the log end it started
   from is no further, and the damage was noticed.

One more test applies a torn tail to the only replica of an RF=1 topic: acknowledged records
past the cut are then lost (every replica lost them), and exactly the records before it stay.
The last one (a bug these tests found, fixed in Log.config's setter) checks that a restarted
replica still rolls its active segment at the topic's segment.bytes.

Random choices (the victim, which byte, which bits, which corruption) come from a seed each
test prints; HIGHWATER_CRASH_SEED=<n> replays them. The moment of the kill is a real race.
"""

from __future__ import annotations

import itertools
import os
import random
from collections import Counter, deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest
import trio

from broker.log.checkpoints import OffsetCheckpointFile
from broker.log.log import LEADER_EPOCH_CHECKPOINT_FILE
from broker.log.manager import (
    HIGH_WATERMARK_CHECKPOINT_FILE,
    LOG_START_OFFSET_CHECKPOINT_FILE,
    RECOVERY_POINT_CHECKPOINT_FILE,
)
from client.admin import Admin
from client.cli.zookeeper_server import ZooKeeperServer
from client.errors import HighwaterClientError, ProducerFatalError
from client.producer import DeliveryFuture, Producer
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from protocol.records import Record, build_batch
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually
from tests.integration.disk_faults import (
    append_garbage,
    batch_spans,
    corrupt_checkpoint,
    corrupt_index,
    corrupt_snapshot,
    cut_at,
    delete_index_files,
    flip_bits,
    recovered_log_end,
    recovered_values,
    segment_files,
    snapshot_files,
)
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    ZkView,
    assert_agree_below_high_watermark,
    create_topic,
    high_watermark,
    log_end_offset,
    logged_events,
    produce,
    read_committed,
    running_cluster,
    wait_converged,
    wait_isr,
    wait_led,
    wait_whole,
    whole_cluster_around,
    zk_view,
)
from tests.integration.test_leader_balance import controller_id, soon
from tests.integration.wire import init_producer_id, produce_to

pytestmark = [pytest.mark.integration]

OVERRIDES = {**FAST_REPLICATION, "zookeeper.session.timeout.ms": "4000"}
TOPIC_CONFIG = {
    "min.insync.replicas": "2",
    "segment.bytes": "16384",  # several segments within seconds: rolls, snapshots, indexes
    "index.interval.bytes": "1024",
}
SEED_VARIABLE = "HIGHWATER_CRASH_SEED"
VALUE_BYTES = 400  # about 35 one-record batches per segment
PRODUCER_WINDOW = 4  # records awaiting acknowledgement: batches stay small, well under a segment
SEGMENTS_BEFORE_CRASH = 3

# Events the restarted broker logs when it notices damage (its JSON log lines).
TAIL_TRUNCATED = "truncated corrupt log tail"
SEGMENT_REBUILT = "segment failed its check, recovering"
CHECKPOINT_REFUSED = "corrupt checkpoint, using the safe fallback"
EPOCHS_REBUILT = "rebuilding leader epoch cache from the log"
SNAPSHOT_DELETED = "deleted corrupt producer snapshot"
FOLLOWER_RESUMED = "follower truncated, fetching"


@pytest.fixture(scope="module")
def crash_cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(zookeeper.port, tmp_path_factory.mktemp("crash"), OVERRIDES) as c:
        yield c


@pytest.fixture
def cluster(crash_cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[Cluster]:
    for _ in whole_cluster_around(crash_cluster, request):
        yield crash_cluster


@pytest.fixture
def rng() -> random.Random:
    """The test's random choices, from HIGHWATER_CRASH_SEED or a fresh seed (printed)."""
    found = os.environ.get(SEED_VARIABLE)
    seed = int(found) if found else random.SystemRandom().randrange(2**32)
    print(f"{SEED_VARIABLE}={seed}")
    return random.Random(seed)


# -- the background producer ---------------------------------------------------------------


class AckedRecords:
    """What the background producer got acknowledged: (offset, value), in ack order."""

    def __init__(self) -> None:
        self.acked: list[tuple[int, bytes]] = []
        self.failed = 0
        self.fatal: str | None = None  # why the producer stopped, if it did


async def produce_in_background(
    cluster: Cluster, topic: str, acked: AckedRecords, stop: trio.Event
) -> None:
    """Idempotent acks=all to partition 0 until `stop`, unique values, up to PRODUCER_WINDOW
    records unacknowledged. A fatal producer error ends it (recorded), as does `stop`."""
    async with Producer(
        cluster.bootstrap,
        acks="all",
        linger_ms=0,
        delivery_timeout_ms=30_000,
        request_timeout_ms=5_000,
        retry_backoff_ms=50,
    ) as producer:
        pending: deque[tuple[bytes, DeliveryFuture]] = deque()

        async def settle() -> None:
            value, future = pending.popleft()
            try:
                acked.acked.append(((await future).offset, value))
            except HighwaterClientError:
                acked.failed += 1  # not acknowledged: no promise made

        i = 0
        try:
            while not stop.is_set():
                value = f"{topic}/{i:06d}/".encode().ljust(VALUE_BYTES, b".")
                pending.append((value, await producer.send(topic, value, partition=0)))
                i += 1
                if len(pending) >= PRODUCER_WINDOW:
                    await settle()
        except ProducerFatalError as exc:
            acked.fatal = repr(exc)
        while pending:
            await settle()


async def acks_flowing(acked: AckedRecords, count: int = 5, timeout_s: float = 30) -> None:
    """Wait for `count` more acknowledgements: the producer is writing right now."""
    start = len(acked.acked)
    await soon(lambda: len(acked.acked) >= start + count, timeout_s, f"{count} more acks")


async def wait_segments(broker: BrokerProcess, topic: str, count: int) -> None:
    await soon(
        lambda: len(broker.segments(topic, 0)) >= count,
        60,
        f"{count} segments on broker {broker.broker_id}",
    )


# -- an idempotent producer over the wire, batch by batch (to resend exact batches) ----------


def side_values(pid: int, seq: int) -> list[bytes]:
    return [f"side/{pid}/{seq + i}".encode() for i in range(2)]


def side_batch(pid: int, epoch: int, seq: int) -> bytes:
    """Two records at sequences seq and seq + 1 (a resend carries the same sequences)."""
    records = [Record(v) for v in side_values(pid, seq)]
    return build_batch(records, producer_id=pid, producer_epoch=epoch, base_sequence=seq)


# -- faults: each damages the stopped victim's files and says what it did ---------------------

Damage = Callable[[BrokerProcess, str, random.Random], str]


def _active_segment(broker: BrokerProcess, topic: str) -> tuple[str, int, int]:
    """(file name, size, position of its last valid batch) of the newest non-empty segment."""
    for path in reversed(broker.segments(topic, 0)):
        spans, size = batch_spans(path)
        if spans:
            return path.name, size, spans[-1][0]
    raise AssertionError(f"broker {broker.broker_id} holds no batch of {topic}")


def torn_tail(broker: BrokerProcess, topic: str, rng: random.Random) -> str:
    name, size, _ = _active_segment(broker, topic)
    byte = rng.randrange(size)
    cut_at(broker.partition_dir(topic, 0) / name, byte)
    return f"{name} cut at byte {byte} of {size}"


def flipped_bits(broker: BrokerProcess, topic: str, rng: random.Random) -> str:
    name, size, last = _active_segment(broker, topic)
    # From byte 16 of the batch on: the base offset, length and leader epoch before it are
    # outside the CRC (as in Kafka), so a flip there is not damage a broker can see.
    path = broker.partition_dir(topic, 0) / name
    bits = flip_bits(path, last + 16, size, rng, count=rng.randint(1, 4))
    return f"{name}: bits {bits} of the last batch (bytes {last}..{size}) flipped"


def garbage_appended(broker: BrokerProcess, topic: str, rng: random.Random) -> str:
    name, size, _ = _active_segment(broker, topic)
    garbage = append_garbage(broker.partition_dir(topic, 0) / name, rng.randint(1, 2048), rng)
    return f"{name}: {len(garbage)} random bytes appended to its {size}"


def index_deleted(broker: BrokerProcess, topic: str, rng: random.Random) -> str:
    deleted = delete_index_files(broker.partition_dir(topic, 0), ".index")
    return f"deleted {[p.name for p in deleted]}"


def timeindex_corrupted(broker: BrokerProcess, topic: str, rng: random.Random) -> str:
    paths = segment_files(broker.partition_dir(topic, 0), ".timeindex")
    return "; ".join(corrupt_index(path, rng) for path in paths)


def checkpoint_corrupted(name: str) -> Damage:
    def damage(broker: BrokerProcess, topic: str, rng: random.Random) -> str:
        return corrupt_checkpoint(broker.data_dir / name, rng)

    return damage


def epoch_checkpoint_corrupted(broker: BrokerProcess, topic: str, rng: random.Random) -> str:
    return corrupt_checkpoint(broker.partition_dir(topic, 0) / LEADER_EPOCH_CHECKPOINT_FILE, rng)


def snapshots_corrupted(broker: BrokerProcess, topic: str, rng: random.Random) -> str:
    """The newest producer snapshot, or (one time in two) every one of them."""
    snapshots = snapshot_files(broker.partition_dir(topic, 0))
    assert snapshots, f"broker {broker.broker_id} wrote no producer snapshot of {topic}"
    doomed = snapshots if rng.random() < 0.5 else snapshots[-1:]
    return "; ".join(corrupt_snapshot(path, rng) for path in doomed)


@dataclass(frozen=True, slots=True)
class Fault:
    name: str
    damage: Damage
    victim_leads: bool  # the victim is the partition's leader when killed (else a follower)
    noticed: str | None = None  # the event the restarted broker logs on finding the damage
    per_log: bool = True  # that event names the partition's log
    # A clean bounce first, so the recovery-point checkpoint covers older segments and the
    # restart after the crash loads them through their index checks instead of rebuilding.
    checkpointed: bool = False


FAULTS = [
    Fault("torn-tail", torn_tail, victim_leads=True),
    Fault("flipped-bits", flipped_bits, victim_leads=False),
    Fault("garbage-appended", garbage_appended, victim_leads=True),
    Fault("index-deleted", index_deleted, False, SEGMENT_REBUILT, checkpointed=True),
    Fault("timeindex-corrupt", timeindex_corrupted, True, SEGMENT_REBUILT, checkpointed=True),
    Fault(
        "recovery-point-checkpoint",
        checkpoint_corrupted(RECOVERY_POINT_CHECKPOINT_FILE),
        False,
        CHECKPOINT_REFUSED,
        per_log=False,
        checkpointed=True,
    ),
    Fault(
        "replication-offset-checkpoint",
        checkpoint_corrupted(HIGH_WATERMARK_CHECKPOINT_FILE),
        True,
        CHECKPOINT_REFUSED,
        per_log=False,
    ),
    Fault(
        "log-start-offset-checkpoint",
        checkpoint_corrupted(LOG_START_OFFSET_CHECKPOINT_FILE),
        False,
        CHECKPOINT_REFUSED,
        per_log=False,
    ),
    Fault("leader-epoch-checkpoint", epoch_checkpoint_corrupted, True, EPOCHS_REBUILT),
]
SNAPSHOT_FAULT = Fault("producer-snapshot", snapshots_corrupted, True, SNAPSHOT_DELETED)


# -- the crash -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Crash:
    """What a test saw of its victim's files between the kill and the restart."""

    victim: BrokerProcess
    log_end_before: int  # the end of the valid batches on its disk after the kill
    log_end_expected: int  # what recovery must keep once the damage is done
    bad_tail: bool  # the damage left bytes past the valid batches (recovery must cut them)
    loaded_segments: list[int]  # bases of segments below the checkpointed recovery point
    mark: int  # its log file's length at the restart: events after it are the new run's


async def place_topic(
    cluster: Cluster, zk: ZkView, topic: str, victim_leads: bool, rng: random.Random
) -> tuple[list[int], BrokerProcess]:
    """Create the RF=3 topic with a victim that is not the controller (killing it must not
    move the controller too) as its preferred leader or as a follower; (replicas, victim)."""
    controller = await controller_id(zk)
    victim_id, other = rng.sample(sorted(b for b in cluster.brokers if b != controller), 2)
    first = [victim_id, other] if victim_leads else [other, victim_id]
    replicas = [*first, controller]
    await create_topic(cluster, topic, [replicas], TOPIC_CONFIG)
    await wait_isr(cluster, zk, topic, 0, replicas, leader=replicas[0])
    return replicas, cluster.brokers[victim_id]


async def lead_again(cluster: Cluster, zk: ZkView, topic: str, broker: BrokerProcess) -> None:
    """A preferred election: `broker`, first in the replica list, leads again."""
    async with Admin(cluster.bootstrap) as admin:
        results = await admin.elect_leaders(ElectionType.PREFERRED, [(topic, 0)])
    assert [r.error_code for r in results] in ([ErrorCode.NONE], [ErrorCode.ELECTION_NOT_NEEDED])
    await wait_led(cluster, zk, topic, 0, broker.broker_id)


def damage_files(broker: BrokerProcess, topic: str, fault: Fault, rng: random.Random) -> Crash:
    """Apply the fault to the stopped broker and note what recovery must make of it."""
    assert not broker.running
    directory = broker.partition_dir(topic, 0)
    log_end_before = recovered_log_end(directory)
    recovery_points = OffsetCheckpointFile(broker.data_dir / RECOVERY_POINT_CHECKPOINT_FILE).read()
    recovery_point = recovery_points.get((topic, 0), 0)
    bases = [int(p.stem) for p in segment_files(directory)]
    loaded = [base for base, after in itertools.pairwise(bases) if after <= recovery_point]
    print(f"{fault.name} on broker {broker.broker_id}: {fault.damage(broker, topic, rng)}")
    bad_tail = False
    for path in segment_files(directory):
        spans, size = batch_spans(path)
        if (spans[-1][0] + spans[-1][1].size if spans else 0) < size:
            bad_tail = True
            break
    return Crash(
        broker,
        log_end_before,
        recovered_log_end(directory),
        bad_tail,
        loaded,
        len(broker.log_text()),
    )


async def crash_and_restart(
    cluster: Cluster,
    zk: ZkView,
    topic: str,
    replicas: list[int],
    victim: BrokerProcess,
    fault: Fault,
    rng: random.Random,
    acked: AckedRecords,
) -> Crash:
    """Produce; SIGKILL the victim mid-write; damage its files; restart it; produce on until
    it is back in the ISR and a little more; stop the producer."""
    stop = trio.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(produce_in_background, cluster, topic, acked, stop)
        await wait_segments(victim, topic, SEGMENTS_BEFORE_CRASH)
        if fault.checkpointed:
            await trio.to_thread.run_sync(victim.restart)  # SIGTERM: a clean stop, then start
            await wait_whole(cluster)
            await wait_isr(cluster, zk, topic, 0, replicas, timeout_s=60)
            if fault.victim_leads:
                await lead_again(cluster, zk, topic, victim)
        await acks_flowing(acked, count=20)
        victim.kill()
        crash = damage_files(victim, topic, fault, rng)
        victim.start()
        await wait_whole(cluster)
        await wait_isr(cluster, zk, topic, 0, replicas, timeout_s=60)
        await acks_flowing(acked, count=20)
        stop.set()
    print(f"{len(acked.acked)} acked, {acked.failed} failed, fatal: {acked.fatal}")
    assert acked.fatal is None, "the idempotent producer survives a crash of one replica"
    if fault.checkpointed:
        assert crash.loaded_segments, "the clean bounce checkpointed whole segments"
    return crash


# -- checks ----------------------------------------------------------------------------------


def assert_files_whole(broker: BrokerProcess, topic: str) -> None:
    """Every segment file of the replica is whole, valid batches end to end, offsets
    contiguous from 0: nothing torn or corrupt is left anywhere."""
    expected = 0
    for path in segment_files(broker.partition_dir(topic, 0)):
        assert int(path.stem) == expected, f"broker {broker.broker_id}: {path.name} misplaced"
        spans, size = batch_spans(path)
        valid_bytes = spans[-1][0] + spans[-1][1].size if spans else 0
        assert valid_bytes == size, (
            f"broker {broker.broker_id}: {path.name} bytes {valid_bytes}..{size} are not batches"
        )
        for _, header in spans:
            assert header.base_offset == expected, f"{path.name}: gap at {expected}"
            expected = header.next_offset


def assert_acked_once(records: list[bytes | None], acked: AckedRecords) -> None:
    """Every acknowledged value at its acknowledged offset, and no value twice."""
    twice = [value for value, n in Counter(records).items() if n > 1]
    assert not twice, f"{len(twice)} values stored twice, e.g. {twice[:3]}"
    for offset, value in acked.acked:
        assert offset < len(records) and records[offset] == value, f"acked offset {offset} lost"


def assert_kept_valid_prefix(crash: Crash, topic: str, fault: Fault) -> None:
    """The restarted broker cut a damaged tail exactly where the valid batches end, started
    from no further than that (and, as a follower of an unchanged leader, from exactly
    there), and noticed the damage."""
    victim, log = crash.victim, f"{topic}-0"
    assert crash.log_end_expected <= crash.log_end_before
    cut = logged_events(victim, TAIL_TRUNCATED, since=crash.mark, log=log)
    if crash.bad_tail:
        assert [e["leo"] for e in cut] == [crash.log_end_expected], cut
    else:
        assert cut == [], "an undamaged log is not truncated"
    if fault.noticed is not None:
        fields = {"log": log} if fault.per_log else {}
        noticed = logged_events(victim, fault.noticed, since=crash.mark, **fields)
        assert noticed, f"broker {victim.broker_id} did not log {fault.noticed!r}"
        if fault.noticed == SEGMENT_REBUILT:
            assert set(crash.loaded_segments) <= {e["base"] for e in noticed}
    resumed = logged_events(victim, FOLLOWER_RESUMED, since=crash.mark, topic=topic)
    assert resumed, f"broker {victim.broker_id} never followed after the restart"
    started_from = resumed[0]["log_end_offset"]
    if fault.victim_leads:
        assert started_from <= crash.log_end_expected  # it may drop an unacknowledged tail
    else:
        assert started_from == crash.log_end_expected


def assert_kept_valid_prefix_single(crash: Crash, topic: str) -> None:
    """The only replica: a damaged tail cut exactly where the valid batches end."""
    cut = logged_events(crash.victim, TAIL_TRUNCATED, since=crash.mark, log=f"{topic}-0")
    assert [e["leo"] for e in cut] == ([crash.log_end_expected] if crash.bad_tail else [])


async def assert_recovered(
    cluster: Cluster,
    zk: ZkView,
    topic: str,
    replicas: list[int],
    crash: Crash,
    fault: Fault,
    acked: AckedRecords,
) -> None:
    state = await zk.partition_state(topic, 0)
    assert state is not None and state.leader >= 0
    log_end = await log_end_offset(cluster.brokers[state.leader], topic, 0)
    assert log_end is not None
    brokers = [cluster.brokers[r] for r in replicas]
    await wait_converged(brokers, topic, 0, log_end)

    async def committed() -> bool:
        # A leader learns its followers' LEOs from their next fetch: the HW follows shortly.
        return await high_watermark(cluster.brokers[state.leader], topic, 0) == log_end

    await eventually(committed, 30, f"the high watermark to reach {log_end}")
    assert await assert_agree_below_high_watermark(cluster, zk, topic, 0) == log_end
    for broker in brokers:
        assert_files_whole(broker, topic)
    assert_acked_once(await read_committed(cluster, topic, 0), acked)
    assert_kept_valid_prefix(crash, topic, fault)
    print(
        f"LEO {crash.log_end_before} before the damage, {crash.log_end_expected} kept; "
        f"{log_end} at the end"
    )


# -- tests -----------------------------------------------------------------------------------


@pytest.mark.timeout(90)
@pytest.mark.parametrize("fault", FAULTS, ids=[f.name for f in FAULTS])
async def test_replica_recovers_from_a_damaged_log_dir(
    cluster: Cluster, fault: Fault, rng: random.Random
) -> None:
    topic = f"crash-{fault.name}"
    async with zk_view(cluster) as zk:
        replicas, victim = await place_topic(cluster, zk, topic, fault.victim_leads, rng)
        acked = AckedRecords()
        crash = await crash_and_restart(cluster, zk, topic, replicas, victim, fault, rng, acked)
        await assert_recovered(cluster, zk, topic, replicas, crash, fault, acked)


@pytest.mark.timeout(90)
async def test_corrupt_producer_snapshot_still_deduplicates_retries(
    cluster: Cluster, rng: random.Random
) -> None:
    """A second producer writes 5 batches first; the leader then rolls segments (snapshots
    past them) and is killed; its snapshots are damaged. Restarted and leading again, it
    must still know that producer's last batches: resends get their original offsets."""
    topic = "crash-producer-snapshot"
    fault = SNAPSHOT_FAULT
    async with zk_view(cluster) as zk:
        replicas, victim = await place_topic(cluster, zk, topic, fault.victim_leads, rng)
        pid, epoch = await init_producer_id(victim)
        acked = AckedRecords()
        first_offsets: dict[int, int] = {}
        for seq in range(0, 10, 2):
            answer = await produce_to(victim, topic, side_batch(pid, epoch, seq))
            assert answer.error_code == ErrorCode.NONE
            first_offsets[seq] = answer.base_offset
            acked.acked += enumerate(side_values(pid, seq), start=answer.base_offset)
        crash = await crash_and_restart(cluster, zk, topic, replicas, victim, fault, rng, acked)
        await lead_again(cluster, zk, topic, victim)
        for seq, offset in first_offsets.items():
            answer = await produce_to(victim, topic, side_batch(pid, epoch, seq))
            assert (answer.error_code, answer.base_offset) == (ErrorCode.NONE, offset), seq
        await assert_recovered(cluster, zk, topic, replicas, crash, fault, acked)
        for broker_id in replicas:
            headers = cluster.brokers[broker_id].batch_headers(topic, 0)
            for seq, offset in first_offsets.items():
                found = [
                    h.base_offset for h in headers if (h.producer_id, h.base_sequence) == (pid, seq)
                ]
                assert found == [offset], f"broker {broker_id}: sequence {seq} at {found}"


@pytest.mark.timeout(90)
async def test_torn_tail_on_the_only_replica_keeps_exactly_the_prefix(
    cluster: Cluster, rng: random.Random
) -> None:
    """RF=1: the one replica is killed mid-write and its active segment cut at a random byte.
    It restarts and leads with exactly the records before the cut; acknowledged records
    past it are gone (every replica lost them), nothing else is, and writes go on after it."""
    topic = "crash-single-replica"
    fault = Fault("torn-tail-rf1", torn_tail, victim_leads=True)
    async with zk_view(cluster) as zk:
        controller = await controller_id(zk)
        others = sorted(b for b in cluster.brokers if b != controller)
        victim = cluster.brokers[rng.choice(others)]
        config = {**TOPIC_CONFIG, "min.insync.replicas": "1"}
        await create_topic(cluster, topic, [[victim.broker_id]], config)
        acked, stop = AckedRecords(), trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(produce_in_background, cluster, topic, acked, stop)
            await wait_segments(victim, topic, SEGMENTS_BEFORE_CRASH)
            await acks_flowing(acked)
            victim.kill()
            stop.set()  # what was sent still retries: a resend the log kept is deduplicated
            crash = damage_files(victim, topic, fault, rng)
            kept = recovered_values(victim.partition_dir(topic, 0))
            victim.start()
            await wait_whole(cluster)
            await wait_led(cluster, zk, topic, 0, victim.broker_id)
        # The producer has ended; a sequence the shortened log no longer continues is fatal.
        print(f"{len(acked.acked)} acked, {acked.failed} failed, fatal: {acked.fatal}")
        after = [b"after-crash-0", b"after-crash-1"]
        offsets = await produce(cluster, topic, 0, after)
        records = await read_committed(cluster, topic, 0)

    assert len(kept) == crash.log_end_expected
    assert records[: len(kept)] == kept, "exactly the records before the cut, unchanged"
    assert records[offsets[0] :] == after and offsets[-1] == len(records) - 1
    assert not [v for v, n in Counter(records).items() if n > 1], "no value twice"
    lost = 0
    for offset, value in acked.acked:
        if offset < len(kept):
            assert records[offset] == value, f"acked offset {offset} before the cut lost"
        elif offset >= len(records) or records[offset] != value:
            # Acknowledged past the cut before the crash: lost with the only replica.
            assert value not in records, f"acked value of offset {offset} moved"
            lost += 1
    print(f"{lost} acknowledged records lost past the cut (the only replica lost them)")
    assert_kept_valid_prefix_single(crash, topic)
    assert_files_whole(victim, topic)


@pytest.mark.timeout(90)
async def test_restarted_replica_still_rolls_at_the_topic_segment_size(
    cluster: Cluster, rng: random.Random
) -> None:
    """Found by the tests above: after a crash (or any restart) the replica's active segment
    must still roll at the topic's segment.bytes, or it grows to the broker default (1 GiB)
    with no roll, no producer snapshot and no fsync of the recovery point meanwhile."""
    topic = "crash-segment-size"
    fault = Fault("no-damage", lambda broker, topic, rng: "none", victim_leads=False)
    async with zk_view(cluster) as zk:
        replicas, victim = await place_topic(cluster, zk, topic, fault.victim_leads, rng)
        acked = AckedRecords()
        await crash_and_restart(cluster, zk, topic, replicas, victim, fault, rng, acked)
        # The producer stopped after the restart with 20+ records, about 8 KiB: make sure
        # the leader rolled twice more since, so every replica must have rolled too.
        state = await zk.partition_state(topic, 0)
        assert state is not None
        leader = cluster.brokers[state.leader]
        rolled = len(leader.segments(topic, 0)) + 2
        while len(leader.segments(topic, 0)) < rolled:
            await produce(cluster, topic, 0, [b"x" * VALUE_BYTES] * 10)
        log_end = await log_end_offset(leader, topic, 0)
        assert log_end is not None
        await wait_converged([cluster.brokers[r] for r in replicas], topic, 0, log_end)
    segment_bytes = int(TOPIC_CONFIG["segment.bytes"])
    sizes = {p.name: p.stat().st_size for p in victim.segments(topic, 0)}
    assert max(sizes.values()) <= segment_bytes, f"broker {victim.broker_id}: {sizes}"
