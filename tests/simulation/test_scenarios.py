"""KIP-101's replication stories, scripted step by step in the simulation.

Two HW-truncation stories and KIP-101's scenarios 1 and 2 lose or diverge data when followers
truncate to their high watermark; with leader epochs (OffsetForLeaderEpoch, KIP-101/279) they
must not. Each test drives the real Partition/Log/controller code through the simulated
cluster with every invariant checked after every step (invariants.py), and ends with the
final convergence check: identical logs on every replica, every protected ack readable.

The tests at the end are bugs the randomised simulation found, each reproduced
deterministically; each failed before its fix.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from protocol.records import Record
from tests.simulation.cluster import SimCluster, quiet_logs
from tests.simulation.config import SimConfig
from tests.simulation.zk import TopicPartition

TP = ("t", 0)
NEVER_MS = 10**9
MakeCluster = Callable[[SimConfig], SimCluster]


def scripted(**overrides: object) -> SimConfig:
    """No random producer, nemesis, drops or log flushes: the script decides."""
    base = SimConfig(
        partitions=1,
        enable_producer=False,
        enable_nemesis=False,
        drop_probability=0.0,
        controller_slow_probability=0.0,
        log_flush_interval_ms=(NEVER_MS, NEVER_MS),
        replica_lag_time_max_ms=5_000,
        produce_timeout_ms=10_000,
    )
    return dataclasses.replace(base, **overrides)  # type: ignore[arg-type]


@pytest.fixture
def make_cluster(tmp_path: Path) -> Iterator[MakeCluster]:
    clusters: list[SimCluster] = []

    def make(config: SimConfig) -> SimCluster:
        cluster = SimCluster(0, tmp_path / f"cluster-{len(clusters)}", config)
        clusters.append(cluster)
        return cluster

    with quiet_logs():
        yield make
    for cluster in clusters:
        cluster.close()


def values(*names: str) -> list[bytes]:
    return [name.encode() for name in names]


def log_values(cluster: SimCluster, broker_id: int) -> list[bytes | None]:
    """Every record value in a replica's log, in offset order (decoded from the files)."""
    from protocol.records import decode_batches

    log = cluster.broker(broker_id).logs[TP]
    out: list[bytes | None] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        data = log.read(offset, 1 << 20).read()
        for batch in decode_batches(data):
            out += [record.value for record in batch.records]
            offset = batch.header.next_offset
    return out


def registered_again(cluster: SimCluster, broker_id: int) -> Callable[[], bool]:
    def check() -> bool:
        broker = cluster.broker(broker_id)
        found = cluster.world.zk.brokers.get(broker_id)
        return broker.alive and found is not None and found.session_id == broker.session_id

    return check


def done_truncating(cluster: SimCluster, broker_id: int) -> Callable[[], bool]:
    def check() -> bool:
        state = cluster.broker(broker_id).fetch_state(TP)
        return state is not None and not state.truncating

    return check


def leads(cluster: SimCluster, broker_id: int, tp: TopicPartition = TP) -> Callable[[], bool]:
    def check() -> bool:
        partition = cluster.broker(broker_id).partitions.get(tp)
        return (
            cluster.leader_of(tp) == broker_id
            and partition is not None
            and partition.is_leader
            and partition.leader_epoch == cluster.world.zk.states[tp][0].leader_epoch
        )

    return check


# -- KIP-101 scenario 1: HW truncation, then an immediate election ---------------------------
#
# The stories restart follower A while it stays in the ISR. Here a restarted broker leaves the
# ISR (the controller sees its session end) and must catch up to rejoin, so the hazard takes
# its other form: a new leader epoch makes an in-sync follower run the become-follower
# truncation (KIP-101 step 4) while its HW lags. Truncating to the HW would drop records
# that are committed; the leader then fails and the truncated follower is elected.


