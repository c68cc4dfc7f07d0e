"""Replication scenarios with RF=2 against real broker processes and a real ZooKeeper.

the failure scenarios of docs/reliability.md, KIP-101 scenarios 1 and 2 and the two
HW-truncation stories that motivated it (a lagging-HW follower elected; both replicas failing).

One 3-broker cluster for the module; each test creates its own topic on the two brokers that
are not the controller (so bouncing a replica never moves the controller, and the third broker
elects), and leaves every broker running. Timings are small (see OVERRIDES) so that bounces,
session expiries and ISR changes take seconds. Every high-watermark checkpoint is stale on disk
(an hour's interval): after a crash a replica only knows the HW it had at its last clean stop,
which is exactly what made HW-based truncation lose and diverge records.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from client.cli.zookeeper_server import ZooKeeperServer
from client.consumer import Consumer
from protocol.errors import ErrorCode
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    BatchId,
    ZkView,
    assert_agree_below_high_watermark,
    assert_epochs_increase,
    create_topic,
    log_end_offset,
    logged_events,
    offset_for_leader_epoch,
    partition_metadata,
    produce,
    produce_fails,
    read_committed,
    running_cluster,
    truncations_logged,
    wait_converged,
    wait_isr,
    wait_led,
    wait_state,
    wait_whole,
    whole_cluster_around,
    zk_view,
)

pytestmark = [pytest.mark.integration]

OVERRIDES = {
    **FAST_REPLICATION,
    "zookeeper.session.timeout.ms": "4000",
    "replica.lag.time.max.ms": "3000",
    # HW checkpoints stay stale on disk on purpose (the seed stories need it).
    "replica.high.watermark.checkpoint.interval.ms": "3600000",
}


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    with running_cluster(
        zookeeper.port, tmp_path_factory.mktemp("replication"), OVERRIDES
    ) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


async def _pair(cluster: Cluster, zk: ZkView) -> tuple[BrokerProcess, BrokerProcess]:
    """Two brokers that are not the controller: (preferred leader, follower)."""
    found = await zk.controller()
    assert found is not None
    controller_id = found[0]
    first, second = (b for b in cluster.brokers.values() if b.broker_id != controller_id)
    return first, second


async def _bounce(cluster: Cluster, zk: ZkView, topic: str, *, leader: bool) -> None:
    """SIGTERM and restart the partition's leader (or its follower), then wait until both
    replicas are in the ISR again."""
    state = await zk.partition_state(topic, 0)
    assert state is not None
    replicas = [int(r) for r in state.isr]
    assert len(replicas) == 2, f"both replicas in the ISR before a bounce: {state}"
    victim = state.leader if leader else next(r for r in replicas if r != state.leader)
    cluster.brokers[victim].restart()
    after = await wait_isr(cluster, zk, topic, 0, replicas)
    assert after.leader_epoch > state.leader_epoch, "a bounce moves the leader epoch on"


def _epoch_runs(batches: list[BatchId]) -> list[tuple[int, int]]:
    """(epoch, first offset) for each run of batches written in one leader epoch."""
    runs: list[tuple[int, int]] = []
    for batch in batches:
        if not runs or runs[-1][0] != batch.leader_epoch:
            runs.append((batch.leader_epoch, batch.base_offset))
    return runs


def _checkpoints(brokers: list[BrokerProcess], topic: str) -> list[list[tuple[int, int]]]:
    return [[(e.epoch, e.start_offset) for e in b.leader_epoch_entries(topic, 0)] for b in brokers]


@pytest.mark.timeout(120)
async def test_basic_epoch_workflow(cluster: Cluster) -> None:
    """Scenario 1: epochs are stamped on batches and checkpointed identically by leader
    and follower through a follower bounce and a leader bounce; epochs only increase, and
    OffsetForLeaderEpoch agrees with the checkpoint."""
    topic = "epoch-workflow"
    async with zk_view(cluster) as zk:
        leader, follower = await _pair(cluster, zk)
        replicas = [leader, follower]
        await create_topic(cluster, topic, [[leader.broker_id, follower.broker_id]])
        state = await wait_isr(cluster, zk, topic, 0, [leader.broker_id, follower.broker_id])
        epochs_seen = [state.leader_epoch]
        acked: list[int] = []

        async def produce_one_and_check() -> None:
            acked.extend(await produce(cluster, topic, 0, [b"m%d" % len(acked)]))
            batches = await wait_converged(replicas, topic, 0, len(acked))
            assert_epochs_increase(batches)
            assert batches[-1].leader_epoch == epochs_seen[-1], "stamped with the current epoch"
            runs = _epoch_runs(batches)
            assert _checkpoints(replicas, topic) == [runs, runs]
            current = await zk.partition_state(topic, 0)
            assert current is not None
            lead = cluster.brokers[current.leader]
            for i, (epoch, _start) in enumerate(runs):
                end = runs[i + 1][1] if i + 1 < len(runs) else len(acked)
                answer = await offset_for_leader_epoch(lead, topic, 0, epoch)
                assert (answer.error_code, answer.leader_epoch, answer.end_offset) == (
                    0,
                    epoch,
                    end,
                )

        await produce_one_and_check()
        assert _checkpoints(replicas, topic) == [[(epochs_seen[0], 0)]] * 2

        for bounced in (follower, leader):
            before = await zk.partition_state(topic, 0)
            assert before is not None
            bounced.restart()
            state = await wait_isr(cluster, zk, topic, 0, [leader.broker_id, follower.broker_id])
            assert state.leader_epoch > before.leader_epoch, "a bounce moves the epoch on"
            epochs_seen.append(state.leader_epoch)
            await produce_one_and_check()

    assert epochs_seen == sorted(set(epochs_seen))
    assert await read_committed(cluster, topic, 0) == [b"m0", b"m1", b"m2"]


@pytest.mark.timeout(120)
async def test_offset_for_leader_epoch_semantics(cluster: Cluster) -> None:
    """Scenario 4: the latest epoch -> the LEO; an older epoch -> the start of the next
    higher one; an epoch the leader never had -> the largest smaller epoch and its end; a
    broker that does not lead -> NOT_LEADER_OR_FOLLOWER."""
    topic = "ofle"
    async with zk_view(cluster) as zk:
        leader, follower = await _pair(cluster, zk)
        await create_topic(cluster, topic, [[leader.broker_id, follower.broker_id]])
        isr = [leader.broker_id, follower.broker_id]
        await wait_isr(cluster, zk, topic, 0, isr)
        await produce(cluster, topic, 0, [b"a", b"b"])
        # Each round bounces the follower (an epoch with no records) then the leader, then
        # writes: the log's epochs get gaps, epochs this leader never had.
        for _ in range(2):
            await _bounce(cluster, zk, topic, leader=False)
            await _bounce(cluster, zk, topic, leader=True)
            await produce(cluster, topic, 0, [b"c", b"d", b"e"])
        state = await zk.partition_state(topic, 0)
        assert state is not None
        lead = cluster.brokers[state.leader]
        other = next(b for b in (leader, follower) if b.broker_id != state.leader)
        batches = await wait_converged([leader, follower], topic, 0, 8)
        runs = _epoch_runs(batches)
        assert len(runs) == 3 and runs[-1][0] == state.leader_epoch
        (e0, _), (e1, s1), (e2, s2) = runs

        async def answer(broker: BrokerProcess, epoch: int) -> tuple[int, int, int]:
            a = await offset_for_leader_epoch(broker, topic, 0, epoch)
            return a.error_code, a.leader_epoch, a.end_offset

        assert await answer(lead, e2) == (0, e2, 8), "latest epoch: the LEO"
        assert await answer(lead, e0) == (0, e0, s1), "older epoch: next epoch's start"
        assert await answer(lead, e1) == (0, e1, s2)
        missing = [e for e in range(e0 + 1, e2) if e != e1]
        assert missing, f"the bounces left no unused epoch between {runs}"
        for epoch in missing:
            below = e0 if epoch < e1 else e1
            end = s1 if below == e0 else s2
            assert await answer(lead, epoch) == (0, below, end), f"unknown epoch {epoch}"
        a = await offset_for_leader_epoch(other, topic, 0, e2)
        assert a.error_code == ErrorCode.NOT_LEADER_OR_FOLLOWER
        a = await offset_for_leader_epoch(lead, topic, 0, e2, current_leader_epoch=e2 - 1)
        assert a.error_code == ErrorCode.FENCED_LEADER_EPOCH


@pytest.mark.timeout(120)
async def test_fast_leader_change(cluster: Cluster) -> None:
    """Scenario 3: five rounds of {produce one; bounce the follower; bounce the leader},
    each bounce waiting for both replicas back in the ISR: after every round every replica's
    LEO is the number of acked records, and the replicas hold the same batches."""
    topic = "fast-leader-change"
    async with zk_view(cluster) as zk:
        first, second = await _pair(cluster, zk)
        replicas = [first, second]
        await create_topic(cluster, topic, [[first.broker_id, second.broker_id]])
        await wait_isr(cluster, zk, topic, 0, [first.broker_id, second.broker_id])
        acked: list[int] = []
        epochs: list[int] = []
        for round_ in range(5):
            acked += await produce(cluster, topic, 0, [b"r%d" % round_])
            await _bounce(cluster, zk, topic, leader=False)
            await _bounce(cluster, zk, topic, leader=True)
            for broker in replicas:
                assert await log_end_offset(broker, topic, 0) == len(acked), (round_, broker)
            assert await assert_agree_below_high_watermark(cluster, zk, topic, 0) == len(acked)
            batches = await wait_converged(replicas, topic, 0, len(acked))
            assert_epochs_increase(batches)
            state = await zk.partition_state(topic, 0)
            assert state is not None
            epochs.append(state.leader_epoch)
    assert acked == list(range(5))
    assert epochs == sorted(set(epochs)), "leader epochs only increase"
    assert await read_committed(cluster, topic, 0) == [b"r%d" % i for i in range(5)]


@pytest.mark.timeout(120)
async def test_no_divergence_after_torn_leader_tail(cluster: Cluster) -> None:
    """Scenario 2: ten records acked one by one; stop the follower, then crash the leader
    and tear its last batch; the leader comes back alone (the last ISR member) and takes nine
    more; the follower then truncates the record the leader lost and copies the new ones:
    equal LEOs, identical batch CRC sequences."""
    topic = "torn-leader-tail"
    async with zk_view(cluster) as zk:
        leader, follower = await _pair(cluster, zk)
        await create_topic(
            cluster,
            topic,
            [[leader.broker_id, follower.broker_id]],
            {"min.insync.replicas": "1"},
        )
        await wait_isr(cluster, zk, topic, 0, [leader.broker_id, follower.broker_id])
        first = [b"first-%d" % i for i in range(10)]
        assert await produce(cluster, topic, 0, first) == list(range(10))
        await wait_converged([leader, follower], topic, 0, 10)

        assert follower.stop() == 0
        await wait_isr(cluster, zk, topic, 0, [leader.broker_id])
        leader.kill()
        await wait_state(zk, topic, 0, lambda s: s.leader == -1, 30, "offline")
        last = leader.batch_headers(topic, 0)[-1]
        assert last.base_offset == 9
        leader.cut_active_segment(topic, 0, last.size // 2)

        leader.start()
        await wait_led(cluster, zk, topic, 0, leader.broker_id)
        assert await log_end_offset(leader, topic, 0) == 9, "recovery dropped the torn batch"
        second = [b"second-%d" % i for i in range(9)]
        assert await produce(cluster, topic, 0, second) == list(range(9, 18))
        assert await assert_agree_below_high_watermark(cluster, zk, topic, 0) == 18

        follower.start()
        await wait_isr(cluster, zk, topic, 0, [leader.broker_id, follower.broker_id])
        batches = await wait_converged([leader, follower], topic, 0, 18)
    assert_epochs_increase(batches)
    assert 9 in truncations_logged(follower, topic, 0), "the follower dropped its offset 9"
    assert await read_committed(cluster, topic, 0) == first[:9] + second


@pytest.mark.timeout(120)
async def test_unclean_leader_election_off(cluster: Cluster) -> None:
    """Scenario 11: with unclean election off, a replica that left the ISR does not lead
    when it comes back alone: produce fails and consumers see nothing new; once the last ISR
    member returns, consumers read every acked record."""
    topic = "unclean-off"
    async with zk_view(cluster) as zk:
        leader, follower = await _pair(cluster, zk)
        await create_topic(cluster, topic, [[leader.broker_id, follower.broker_id]])
        await wait_isr(cluster, zk, topic, 0, [leader.broker_id, follower.broker_id])
        await produce(cluster, topic, 0, [b"first"])
        await wait_converged([leader, follower], topic, 0, 1)
        assert follower.stop() == 0
        await wait_isr(cluster, zk, topic, 0, [leader.broker_id])
        await produce(cluster, topic, 0, [b"second"])
        assert await assert_agree_below_high_watermark(cluster, zk, topic, 0) == 2
        assert leader.stop() == 0
        offline = await wait_state(zk, topic, 0, lambda s: s.leader == -1, 30, "offline")
        assert offline.isr == (leader.broker_id,), "the ISR remembers who has the data"

        follower.start()
        await wait_whole(cluster)

        async def told_offline() -> bool:
            meta = await partition_metadata(follower, topic, 0)
            return meta is not None and meta.leader_id == -1

        await eventually(told_offline, 30, "the returned follower to learn the partition")
        state = await zk.partition_state(topic, 0)
        assert state is not None and state.leader == -1, "no unclean election"
        error = await produce_fails(cluster, topic, 0, b"lost", delivery_timeout_ms=3000)
        assert error.code in (
            ErrorCode.REQUEST_TIMED_OUT,
            ErrorCode.LEADER_NOT_AVAILABLE,
            ErrorCode.NOT_LEADER_OR_FOLLOWER,
        ), error
        async with Consumer(cluster.live_bootstrap, auto_offset_reset="earliest") as consumer:
            consumer.assign([(topic, 0)])
            consumer.seek(topic_partition := (topic, 0), 0)
            assert await consumer.poll(timeout_ms=1000) == [], "nothing to read without a leader"
            assert consumer.highwater(topic_partition) is None
        state = await zk.partition_state(topic, 0)
        assert state is not None and state.leader == -1, "still no leader after the attempts"

        leader.start()
        await wait_isr(cluster, zk, topic, 0, [leader.broker_id, follower.broker_id])
        await wait_converged([leader, follower], topic, 0, 2)
    assert await read_committed(cluster, topic, 0) == [b"first", b"second"]


@pytest.mark.timeout(120)
async def test_unclean_leader_election_on_converges(cluster: Cluster) -> None:
    """With the topic's unclean.leader.election.enable=true the out-of-ISR follower leads when
    it comes back alone (losing "second", as unclean election may), and when the old leader
    returns it truncates its divergent tail: the replicas still end identical."""
    topic = "unclean-on"
    async with zk_view(cluster) as zk:
        leader, follower = await _pair(cluster, zk)
        both = [leader.broker_id, follower.broker_id]
        await create_topic(cluster, topic, [both], {"unclean.leader.election.enable": "true"})
        await wait_isr(cluster, zk, topic, 0, both)
        await produce(cluster, topic, 0, [b"first"])
        await wait_converged([leader, follower], topic, 0, 1)
        assert follower.stop() == 0
        await wait_isr(cluster, zk, topic, 0, [leader.broker_id])
        await produce(cluster, topic, 0, [b"second"])
        assert leader.stop() == 0
        await wait_state(zk, topic, 0, lambda s: s.leader == -1, 30, "offline")

        follower.start()
        await wait_led(cluster, zk, topic, 0, follower.broker_id)
        assert await produce(cluster, topic, 0, [b"third"]) == [1]
        leader.start()
        await wait_isr(cluster, zk, topic, 0, both, leader=follower.broker_id)
        batches = await wait_converged([leader, follower], topic, 0, 2)
    assert_epochs_increase(batches)
    assert await read_committed(cluster, topic, 0) == [b"first", b"third"]


@pytest.mark.timeout(120)
async def test_seed_data_loss_scenario(cluster: Cluster) -> None:
    """Data loss under HW truncation (the story KIP-101 opens with): follower A holds 5
    records but its checkpointed HW is 3 when it crashes; it comes back, the leader B
    crashes, A leads, B comes back as follower. With leader epochs neither truncates: all 5
    acked records stay."""
    topic = "seed-data-loss"
    async with zk_view(cluster) as zk:
        b, a = await _pair(cluster, zk)
        both = [a.broker_id, b.broker_id]
        await create_topic(cluster, topic, [[b.broker_id, a.broker_id]])
        await wait_isr(cluster, zk, topic, 0, both, leader=b.broker_id)
        records = [b"m%d" % i for i in range(5)]
        await produce(cluster, topic, 0, records[:3])
        await wait_converged([b, a], topic, 0, 3)
        # A clean stop checkpoints A's HW: 3, or less when the fetch that would have told A
        # the leader's HW had not come back yet. The hour-long interval keeps it there.
        assert a.stop() == 0
        hw_on_disk = a.checkpointed_high_watermark(topic, 0)
        assert hw_on_disk is not None and hw_on_disk <= 3
        a.start()
        await wait_isr(cluster, zk, topic, 0, both, leader=b.broker_id)
        await produce(cluster, topic, 0, records[3:])
        await wait_converged([b, a], topic, 0, 5)

        a.kill()  # A: LEO 5, HW 3 (or less) on disk
        assert a.checkpointed_high_watermark(topic, 0) == hw_on_disk
        assert len(a.batch_headers(topic, 0)) == 5
        a.start()
        await wait_isr(cluster, zk, topic, 0, both, leader=b.broker_id)
        b.kill()
        await wait_led(cluster, zk, topic, 0, a.broker_id)
        assert await log_end_offset(a, topic, 0) == 5
        assert await read_committed(cluster, topic, 0) == records

        b.start()
        await wait_isr(cluster, zk, topic, 0, both, leader=a.broker_id)
        await wait_converged([a, b], topic, 0, 5)
    assert truncations_logged(a, topic, 0) == [], "A kept the records above its HW"
    assert truncations_logged(b, topic, 0) == [], "B kept what A has"
    assert await read_committed(cluster, topic, 0) == records


@pytest.mark.timeout(120)
async def test_seed_inconsistency_scenario(cluster: Cluster) -> None:
    """Inconsistency under HW truncation (KIP-101's second story): leader B holds a record follower
    A lacks when both crash; A comes back first and leads (unclean election allowed here, as
    the seed's old Kafka would), takes a different record at the same offset; B comes back.
    With leader epochs B truncates its record and copies A's: the logs agree."""
    topic = "seed-inconsistency"
    async with zk_view(cluster) as zk:
        b, a = await _pair(cluster, zk)
        both = [a.broker_id, b.broker_id]
        await create_topic(
            cluster,
            topic,
            [[b.broker_id, a.broker_id]],
            {"unclean.leader.election.enable": "true"},
        )
        await wait_isr(cluster, zk, topic, 0, both, leader=b.broker_id)
        common = [b"m0", b"m1", b"m2"]
        await produce(cluster, topic, 0, common)
        await wait_converged([b, a], topic, 0, 3)
        a.kill()
        await produce(cluster, topic, 0, [b"only-on-b"], acks=1)
        b.kill()
        assert len(b.batch_headers(topic, 0)) == 4 and len(a.batch_headers(topic, 0)) == 3
        await wait_state(zk, topic, 0, lambda s: s.leader == -1, 30, "offline")

        a.start()
        await wait_led(cluster, zk, topic, 0, a.broker_id)
        assert await produce(cluster, topic, 0, [b"only-on-a"]) == [3]
        assert await assert_agree_below_high_watermark(cluster, zk, topic, 0) == 4
        b.start()
        await wait_isr(cluster, zk, topic, 0, both, leader=a.broker_id)
        batches = await wait_converged([a, b], topic, 0, 4)
    assert_epochs_increase(batches)
    assert 3 in truncations_logged(b, topic, 0), "B dropped its divergent record"
    assert await read_committed(cluster, topic, 0) == [*common, b"only-on-a"]


@pytest.mark.timeout(120)
async def test_kip101_hw_truncation_then_immediate_election(cluster: Cluster) -> None:
    """KIP-101 scenario 1: follower A has every record but a stale HW on disk when it
    restarts; the leader B dies as soon as A has done its follower truncation, and A leads
    (unclean allowed, so the election need not wait for A to rejoin the ISR). Truncating to
    the HW would have lost acked records; with OffsetForLeaderEpoch A keeps them."""
    topic = "kip101-scenario-1"
    async with zk_view(cluster) as zk:
        b, a = await _pair(cluster, zk)
        await create_topic(
            cluster,
            topic,
            [[b.broker_id, a.broker_id]],
            {"unclean.leader.election.enable": "true"},
        )
        await wait_isr(cluster, zk, topic, 0, [a.broker_id, b.broker_id], leader=b.broker_id)
        records = [b"m1", b"m2"]
        await produce(cluster, topic, 0, records)
        await wait_converged([b, a], topic, 0, 2)
        a.kill()
        stale = a.checkpointed_high_watermark(topic, 0)
        assert stale is None or stale < 2, f"precondition: A's HW on disk is behind ({stale})"

        mark = len(a.log_text())
        a.start()

        async def truncation_done() -> dict[str, object] | None:
            done = logged_events(a, "follower truncated, fetching", since=mark, topic=topic)
            return done[0] if done else None

        done = await eventually(truncation_done, 30, "A's follower truncation")
        b.kill()
        assert done["log_end_offset"] == 2, "A truncated to its epoch's end, not its HW"
        await wait_led(cluster, zk, topic, 0, a.broker_id)
        assert await read_committed(cluster, topic, 0) == records
        b.start()
        await wait_isr(cluster, zk, topic, 0, [a.broker_id, b.broker_id], leader=a.broker_id)
        await wait_converged([a, b], topic, 0, 2)
    assert truncations_logged(a, topic, 0) == []


@pytest.mark.timeout(120)
async def test_kip101_divergence_after_double_hard_failure(cluster: Cluster) -> None:
    """KIP-101 scenario 2: both replicas crash at once; the one the controller keeps as the
    last ISR member lost its last batch to a torn tail; it comes back first, leads, takes a
    new record at that offset in a new epoch; the other comes back and truncates its orphan
    record instead of diverging (the lost record is a double failure's allowed loss)."""
    topic = "kip101-scenario-2"
    async with zk_view(cluster) as zk:
        first, second = await _pair(cluster, zk)
        await create_topic(
            cluster, topic, [[first.broker_id, second.broker_id]], {"min.insync.replicas": "1"}
        )
        await wait_isr(cluster, zk, topic, 0, [first.broker_id, second.broker_id])
        await produce(cluster, topic, 0, [b"m0", b"m1", b"m2"])
        await wait_converged([first, second], topic, 0, 3)
        first.kill()
        second.kill()
        offline = await wait_state(zk, topic, 0, lambda s: s.leader == -1, 30, "offline")
        (last_isr,) = offline.isr
        torn = cluster.brokers[last_isr]
        other = second if torn is first else first
        torn.cut_active_segment(topic, 0, torn.batch_headers(topic, 0)[-1].size // 2)

        torn.start()
        led = await wait_led(cluster, zk, topic, 0, torn.broker_id)
        assert await log_end_offset(torn, topic, 0) == 2
        assert await produce(cluster, topic, 0, [b"m3"]) == [2]
        assert await assert_agree_below_high_watermark(cluster, zk, topic, 0) == 3
        other.start()
        await wait_isr(cluster, zk, topic, 0, [first.broker_id, second.broker_id])
        batches = await wait_converged([first, second], topic, 0, 3)
    assert [bid.leader_epoch for bid in batches][-1] == led.leader_epoch
    assert_epochs_increase(batches)
    assert 2 in truncations_logged(other, topic, 0), "the orphan m2 was truncated"
    assert await read_committed(cluster, topic, 0) == [b"m0", b"m1", b"m3"]


@pytest.mark.timeout(120)
async def test_returning_leader_after_whole_cluster_crash(cluster: Cluster) -> None:
    """Every broker crashes at once, so no controller is left to act and the state znode
    still names the old leader. The leader comes back first, with a torn tail. It restarted
    since the state was written, so the new controller takes its leadership away and keeps
    the other ISR member (still down, its log whole) as the one with the data: the partition
    waits for it rather than lose m2. When it returns it leads in a new epoch, the old
    leader truncates its torn tail and follows, and nothing acked is lost."""
    topic = "returning-leader"
    async with zk_view(cluster) as zk:
        leader, follower = await _pair(cluster, zk)
        both = [leader.broker_id, follower.broker_id]
        await create_topic(cluster, topic, [both], {"min.insync.replicas": "1"})
        await wait_isr(cluster, zk, topic, 0, both, leader=leader.broker_id)
        await produce(cluster, topic, 0, [b"m0", b"m1", b"m2"])
        await wait_converged([leader, follower], topic, 0, 3)
        before = await zk.partition_state(topic, 0)
        assert before is not None

        for broker in cluster.brokers.values():
            broker.kill()
        after_crash = await zk.partition_state(topic, 0)
        assert after_crash == before, "nobody was left to change the partition state"
        leader.cut_active_segment(topic, 0, leader.batch_headers(topic, 0)[-1].size // 2)

        leader.start()
        decided = await wait_state(
            zk,
            topic,
            0,
            lambda s: s.partition_epoch > before.partition_epoch,
            30,
            "the new controller's decision",
        )
        assert decided.leader == -1, f"no leader while the data's holder is down: {decided}"
        assert decided.isr == (follower.broker_id,)
        for broker in cluster.brokers.values():
            if not broker.running:
                broker.start()
        await wait_whole(cluster)
        await wait_isr(cluster, zk, topic, 0, both, leader=follower.broker_id)
        led = await zk.partition_state(topic, 0)
        assert led is not None and led.leader_epoch > decided.leader_epoch
        assert await produce(cluster, topic, 0, [b"m3"]) == [3]
        batches = await wait_converged([leader, follower], topic, 0, 4)
    assert_epochs_increase(batches)
    assert await read_committed(cluster, topic, 0) == [b"m0", b"m1", b"m2", b"m3"]
