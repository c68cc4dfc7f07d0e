"""Failover scenarios with RF=3 against real broker processes and a real ZooKeeper.

Scenarios 6 (a follower that stops answering, by SIGSTOP rather than a network cut), 7
(min.insync.replicas), 8 (controller failover), 9 (a broker's ZooKeeper session expires: it
stalls past the session timeout, then resumes) and 10 (controlled shutdown one by one) of
docs/reliability.md, "The scenarios, and where they are tested".

One 3-broker cluster for the module, small timings (OVERRIDES), a topic per test; every test
leaves all brokers running (the autouse fixture restarts any a failed test left down).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import pytest
import trio

from client.cli.zookeeper_server import ZooKeeperServer
from client.network import connect
from protocol.errors import ErrorCode
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState, LeaderAndIsrRequest
from protocol.messages.produce import ProducePartitionData, ProduceRequest, ProduceTopicData
from protocol.messages.update_metadata import UpdateMetadataRequest
from protocol.records import Record, build_batch
from tests.integration.cluster_harness import BrokerProcess, Cluster, eventually, slow_tcp_proxy
from tests.integration.replication_checks import (
    FAST_REPLICATION,
    ZkView,
    assert_agree_below_high_watermark,
    create_topic,
    log_end_offset,
    logged_events,
    produce,
    produce_fails,
    read_committed,
    running_cluster,
    wait_converged,
    wait_isr,
    wait_led,
    wait_state,
    wait_whole,
    whole_cluster_around,
    zk_view,
)

pytestmark = [pytest.mark.integration]

SESSION_TIMEOUT_MS = 6000
LAG_TIME_MAX_MS = 2000
OVERRIDES = {
    **FAST_REPLICATION,
    "zookeeper.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "replica.lag.time.max.ms": str(LAG_TIME_MAX_MS),
}
# ZooKeeper checks sessions once per tick (2 s here): expiry comes up to a tick late.
SESSION_EXPIRY_S = SESSION_TIMEOUT_MS / 1000 + 2


@pytest.fixture(scope="module")
def cluster(
    zookeeper: ZooKeeperServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Cluster]:
    directory = tmp_path_factory.mktemp("failover")
    with running_cluster(zookeeper.port, directory, OVERRIDES) as cluster:
        yield cluster


@pytest.fixture(autouse=True)
def whole_cluster(cluster: Cluster, request: pytest.FixtureRequest) -> Iterator[None]:
    yield from whole_cluster_around(cluster, request)


async def _controller(zk: ZkView) -> tuple[int, int]:
    found = await zk.controller()
    assert found is not None, "a controller is registered"
    return found


async def _others(cluster: Cluster, zk: ZkView) -> tuple[BrokerProcess, list[BrokerProcess]]:
    """(the controller, the other brokers)."""
    controller_id, _ = await _controller(zk)
    others = [b for b in cluster.brokers.values() if b.broker_id != controller_id]
    return cluster.brokers[controller_id], others


@pytest.mark.timeout(120)
async def test_isr_shrinks_and_expands_around_a_stalled_follower(cluster: Cluster) -> None:
    """Scenario 6 without network namespaces: a follower stops answering (SIGSTOP; its
    ZooKeeper session outlives the stall). acks=all keeps working: the leader drops it from
    the ISR within ~1.5x replica.lag.time.max.ms and produce goes on with min.isr=2; after
    SIGCONT it catches up and rejoins; every acked record is consumed."""
    topic = "stalled-follower"
    async with zk_view(cluster) as zk:
        controller, (leader, follower) = await _others(cluster, zk)
        everyone = [leader.broker_id, follower.broker_id, controller.broker_id]
        await create_topic(cluster, topic, [everyone], {"min.insync.replicas": "2"})
        await wait_isr(cluster, zk, topic, 0, everyone, leader=leader.broker_id)
        acked: list[tuple[float, bytes]] = []
        stop = trio.Event()

        async def keep_producing() -> None:
            for i in range(2000):  # bounded: the test ends it long before
                if stop.is_set():
                    return
                value = b"v%d" % i
                await produce(cluster, topic, 0, [value])
                acked.append((time.monotonic(), value))

        async def acked_at_least(count: int) -> bool:
            return len(acked) >= count

        async with trio.open_nursery() as nursery:
            nursery.start_soon(keep_producing)
            await eventually(lambda: acked_at_least(5), 30, "acks before the stall")
            paused_at = time.monotonic()
            follower.pause()
            survivors = [leader.broker_id, controller.broker_id]
            await wait_state(
                zk, topic, 0, lambda s: sorted(s.isr) == sorted(survivors), 10, "ISR shrink"
            )
            shrink_s = time.monotonic() - paused_at
            shrunk_at = time.monotonic()
            await eventually(
                lambda: acked_at_least(len([a for a in acked if a[0] <= shrunk_at]) + 5),
                10,
                "acks=all to go on without the stalled follower",
            )
            acked_while_stalled = len([a for a in acked if a[0] > shrunk_at])
            await assert_agree_below_high_watermark(cluster, zk, topic, 0)
            follower.resume()
            await wait_isr(cluster, zk, topic, 0, everyone, timeout_s=30)
            stop.set()
        log_end = await log_end_offset(leader, topic, 0)
        assert log_end is not None and log_end >= len(acked)
        await wait_converged([leader, follower, controller], topic, 0, log_end)
    print(f"ISR shrank {shrink_s:.2f}s after the stall; {acked_while_stalled} acks meanwhile")
    limit_s = 1.5 * LAG_TIME_MAX_MS / 1000 + 1.0  # + the ZooKeeper write and scheduling
    assert shrink_s <= limit_s, f"ISR shrank {shrink_s:.2f}s after the stall (> {limit_s}s)"
    assert acked_while_stalled >= 5
    consumed = await read_committed(cluster, topic, 0)
    # Without idempotence a retried send may land twice; an acked one is never missing.
    assert set(consumed) >= {value for _, value in acked}


@pytest.mark.timeout(120)
async def test_min_insync_replicas_rejects_acks_all(cluster: Cluster) -> None:
    """Scenario 7: min.insync.replicas = every broker; with one broker stopped acks=all
    fails with NOT_ENOUGH_REPLICAS and is never reported acked; with it back, produce works
    and consumers read exactly the acked records."""
    topic = "min-isr-all"
    async with zk_view(cluster) as zk:
        controller, (leader, follower) = await _others(cluster, zk)
        everyone = [leader.broker_id, follower.broker_id, controller.broker_id]
        await create_topic(cluster, topic, [everyone], {"min.insync.replicas": "3"})
        await wait_isr(cluster, zk, topic, 0, everyone, leader=leader.broker_id)
        assert await produce(cluster, topic, 0, [b"before"]) == [0]
        assert follower.stop() == 0
        await wait_isr(cluster, zk, topic, 0, [leader.broker_id, controller.broker_id])

        # The broker's answer, seen directly: checked before the append, so nothing is added.
        batch = build_batch([Record(b"rejected")])
        request = ProduceRequest(
            -1, 5000, (ProduceTopicData(topic, (ProducePartitionData(0, batch),)),)
        )
        conn = await connect("127.0.0.1", leader.port)
        try:
            response = await conn.request(request, timeout_ms=10_000)
        finally:
            await conn.aclose()
        (answer,) = response.responses[0].partition_responses
        assert answer.error_code == ErrorCode.NOT_ENOUGH_REPLICAS
        # The client retries that until its delivery timeout, then fails the record.
        error = await produce_fails(cluster, topic, 0, b"rejected too", delivery_timeout_ms=2000)
        assert error.code in (ErrorCode.NOT_ENOUGH_REPLICAS, ErrorCode.REQUEST_TIMED_OUT), error

        follower.start()
        await wait_isr(cluster, zk, topic, 0, everyone, timeout_s=30)
        assert await produce(cluster, topic, 0, [b"after"]) == [1]
        await wait_converged([leader, follower, controller], topic, 0, 2)
    assert await read_committed(cluster, topic, 0) == [b"before", b"after"]


@pytest.mark.timeout(120)
async def test_controller_failover(cluster: Cluster) -> None:
    """Scenario 8: kill the controller; a new one with a higher controller epoch is
    elected within a few seconds of the session expiring; the partition the old one led gets
    a new leader; requests stamped with the old controller epoch are rejected."""
    topic = "controller-failover"
    async with zk_view(cluster) as zk:
        old, (x, y) = await _others(cluster, zk)
        _, old_epoch = await _controller(zk)
        everyone = [old.broker_id, x.broker_id, y.broker_id]
        await create_topic(cluster, topic, [everyone], {"min.insync.replicas": "2"})
        before = await wait_isr(cluster, zk, topic, 0, everyone, leader=old.broker_id)
        await produce(cluster, topic, 0, [b"a", b"b"])

        killed_at = time.monotonic()
        old.kill()

        async def new_controller() -> tuple[int, int] | None:
            found = await zk.controller()
            return found if found is not None and found[1] > old_epoch else None

        new_id, new_epoch = await eventually(new_controller, 30, "a new controller")
        failover_s = time.monotonic() - killed_at
        assert new_id in (x.broker_id, y.broker_id)
        assert failover_s <= SESSION_EXPIRY_S + 3, f"new controller after {failover_s:.1f}s"
        after = await wait_isr(cluster, zk, topic, 0, [x.broker_id, y.broker_id])
        assert after.leader in (x.broker_id, y.broker_id)
        assert after.leader_epoch > before.leader_epoch
        assert after.controller_epoch == new_epoch

        survivor = cluster.brokers[after.leader]
        conn = await connect("127.0.0.1", survivor.port)
        try:
            stale = await conn.request(UpdateMetadataRequest(old.broker_id, old_epoch, -1, (), ()))
            assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
            # A stale LeaderAndIsr trying to hand the partition back must not be applied.
            grab = LeaderAndIsrPartitionState(
                topic_name=topic,
                partition_index=0,
                controller_epoch=old_epoch,
                leader=old.broker_id,
                leader_epoch=after.leader_epoch + 10,
                isr=tuple(everyone),
                partition_epoch=after.partition_epoch + 10,
                replicas=tuple(everyone),
            )
            stale = await conn.request(
                LeaderAndIsrRequest(old.broker_id, old_epoch, -1, (grab,), ())
            )
            assert stale.error_code == ErrorCode.STALE_CONTROLLER_EPOCH
        finally:
            await conn.aclose()
        await wait_led(cluster, zk, topic, 0, after.leader)
        await produce(cluster, topic, 0, [b"c"])
        assert await assert_agree_below_high_watermark(cluster, zk, topic, 0) == 3

        old.start()
        await wait_isr(cluster, zk, topic, 0, everyone, timeout_s=30)
        await wait_converged([old, x, y], topic, 0, 3)
    assert await read_committed(cluster, topic, 0) == [b"a", b"b", b"c"]


@pytest.mark.timeout(120)
@pytest.mark.parametrize("role", ["controller", "broker"])
async def test_broker_session_expiry(cluster: Cluster, role: str) -> None:
    """Scenario 9: a broker (the controller, or not) stalls (SIGSTOP) longer than its
    ZooKeeper session timeout, so its session expires while the process lives on; its
    partitions fail over (and, if it was the controller, a new controller with a higher
    epoch takes over). After SIGCONT it re-registers with a new ephemeral node (new broker
    epoch, new session), leads its RF=1 partition again and rejoins the ISR of its RF=3
    partition; no acked record is lost."""
    lone, shared = f"expiry-{role}-rf1", f"expiry-{role}-rf3"
    async with zk_view(cluster) as zk:
        controller, others = await _others(cluster, zk)
        _, old_epoch = await _controller(zk)
        victim = controller if role == "controller" else others[0]
        x, y = (b for b in cluster.brokers.values() if b is not victim)
        everyone = [victim.broker_id, x.broker_id, y.broker_id]
        await create_topic(cluster, lone, [[victim.broker_id]])
        await create_topic(cluster, shared, [everyone], {"min.insync.replicas": "2"})
        await wait_isr(cluster, zk, shared, 0, everyone, leader=victim.broker_id)
        await produce(cluster, lone, 0, [b"l0"])
        await produce(cluster, shared, 0, [b"s0"])
        registration = await zk.broker_registration(victim.broker_id)
        assert registration is not None

        victim.pause()

        async def expired() -> bool:
            return await zk.broker_registration(victim.broker_id) is None

        await eventually(expired, SESSION_EXPIRY_S + 5, "the stalled broker's session to expire")
        if role == "controller":

            async def new_controller() -> tuple[int, int] | None:
                found = await zk.controller()
                return found if found is not None and found[1] > old_epoch else None

            new_id, _ = await eventually(new_controller, 30, "a new controller")
            assert new_id != victim.broker_id
        await wait_isr(cluster, zk, shared, 0, [x.broker_id, y.broker_id])
        await wait_state(zk, lone, 0, lambda s: s.leader == -1, 30, "offline without its broker")
        await produce(cluster, shared, 0, [b"s1"])
        assert await assert_agree_below_high_watermark(cluster, zk, shared, 0) == 2
        controller_meanwhile = await _controller(zk)

        victim.resume()

        async def registered_again() -> tuple[int, int] | None:
            found = await zk.broker_registration(victim.broker_id)
            return found if found is not None and found[0] > registration[0] else None

        epoch_after, owner_after = await eventually(registered_again, 30, "re-registration")
        assert owner_after != registration[1], "a new session owns the new ephemeral node"
        await wait_whole(cluster)
        await wait_led(cluster, zk, lone, 0, victim.broker_id)
        await wait_isr(cluster, zk, shared, 0, everyone, timeout_s=30)
        assert logged_events(victim, "broker re-registered", broker_epoch=epoch_after)
        # The controller of the stall stays: the returning broker does not take over.
        assert await _controller(zk) == controller_meanwhile
        if role == "controller":
            assert controller_meanwhile[1] > old_epoch
        else:
            assert controller_meanwhile == (controller.broker_id, old_epoch)
        await produce(cluster, lone, 0, [b"l1"])
        await produce(cluster, shared, 0, [b"s2"])
        await wait_converged([victim, x, y], shared, 0, 3)
    assert await read_committed(cluster, lone, 0) == [b"l0", b"l1"]
    assert await read_committed(cluster, shared, 0) == [b"s0", b"s1", b"s2"]


@pytest.mark.timeout(120)
async def test_controlled_shutdown_one_by_one(cluster: Cluster) -> None:
    """Scenario 10: SIGTERM the brokers one at a time; each moves its leaderships away
    before it stops (the controller answers with nothing left for it to lead, and the
    partitions have other leaders the moment it is gone), the last keeps leading what it
    cannot hand over; after a restart no acked record is lost."""
    topic = "controlled-shutdown"
    brokers = sorted(cluster.brokers)
    assignment = [brokers[i:] + brokers[:i] for i in range(len(brokers))]  # each leads one
    async with zk_view(cluster) as zk:
        await create_topic(cluster, topic, assignment, {"min.insync.replicas": "1"})
        for p, replicas in enumerate(assignment):
            await wait_isr(cluster, zk, topic, p, replicas, leader=replicas[0])
        acked: dict[int, list[bytes]] = {p: [] for p in range(len(assignment))}

        async def produce_everywhere(tag: str) -> None:
            for p in acked:
                value = f"{tag}-p{p}".encode()
                await produce(cluster, topic, p, [value])
                acked[p].append(value)

        def _ours(still_leading: list[str]) -> list[str]:
            # Earlier tests' topics live on the same brokers; RF=1 ones can never move.
            return sorted(tp for tp in still_leading if tp.rpartition("-")[0] == topic)

        await produce_everywhere("start")
        *first, last = [cluster.brokers[b] for b in brokers]
        for broker in first:
            mark = len(broker.log_text())
            assert broker.stop() == 0
            (answer,) = logged_events(broker, "controlled shutdown accepted", since=mark)
            assert _ours(answer["still_leading"]) == [], f"{broker.broker_id} kept leading"
            for p in acked:
                state = await zk.partition_state(topic, p)
                assert state is not None and state.leader != broker.broker_id
                assert state.leader != -1 and broker.broker_id not in state.isr
            await wait_whole(cluster)
            for p in acked:
                state = await zk.partition_state(topic, p)
                assert state is not None
                await wait_led(cluster, zk, topic, p, state.leader)
            await produce_everywhere(f"without-{broker.broker_id}")

        mark = len(last.log_text())
        assert last.stop() == 0
        (answer,) = logged_events(last, "controlled shutdown accepted", since=mark)
        assert _ours(answer["still_leading"]) == [f"{topic}-{p}" for p in acked]

        last.start()  # the last ISR member of everything comes back first
        for p in acked:
            await wait_led(cluster, zk, topic, p, last.broker_id)
        for broker in first:
            broker.start()
        await wait_whole(cluster)
        for p, replicas in enumerate(assignment):
            await wait_isr(cluster, zk, topic, p, replicas, timeout_s=30)
            await wait_converged([cluster.brokers[b] for b in replicas], topic, p, len(acked[p]))
    for p, values in acked.items():
        assert await read_committed(cluster, topic, p) == values


@pytest.mark.timeout(120)
async def test_restart_behind_a_slow_zookeeper_link(cluster: Cluster) -> None:
    """A broker restarts with a slow link to ZooKeeper (its answers 0.5 s late), so the
    controller learns of the new registration well before the broker does. The broker must
    still get its partitions back: rejoin the ISR and replicate. (Without the delay the same
    race decides at random whether a bounced broker ever follows again.)"""
    topic = "slow-zookeeper-link"
    async with zk_view(cluster) as zk, trio.open_nursery() as nursery:
        controller, (leader, slow) = await _others(cluster, zk)
        everyone = [leader.broker_id, slow.broker_id, controller.broker_id]
        await create_topic(cluster, topic, [everyone], {"min.insync.replicas": "1"})
        await wait_isr(cluster, zk, topic, 0, everyone, leader=leader.broker_id)
        await produce(cluster, topic, 0, [b"a"])
        hosts, _, chroot = cluster.zookeeper_connect.partition("/")
        proxy_port = await nursery.start(slow_tcp_proxy, int(hosts.rsplit(":", 1)[1]), 0.5)
        slow.overrides["zookeeper.connect"] = f"127.0.0.1:{proxy_port}/{chroot}"
        try:
            slow.restart()
            await produce(cluster, topic, 0, [b"b"])
            await wait_isr(cluster, zk, topic, 0, everyone, timeout_s=20)
            await wait_whole(cluster, timeout_s=10)
            await wait_converged([leader, slow, controller], topic, 0, 2)
        finally:
            del slow.overrides["zookeeper.connect"]
            slow.restart()  # on a direct link again, before the proxy goes away
            nursery.cancel_scope.cancel()