def follower_truncates_then_leader_fails(
    cluster: SimCluster, committed: list[bytes], unconfirmed: list[bytes]
) -> None:
    cluster.boot()
    leader_b = cluster.leader_of(TP)
    follower_a, other_c = (b for b in cluster.zk_isr(TP) if b != leader_b)
    a = cluster.broker(follower_a)
    cluster.produce(TP, *committed)
    cluster.wait_acked(TP, *committed)
    cluster.produce_batch(TP, unconfirmed)
    cluster.wait_acked(TP, *unconfirmed)
    # A has everything, but the HW that covers `unconfirmed` only reaches A with its next
    # fetch response (held by the leader for up to replica.fetch.wait.max.ms).
    end = len(committed) + len(unconfirmed)
    partition = a.partitions[TP]
    assert partition.log_end_offset == end and partition.high_watermark <= len(committed)
    epoch = partition.leader_epoch

    # C fails: the controller drops it from the ISR with a new leader epoch, and A follows
    # the same leader again in that epoch, truncating first.
    cluster.crash(other_c, keep="all")
    cluster.run_until(
        lambda: a.partitions[TP].leader_epoch > epoch and done_truncating(cluster, follower_a)(),
        5_000,
        "A to truncate in the new leader epoch",
    )
    assert a.partitions[TP].log_end_offset == end, "A truncated committed records"
    assert a.partitions[TP].high_watermark <= len(committed)

    # The leader fails at once; A, in the ISR, is elected and must hold everything.
    cluster.crash(leader_b, keep="all")
    cluster.run_until(leads(cluster, follower_a), 5_000, "A to lead")
    cluster.restart(leader_b)
    cluster.restart(other_c)
    cluster.wait_settled()
    cluster.check_final()
    for broker_id in (follower_a, leader_b, other_c):
        assert log_values(cluster, broker_id) == committed + unconfirmed


def story_config() -> SimConfig:
    # A long fetch wait keeps A's HW behind for the whole story.
    return scripted(min_insync_replicas=1, replica_fetch_wait_max_ms=10_000)


def test_no_data_loss_when_a_lagging_hw_follower_is_elected(
    make_cluster: MakeCluster,
) -> None:
    """HW truncation: follower A has LEO 5, HW 3; it truncates (to its HW, before leader epochs),
    the leader B fails, A is elected: offsets 3 and 4 would be lost."""
    follower_truncates_then_leader_fails(
        make_cluster(story_config()), values("m0", "m1", "m2"), values("m3", "m4")
    )


def test_kip101_scenario1_hw_truncation_then_immediate_election(
    make_cluster: MakeCluster,
) -> None:
    """KIP-101 scenario 1: A fetched m2 but its HW does not cover it yet; A truncates, then B
    fails and A becomes leader: m2 must survive."""
    follower_truncates_then_leader_fails(make_cluster(story_config()), values("m1"), values("m2"))


# -- KIP-101 scenario 2 and its HW-truncation cousin: divergence after a double failure ------------


def test_no_divergence_after_both_replicas_fail(make_cluster: MakeCluster) -> None:
    """HW truncation and divergence: A and the leader B both go down; A had not flushed the
    last record, B had. A comes back first and leads, and a new record takes offset 3 on A.
    B comes back with HW == LEO == 4: HW truncation would keep its old offset 3, and the
    replicas would diverge. With leader epochs B drops it and fetches A's."""
    cluster = make_cluster(scripted(brokers=2, replication_factor=2, min_insync_replicas=1))
    cluster.boot()
    leader_b = cluster.leader_of(TP)
    follower_a = next(b for b in cluster.zk_isr(TP) if b != leader_b)
    cluster.produce(TP, *values("m0", "m1", "m2"))
    cluster.wait_acked(TP, *values("m0", "m1", "m2"))
    cluster.run_until(
        lambda: cluster.broker(follower_a).partitions[TP].high_watermark == 3, 2_000, "A's HW"
    )
    cluster.flush(follower_a)  # A's disk has m0..m2
    cluster.produce(TP, b"m3")
    cluster.wait_acked(TP, b"m3")
    cluster.run_for(600)  # B's HW (4) reaches its checkpoint
    cluster.flush(leader_b)  # B's disk has m0..m3, HW 4

    cluster.crash(leader_b, keep="all")  # B goes first: A leads, alone in the ISR...
    cluster.run_until(leads(cluster, follower_a), 5_000, "A to lead")
    cluster.crash(follower_a, keep="flushed")  # ...then A fails too, losing m3
    zk = cluster.world.zk
    cluster.run_until(lambda: not zk.brokers, 5_000, "both sessions to expire")
    cluster.restart(follower_a)
    cluster.run_until(leads(cluster, follower_a), 5_000, "A to lead again")
    assert cluster.broker(follower_a).partitions[TP].log_end_offset == 3
    cluster.produce(TP, b"m3-new")
    cluster.wait_acked(TP, b"m3-new")

    cluster.restart(leader_b)
    b = cluster.broker(leader_b)
    cluster.run_until(lambda: TP in b.partitions, 5_000, "B to follow")
    assert (b.partitions[TP].high_watermark, b.partitions[TP].log_end_offset) == (4, 4)
    cluster.wait_settled()
    cluster.check_final()
    expected = values("m0", "m1", "m2", "m3-new")
    assert log_values(cluster, follower_a) == log_values(cluster, leader_b) == expected
    # m3 was acked, but both ISR members crashed: Kafka promises nothing for it.
    assert cluster.lost_acks() == [(b"m3",)]


def test_kip101_scenario2_no_divergence_after_a_torn_tail(make_cluster: MakeCluster) -> None:
    """KIP-101 scenario 2: a power outage takes both brokers; the leader B had not flushed
    m2 and comes back with half of it (a torn tail), A has all of it. B restarts first,
    leads and takes m3 at offset 1 in a new epoch; A must drop its m2 and fetch m3."""
    cluster = make_cluster(scripted(brokers=2, replication_factor=2, min_insync_replicas=1))
    cluster.boot()
    leader_b = cluster.leader_of(TP)
    follower_a = next(b for b in cluster.zk_isr(TP) if b != leader_b)
    cluster.produce(TP, b"m1")
    cluster.wait_acked(TP, b"m1")
    cluster.flush(leader_b)
    cluster.produce(TP, b"m2")
    cluster.wait_acked(TP, b"m2")
    cluster.flush(follower_a)  # A: m1, m2 on disk; B: only m1

    cluster.crash(follower_a, keep="all")  # A first, so B stays the last ISR member
    cluster.run_until(lambda: cluster.zk_isr(TP) == (leader_b,), 5_000, "A to leave the ISR")
    cluster.crash(leader_b, keep="flushed", torn=True)
    cut = cluster.broker(leader_b).last_crash[TP]
    assert cut.torn_bytes > 0 and cut.kept_offset == 1
    cluster.restart(leader_b)
    cluster.run_until(leads(cluster, leader_b), 5_000, "B to lead")
    assert cluster.broker(leader_b).partitions[TP].log_end_offset == 1  # torn m2 recovered away
    cluster.produce(TP, b"m3")
    cluster.wait_acked(TP, b"m3")

    cluster.restart(follower_a)
    cluster.wait_settled()
    cluster.check_final()
    assert log_values(cluster, follower_a) == log_values(cluster, leader_b) == values("m1", "m3")
    assert cluster.lost_acks() == [(b"m2",)]  # acked, then lost by both ISR members at once


# -- bugs the randomised simulation found (each failed before its fix) ----------------------


def test_bounced_leader_that_lost_data_must_not_keep_leading(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(scripted(partitions=2))
    cluster.boot()
    controller = cluster.controller_id()
    tp = next(tp for tp in cluster.partitions() if cluster.leader_of(tp) != controller)
    leader = cluster.leader_of(tp)
    cluster.produce(tp, *values("a", "b", "c"))
    cluster.wait_acked(tp, *values("a", "b", "c"))
    cluster.pause_controller()  # busy elsewhere: it will see the bounce in one read
    cluster.crash(leader, keep="flushed")  # power loss: nothing was flushed
    cluster.restart(leader)
    cluster.run_until(registered_again(cluster, leader), 2_000, "the leader to re-register")
    assert cluster.controller_id() == controller
    cluster.pause_controller(False)
    # A failure, then a startup: another ISR member leads, the empty log follows it.
    cluster.run_until(lambda: cluster.leader_of(tp) not in (-1, leader), 5_000, "an election")
    cluster.wait_settled()
    cluster.check_final()
    assert cluster.lost_acks() == []


def test_new_controller_must_not_keep_a_restarted_leader(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(scripted(partitions=2))
    cluster.boot()
    controller = cluster.controller_id()
    tp = next(tp for tp in cluster.partitions() if cluster.leader_of(tp) != controller)
    leader = cluster.leader_of(tp)
    cluster.produce(tp, *values("a", "b", "c"))
    cluster.wait_acked(tp, *values("a", "b", "c"))
    cluster.crash(leader, keep="flushed")  # power loss: nothing was flushed
    cluster.restart(leader)
    cluster.run_for(100)
    assert controller is not None and controller != leader
    cluster.crash(controller)  # before it sees the leader's session expire
    cluster.run_until(
        lambda: cluster.controller_id() not in (None, controller), 5_000, "a new controller"
    )
    # It found the leader registered after the state was written: another ISR member leads.
    cluster.run_until(lambda: cluster.leader_of(tp) not in (-1, leader), 5_000, "an election")
    cluster.restart(controller)
    cluster.wait_settled(timeout_ms=5_000)
    cluster.check_final()
    assert cluster.lost_acks() == []


def test_stale_leader_and_isr_must_not_revert_the_leaders_isr(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(scripted(replica_lag_time_max_ms=1_000))
    cluster.boot()
    leader = cluster.leader_of(TP)
    lagging = next(b for b in (2, 3, 1) if b not in (leader, cluster.controller_id()))
    last_seen: list[object] = []
    original_handle = cluster.broker(leader).handle_request

    def recording(envelope: object) -> None:  # keep the last LeaderAndIsr the leader got
        from protocol.messages.leader_and_isr import LeaderAndIsrRequest
        from tests.simulation.network import Envelope

        assert isinstance(envelope, Envelope)
        if isinstance(envelope.payload, LeaderAndIsrRequest):
            last_seen[:] = [envelope]
        original_handle(envelope)

    cluster.broker(leader).handle_request = recording  # type: ignore[method-assign]
    # 1. A follower falls behind: the leader shrinks the ISR (partition epoch p+1); the
    #    controller reloads (a session expiry) and tells the leader so: (e, ISR, p+1).
    cluster.isolate(lagging)
    cluster.run_until(lambda: lagging not in cluster.zk_isr(TP), 5_000, "the ISR to shrink")
    controller = cluster.controller_id()
    assert controller is not None
    last_seen.clear()
    cluster.broker(controller).expire_session()
    cluster.run_until(lambda: bool(last_seen), 5_000, "the new controller's LeaderAndIsr")
    stale = last_seen[0]
    # 2. It catches up and rejoins: the leader writes the larger ISR (p+2).
    cluster.heal()
    cluster.run_until(lambda: lagging in cluster.zk_isr(TP), 5_000, "the ISR to expand")
    # 3. The channel re-sends the same request (as after a lost response).
    from tests.simulation.network import Envelope

    assert isinstance(stale, Envelope)
    cluster.world.net.request(
        stale.src,
        leader,
        stale.payload,
        timeout_ms=1_000,
        on_response=lambda response: None,
        on_timeout=lambda: None,
        label="LeaderAndIsrRequest (re-sent)",
    )
    cluster.run_for(50)
    # 4. The follower lags again; acks now count only the leader's (reverted) ISR.
    cluster.isolate(lagging)
    cluster.produce(TP, *values("x", "y"))
    cluster.wait_acked(TP, *values("x", "y"))
    # 5. The leader fails: ZooKeeper's ISR still names the lagging follower.
    cluster.crash(leader, keep="all")
    cluster.run_until(lambda: cluster.leader_of(TP) not in (leader, -1), 5_000, "an election")
    cluster.heal()
    cluster.restart(leader)
    cluster.wait_settled()
    cluster.check_final()


def test_acks_all_is_never_acked_below_min_insync_replicas(make_cluster: MakeCluster) -> None:
    cluster = make_cluster(scripted(replica_lag_time_max_ms=1_000))
    cluster.boot()
    leader = cluster.leader_of(TP)
    cluster.isolate(leader)  # followers stop fetching; the ISR will shrink to the leader
    cluster.produce(TP, b"x")
    cluster.run_until(lambda: cluster.zk_isr(TP) == (leader,), 5_000, "the ISR to shrink")
    cluster.run_for(100)  # the HW covers it now, but ISR [leader] < min.insync.replicas 2
    cluster.heal()
    cluster.wait_settled()


def test_restarted_broker_must_not_serve_the_controller_before_it_registers(
    make_cluster: MakeCluster,
) -> None:
    cluster = make_cluster(scripted(partitions=2))
    cluster.boot()
    controller = cluster.controller_id()
    assert controller is not None
    tp = next(tp for tp in cluster.partitions() if cluster.leader_of(tp) != controller)
    leader = cluster.leader_of(tp)
    cluster.produce(tp, *values("a", "b", "c"))
    cluster.wait_acked(tp, *values("a", "b", "c"))
    cluster.crash(leader, keep="flushed")  # power loss: nothing was flushed
    cluster.restart(leader)  # its old session (and registration) lives on a while
    # A new controller loads now: the old registration is all ZooKeeper shows of the leader.
    cluster.broker(controller).expire_session()
    cluster.wait_settled()
    cluster.check_final()
    assert cluster.lost_acks() == []


def controller_knows_registration(cluster: SimCluster, broker_id: int) -> Callable[[], bool]:
    """The active controller has handled `broker_id`'s current registration."""

    def check() -> bool:
        controller_id = cluster.controller_id()
        found = cluster.world.zk.brokers.get(broker_id)
        if controller_id is None or found is None:
            return False
        controller = cluster.broker(controller_id).controller
        if controller is None or not controller.context.active:
            return False
        known = controller.context.live_brokers.get(broker_id)
        return known is not None and known.epoch == found.epoch

    return check


@pytest.mark.parametrize("seen", ["in-one-read", "at-load"])
def test_session_expiry_without_restart_keeps_the_follower_in_the_isr(
    make_cluster: MakeCluster, seen: str
) -> None:
    """Seeds 1219 and 2668: a follower's ZooKeeper session expires but its process lives on
    (its log intact); it re-registers with a new broker epoch. Taken for a restart, it left
    the ISR, so when the leader then lost its unflushed data in a crash, that leader, the
    last ISR member, was elected again and the acked records were gone. A re-registration
    by the same process (same incarnation) is no restart: the follower stays in the ISR
    and, holding the records, is elected when the leader fails."""
    cluster = make_cluster(scripted(partitions=3, replication_factor=2))
    cluster.boot()
    controller = cluster.controller_id()
    assert controller is not None
    # One read: a partition the controller does not host; at load: one the controller
    # follows (its own session expires, so a controller, maybe itself, loads again).
    if seen == "in-one-read":
        tp = next(tp for tp in cluster.partitions() if controller not in cluster.zk_isr(tp))
    else:
        tp = next(
            tp
            for tp in cluster.partitions()
            if controller in cluster.zk_isr(tp) and cluster.leader_of(tp) != controller
        )
    leader = cluster.leader_of(tp)
    (follower,) = (b for b in cluster.zk_isr(tp) if b != leader)
    written = values("a", "b", "c")
    cluster.produce(tp, *written)
    cluster.wait_acked(tp, *written)

    old_epoch = cluster.broker(follower).broker_epoch
    if seen == "in-one-read":
        cluster.pause_controller()  # busy elsewhere: it will see the new epoch in one read
    cluster.broker(follower).expire_session()
    cluster.run_until(registered_again(cluster, follower), 2_000, "the follower to re-register")
    assert cluster.broker(follower).broker_epoch > old_epoch
    cluster.pause_controller(False)
    cluster.run_until(
        controller_knows_registration(cluster, follower), 5_000, "the controller to see it"
    )
    assert follower in cluster.zk_isr(tp)

    cluster.crash(leader, keep="flushed")  # power loss: nothing was flushed
    cluster.restart(leader)
    cluster.run_until(leads(cluster, follower, tp), 5_000, "the follower to lead")
    cluster.wait_settled()
    cluster.check_final()
    assert cluster.lost_acks() == []


# -- compaction: what a replica fetching a cleaned log holds ---------------------------------

CTP = TopicPartition("c", 0)


def keyed_offsets(cluster: SimCluster, broker_id: int, key: bytes) -> list[int]:
    """The offsets of `key`'s records in a replica's log of CTP."""
    from protocol.records import decode_batches

    log = cluster.broker(broker_id).logs[CTP]
    out: list[int] = []
    offset = log.log_start_offset
    while offset < log.log_end_offset:
        batches = list(decode_batches(log.read(offset, 1 << 20).read()))
        if not batches:
            break
        for batch in batches:
            out += [r.offset for r in batch.records if r.key == key]
            offset = batch.header.next_offset
    return out


def test_a_follower_of_a_cleaned_log_lacks_a_key_until_it_reaches_its_latest_record(
    make_cluster: MakeCluster,
) -> None:
    """Seed 2067 (compacted seeds, disk faults drawn): b2, its log of c-1 lost in a crash,
    fetched again from a leader whose cleaner had removed k1's values at 0, 5 and 6 (k1's
    latest record, at 25, supersedes them: Kafka's cleaner keeps a key's latest offset
    only). At HW 9 it held no record of k1, while b3, back with offsets 0-1, held k1's first
    value below its HW 2: both as Kafka's replicas would be, and both reach k1's record at
    25 in the end. The agreement invariant compared them below 2 and failed; it now excuses
    what the committed history and a cleaner's removals explain (compaction.py). (The pin it
    replaces blamed a tombstone removed after delete.retention.ms: k1 had none then.)"""
    cluster = make_cluster(
        scripted(
            compacted_topic=True,
            min_insync_replicas=1,  # the leader alone takes writes while both are cut off
            replica_lag_time_max_ms=300,  # and soon has the ISR to itself
            replica_fetch_max_bytes_choices=(700,),  # a follower catches up in many fetches
            cleaner_interval_ms=(50, 50),
            cleaning_time_ms=(0, 0),
        )
    )
    cluster.boot()
    leader, behind, holder = 1, 2, 3  # b1 cleans; b3 never does (broker.py: id % 3)
    assert cluster.leader_of(CTP) == leader
    key = b"k"
    cluster.isolate(behind)  # it will fetch c-0 from offset 0, after the cleaning
    cluster.producer.produce_keyed(CTP, [Record(b"first", key=key)])
    cluster.wait_acked(CTP, b"first")
    cluster.run_until(
        lambda: cluster.broker(holder).partitions[CTP].high_watermark >= 1,
        5_000,
        "b3 to hold the first value below its HW",
    )
    cluster.isolate(holder)  # it keeps the first value, in the same leader epoch
    # Fillers of other keys between, and after: the latest in a rolled segment, and dirty
    # enough for the cleaner to choose the log again (min.cleanable.dirty.ratio).
    fillers = [Record(f"filler-{i}".encode(), key=f"f{i}".encode()) for i in range(120)]
    records = [Record(b"second", key=key), *fillers[:40], Record(b"latest", key=key)]
    for record in [*records, *fillers[40:]]:
        assert record.value is not None
        cluster.producer.produce_keyed(CTP, [record])
        cluster.wait_acked(CTP, record.value)
    latest = keyed_offsets(cluster, leader, key)[-1]
    cluster.run_until(
        lambda: keyed_offsets(cluster, leader, key) == [latest],
        10_000,
        "the leader's cleaner to remove the superseded values",
    )

    def lacking_while_the_other_holds_the_first_value() -> bool:
        settled = dict(cluster.invariants.settled_replicas(CTP))
        if behind not in settled or holder not in settled:
            return False
        below = min(settled[behind].high_watermark, settled[holder].high_watermark)
        return (
            below > 0
            and settled[behind].log_end_offset <= latest  # not there yet
            and keyed_offsets(cluster, behind, key) == []
            and keyed_offsets(cluster, holder, key)[-1:] == [0]
        )

    epoch = cluster.broker(leader).partitions[CTP].leader_epoch
    cluster.world.net.cut.discard(behind)  # b3, still cut off, holds the first value
    cluster.trace(f"SCRIPT: b{behind} reaches its peers again")
    cluster.run_until(lacking_while_the_other_holds_the_first_value, 5_000, "the moment")
    assert cluster.broker(leader).partitions[CTP].leader_epoch == epoch
    cluster.heal()
    cluster.wait_settled()
    cluster.check_final()
    for broker_id in (leader, behind, holder):
        assert keyed_offsets(cluster, broker_id, key)[-1] == latest
    assert cluster.lost_acks() == []
