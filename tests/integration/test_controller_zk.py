"""The controller package against a real ZooKeeper (each test under its own chroot)."""

from __future__ import annotations

import functools
import json
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager

import pytest
import trio

from broker.registration import BrokerIdInUseError, maintain_registration, register_broker
from client.cli.zookeeper_server import ZooKeeperServer
from controller import zk_data, zk_load
from controller.controller import Controller, ControllerMovedError, run_controller
from controller.core import ControllerContext
from controller.zk_brokers import live_brokers
from controller.zk_client import (
    BadVersionError,
    CheckOp,
    CreateOp,
    NodeExistsError,
    NoNodeError,
    SessionEvent,
    SessionState,
    SetOp,
    WatchEvent,
    WatchKind,
    ZkClient,
    ZnodeStat,
)
from controller.zk_isr import write_isr
from controller.zk_topics import (
    TopicExistsError,
    UnknownTopicError,
    create_topic,
    get_assignments,
    get_or_create_cluster_id,
    list_topics,
    mark_topic_for_deletion,
)
from controller.zk_writes import guarded
from protocol.topic_partition import TopicPartition
from tests.integration.fake_broker import FakeBroker

pytestmark = pytest.mark.integration

SESSION_TIMEOUT_MS = 4000  # the test server allows >= 1000 ms (minSessionTimeout)
WAIT_S = 15.0
POLL_S = 0.02


@pytest.fixture
def zk_hosts(zookeeper: ZooKeeperServer) -> str:
    """A connect string with a fresh chroot, so tests never see each other's znodes."""
    return f"{zookeeper.connect_string}/controller-test-{uuid.uuid4().hex[:12]}"


@asynccontextmanager
async def zk_session(hosts: str) -> AsyncIterator[ZkClient]:
    zk = await ZkClient.connect(hosts, SESSION_TIMEOUT_MS)
    try:
        yield zk
    finally:
        await close_shielded(zk)


async def close_shielded(zk: ZkClient) -> None:
    """Close even when the test's nursery is being cancelled (as the broker's shutdown does):
    a close cancelled before it starts leaves kazoo retrying against a stopped ZooKeeper at
    the end of the session. ZkClient.close bounds itself by the request timeout."""
    with trio.CancelScope(shield=True):
        await zk.close()


async def wait_until(
    condition: Callable[[], bool | Awaitable[bool]], what: str, timeout_s: float = WAIT_S
) -> None:
    """Poll `condition` until true; fail the test with `what` after `timeout_s`."""
    try:
        with trio.fail_after(timeout_s):
            while True:
                result = condition()
                if not isinstance(result, bool):
                    result = await result
                if result:
                    return
                await trio.sleep(POLL_S)
    except trio.TooSlowError:
        pytest.fail(f"timed out after {timeout_s}s waiting for {what}")


async def read_state(zk: ZkClient, topic: str, partition: int) -> zk_data.PartitionStateZnode:
    found = await zk.get(zk_data.partition_state_path(topic, partition))
    assert found is not None
    return zk_data.PartitionStateZnode.decode(found[0])


# --- the ZkClient facade ----------------------------------------------------------------------


async def test_zk_client_reads_writes_and_typed_errors(zk_hosts: str) -> None:
    async with zk_session(zk_hosts) as zk:
        assert zk.session_id is not None
        assert await zk.get("/a") is None
        assert await zk.exists("/a") is None
        with pytest.raises(NoNodeError):
            await zk.get_children("/a")
        assert await zk.create("/a/b", b"one", makepath=True) == "/a/b"
        with pytest.raises(NodeExistsError):
            await zk.create("/a/b", b"again")
        found = await zk.get("/a/b")
        assert found is not None and found[0] == b"one" and found[1].version == 0
        stat = await zk.set("/a/b", b"two", version=0)
        assert stat.version == 1
        with pytest.raises(BadVersionError):
            await zk.set("/a/b", b"three", version=0)
        assert await zk.get_children("/a") == ["b"]
        await zk.delete("/a", recursive=True)
        assert await zk.exists("/a") is None


async def test_partition_states_read_pipelined_in_order_across_batches(zk_hosts: str) -> None:
    """More partitions than one pipelined batch, one without a state znode: every other
    state comes back, each with its own leader and its znode's version as partition epoch."""
    count = zk_load.STATE_READ_BATCH + 3
    missing = zk_load.STATE_READ_BATCH - 1  # the last of the first batch
    async with zk_session(zk_hosts) as zk:
        ops = [
            CreateOp(
                zk_data.partition_state_path("t", p),
                zk_data.PartitionStateZnode(p % 3 + 1, p, (1, 2, 3), 1).encode(),
            )
            for p in range(count)
            if p != missing
        ]
        await zk.create(zk_data.partitions_path("t"), b"", makepath=True)
        await zk.transaction([CreateOp(zk_data.partition_path("t", p), b"") for p in range(count)])
        await zk.transaction(ops)
        await zk.set(zk_data.partition_state_path("t", 7), ops[7].data)
        wanted = [TopicPartition("t", p) for p in reversed(range(count))]
        states = await zk.run(zk_load.read_partition_states(wanted))
        assert sorted(states) == [TopicPartition("t", p) for p in range(count) if p != missing]
        assert all(states[tp].leader == tp.partition % 3 + 1 for tp in states)
        assert all(states[tp].leader_epoch == tp.partition for tp in states)
        assert states[TopicPartition("t", 7)].partition_epoch == 1
        assert states[TopicPartition("t", 8)].partition_epoch == 0
        assert await zk.get_many([]) == []


async def test_isr_write_whose_answer_was_lost_is_adopted_on_retry(zk_hosts: str) -> None:
    """A leader's ISR CAS that succeeded but timed out: the retry with the same expected
    version finds its own state there and takes that version (else: lost a race forever)."""
    path = zk_data.partition_state_path("t", 0)
    before = zk_data.PartitionStateZnode(1, 3, (1, 2), 1)
    expanded = zk_data.PartitionStateZnode(1, 3, (1, 2, 3), 1)
    async with zk_session(zk_hosts) as zk:
        await zk.create(path, before.encode(), makepath=True)
        assert await zk.run(write_isr(("t", 0), expanded, 0)) == 1  # its answer "lost"
        assert await zk.run(write_isr(("t", 0), expanded, 0)) == 1
        # Someone else's state (another ISR, a newer leader epoch): still a lost race.
        assert await zk.run(write_isr(("t", 0), before, 0)) is None
        newer = zk_data.PartitionStateZnode(2, 4, (2, 3), 2)
        await zk.set(path, newer.encode(), version=1)
        assert await zk.run(write_isr(("t", 0), expanded, 1)) is None
        assert await zk.run(write_isr(("t", 1), expanded, 0)) is None  # no znode


async def test_transaction_is_atomic_and_reports_the_failing_op(zk_hosts: str) -> None:
    async with zk_session(zk_hosts) as zk:
        await zk.create("/guard", b"0")
        results = await zk.transaction(
            [CheckOp("/guard", 0), CreateOp("/x", b"x"), SetOp("/guard", b"1", version=0)]
        )
        assert results[0] is None and results[1] == "/x"
        assert isinstance(results[2], ZnodeStat) and results[2].version == 1
        with pytest.raises(BadVersionError) as caught:
            await zk.transaction([CheckOp("/guard", 0), CreateOp("/y", b"y")])
        assert caught.value.op_index == 0
        assert await zk.exists("/y") is None  # nothing applied


async def test_watches_arrive_in_trio_with_chroot_stripped(zk_hosts: str) -> None:
    async with zk_session(zk_hosts) as zk, zk_session(zk_hosts) as other:
        await zk.create("/parent", makepath=True)
        events = zk.subscribe()
        assert await zk.get_children("/parent", watch=True) == []
        assert await zk.get("/data", watch=True) is None  # watches for creation
        await other.create("/parent/child")
        await other.create("/data", b"d")
        seen: set[tuple[WatchKind, str | None]] = set()
        with trio.fail_after(WAIT_S):
            while len(seen) < 2:
                event = await events.receive()
                if isinstance(event, WatchEvent):
                    seen.add((event.kind, event.path))
        assert seen == {(WatchKind.CHILDREN, "/parent"), (WatchKind.CREATED, "/data")}


# --- controller election ----------------------------------------------------------------------


async def test_election_one_winner_then_takeover_with_higher_epoch(zk_hosts: str) -> None:
    zk_a = await ZkClient.connect(zk_hosts, SESSION_TIMEOUT_MS)
    zk_b = await ZkClient.connect(zk_hosts, SESSION_TIMEOUT_MS)
    try:
        async with trio.open_nursery() as nursery:
            a: Controller = await nursery.start(run_controller, zk_a, 1)
            b: Controller = await nursery.start(run_controller, zk_b, 2)
            await wait_until(
                lambda: (a.is_active or b.is_active) and a.controller_id == b.controller_id,
                "a controller that both candidates see",
            )
            assert a.is_active != b.is_active  # exactly one winner
            winner, loser = (a, b) if a.is_active else (b, a)
            first_epoch = winner.controller_epoch
            assert first_epoch == 1  # a fresh cluster starts at 0; the first winner bumps it
            assert loser.controller_epoch == first_epoch
            found = await loser.zk.get(zk_data.CONTROLLER_EPOCH_PATH)
            assert found is not None and zk_data.decode_controller_epoch(found[0]) == first_epoch

            await winner.zk.close()  # the winner's session ends: /controller goes with it
            await wait_until(lambda: loser.is_active, "the loser to take over")
            assert loser.controller_epoch == first_epoch + 1
            assert loser.controller_id == loser.broker_id
            assert not winner.is_active
            nursery.cancel_scope.cancel()
    finally:
        await zk_a.close()
        await zk_b.close()


async def test_stale_controller_epoch_write_is_rejected(zk_hosts: str) -> None:
    zk_a = await ZkClient.connect(zk_hosts, SESSION_TIMEOUT_MS)
    async with zk_session(zk_hosts) as zk_b, trio.open_nursery() as nursery:
        a: Controller = await nursery.start(run_controller, zk_a, 1)
        await wait_until(lambda: a.is_active, "broker 1 to become controller")
        stale = a.context
        b: Controller = await nursery.start(run_controller, zk_b, 2)
        await zk_a.close()  # broker 1's session ends; broker 2 wins a newer epoch
        await wait_until(lambda: b.is_active, "broker 2 to take over")
        assert b.controller_epoch == stale.controller_epoch + 1

        # A write guarded by the old epoch's zkVersion fails at the check and changes nothing.
        with pytest.raises(BadVersionError) as caught:
            await zk_b.transaction(
                [
                    CheckOp(zk_data.CONTROLLER_EPOCH_PATH, stale.epoch_zk_version),
                    CreateOp("/zombie-write", b""),
                ]
            )
        assert caught.value.op_index == 0
        assert await zk_b.exists("/zombie-write") is None

        # The shell turns that into ControllerMovedError (so a zombie controller resigns).
        async with zk_session(zk_hosts) as zk_c:
            with pytest.raises(ControllerMovedError):
                await zk_c.run(guarded([CreateOp("/zombie-write", b"")], stale.epoch_zk_version))
        assert await zk_b.exists("/zombie-write") is None
        assert ControllerContext(1).active is False
        nursery.cancel_scope.cancel()


# --- broker registration ----------------------------------------------------------------------


async def test_register_broker_ephemeral_node_and_id_in_use(zk_hosts: str) -> None:
    async with zk_session(zk_hosts) as observer:
        owner = await ZkClient.connect(zk_hosts, SESSION_TIMEOUT_MS)
        epoch = await register_broker(owner, 7, "127.0.0.1", 9092)
        found = await observer.get(zk_data.broker_path(7))
        assert found is not None
        data, stat = found
        assert stat.czxid == epoch and stat.ephemeral_owner == owner.session_id
        registration = zk_data.BrokerRegistration.decode(data)
        assert (registration.host, registration.port, registration.rack) == (
            "127.0.0.1",
            9092,
            None,
        )
        assert await register_broker(owner, 7, "127.0.0.1", 9092) == epoch  # ours: idempotent

        async with zk_session(zk_hosts) as intruder:
            with pytest.raises(BrokerIdInUseError):
                await register_broker(intruder, 7, "127.0.0.1", 9093, wait_ms=300)

        await owner.close()
        assert await observer.exists(zk_data.broker_path(7)) is None  # gone with the session


async def test_registration_returns_after_forced_session_expiry(zk_hosts: str) -> None:
    async with (
        zk_session(zk_hosts) as zk,
        zk_session(zk_hosts) as observer,
        trio.open_nursery() as nursery,
    ):
        events = zk.subscribe()
        registered: list[int] = []  # what the broker would take as its broker epoch
        first_epoch: int = await nursery.start(
            functools.partial(
                maintain_registration, zk, 3, "127.0.0.1", 9999, on_registered=registered.append
            )
        )
        assert registered == [first_epoch]
        old_session = zk.session_id
        await zk.force_session_expiry()
        states: list[SessionState] = []
        with trio.fail_after(WAIT_S):
            while SessionState.LOST not in states:
                event = await events.receive()
                if isinstance(event, SessionEvent):
                    states.append(event.state)

        async def re_registered() -> bool:
            found = await observer.get(zk_data.broker_path(3))
            return found is not None and found[1].czxid > first_epoch

        await wait_until(re_registered, "broker 3 to register again in its new session")
        await wait_until(lambda: len(registered) == 2, "on_registered with the new epoch")
        found = await observer.get(zk_data.broker_path(3))
        assert found is not None and registered == [first_epoch, found[1].czxid]
        assert zk.session_id != old_session
        nursery.cancel_scope.cancel()


async def test_re_registration_keeps_the_incarnation_of_the_first(zk_hosts: str) -> None:
    """The first registration has Kafka's JSON only (its incarnation is its own czxid);
    after each forced session expiry the same process re-registers with a new broker epoch,
    delivered to on_registered, and the first registration's czxid as its incarnation."""
    async with (
        zk_session(zk_hosts) as zk,
        zk_session(zk_hosts) as observer,
        trio.open_nursery() as nursery,
    ):
        registered: list[int] = []
        first_epoch: int = await nursery.start(
            functools.partial(
                maintain_registration, zk, 3, "127.0.0.1", 9999, on_registered=registered.append
            )
        )
        found = await observer.get(zk_data.broker_path(3))
        assert found is not None
        assert "incarnation" not in json.loads(found[0])
        assert zk_data.BrokerRegistration.decode(found[0]).incarnation is None
        live = await observer.run(live_brokers())
        assert (live[3].broker_epoch, live[3].incarnation) == (first_epoch, first_epoch)

        for expiry in (1, 2):
            await zk.force_session_expiry()
            await wait_until(lambda n=expiry: len(registered) == n + 1, f"re-registration {expiry}")
            found = await observer.get(zk_data.broker_path(3))
            assert found is not None
            data, stat = found
            assert stat.czxid == registered[-1] > registered[-2]
            registration = zk_data.BrokerRegistration.decode(data)
            assert (registration.host, registration.port) == ("127.0.0.1", 9999)
            assert registration.incarnation == first_epoch
            live = await observer.run(live_brokers())
            assert (live[3].broker_epoch, live[3].incarnation) == (stat.czxid, first_epoch)
        nursery.cancel_scope.cancel()

    # A new process (a new maintain_registration) is a new incarnation.
    async with zk_session(zk_hosts) as zk, trio.open_nursery() as nursery:
        epoch: int = await nursery.start(
            functools.partial(maintain_registration, zk, 3, "127.0.0.1", 9999)
        )
        live = await zk.run(live_brokers())
        assert epoch > registered[-1]
        assert (live[3].broker_epoch, live[3].incarnation) == (epoch, epoch)
        nursery.cancel_scope.cancel()


# --- topics -----------------------------------------------------------------------------------


async def test_create_topic_exists_and_mark_for_deletion(zk_hosts: str) -> None:
    async with zk_session(zk_hosts) as zk:
        await zk.run(create_topic("orders", {0: (1, 2), 1: (2, 1)}, {"retention.ms": "1000"}))
        assert await zk.run(list_topics()) == ["orders"]
        assert await zk.run(get_assignments(["orders"])) == {"orders": {0: (1, 2), 1: (2, 1)}}
        config = await zk.get(zk_data.topic_config_path("orders"))
        assert config is not None
        assert zk_data.TopicConfigZnode.decode(config[0]).config == {"retention.ms": "1000"}
        with pytest.raises(TopicExistsError):
            await zk.run(create_topic("orders", {0: (1,)}, {}))
        with pytest.raises(UnknownTopicError):
            await zk.run(mark_topic_for_deletion("nope"))
        await zk.run(mark_topic_for_deletion("orders"))
        await zk.run(mark_topic_for_deletion("orders"))  # idempotent
        assert await zk.exists(zk_data.delete_topic_path("orders")) is not None
        cluster_id = await zk.run(get_or_create_cluster_id())
        assert cluster_id and await zk.run(get_or_create_cluster_id()) == cluster_id


# --- the controller shell with fake brokers ---------------------------------------------------


async def test_controller_drives_fake_brokers(zk_hosts: str) -> None:
    """Topic creation, broker loss (RF=1 partitions go offline), return, and deletion."""
    broker1, broker2 = FakeBroker(1), FakeBroker(2)
    async with (
        zk_session(zk_hosts) as zk1,
        zk_session(zk_hosts) as admin,
        trio.open_nursery() as nursery,
    ):
        await nursery.start(broker1.serve)
        await nursery.start(broker2.serve)
        zk2 = await ZkClient.connect(zk_hosts, SESSION_TIMEOUT_MS)
        await register_broker(zk1, 1, broker1.host, broker1.port)
        await register_broker(zk2, 2, broker2.host, broker2.port)
        controller: Controller = await nursery.start(run_controller, zk1, 1)
        await wait_until(lambda: controller.is_active, "broker 1 to be controller")
        await wait_until(
            lambda: len(controller.context.live_brokers) == 2, "the controller to see 2 brokers"
        )

        # A new topic: state znodes, LeaderAndIsr to the replicas, UpdateMetadata to all.
        assignment = {0: (1,), 1: (2,), 2: (1,), 3: (2,)}
        await admin.run(create_topic("t", assignment, {}))

        def all_led(broker: FakeBroker, leaders: dict[int, int]) -> bool:
            metadata = broker.latest_metadata()
            return all(
                ("t", p) in metadata and metadata[("t", p)].leader == leader
                for p, leader in leaders.items()
            )

        expected = {0: 1, 1: 2, 2: 1, 3: 2}
        await wait_until(lambda: all_led(broker1, expected), "broker 1 metadata for t")
        await wait_until(lambda: all_led(broker2, expected), "broker 2 metadata for t")
        assert broker1.latest_leader_and_isr() == {("t", 0): (1, 0), ("t", 2): (1, 0)}
        assert broker2.latest_leader_and_isr() == {("t", 1): (2, 0), ("t", 3): (2, 0)}
        first_lai = broker1.leader_and_isr()[0]
        assert all(s.is_new for s in first_lai.partition_states)
        assert first_lai.controller_id == 1 and first_lai.controller_epoch == 1
        update = broker2.update_metadata()[-1]
        assert update.controller_id == 1 and update.controller_epoch == controller.controller_epoch
        assert {(b.node_id, b.port) for b in update.live_brokers} == {
            (1, broker1.port),
            (2, broker2.port),
        }
        assert (await read_state(admin, "t", 1)) == zk_data.PartitionStateZnode(2, 0, (2,), 1)

        # Broker 2's session ends: its RF=1 partitions go offline (leader -1, epoch + 1).
        await zk2.close()
        offline = {0: 1, 1: -1, 2: 1, 3: -1}
        await wait_until(lambda: all_led(broker1, offline), "partitions 1 and 3 offline")
        for p in (1, 3):
            assert (await read_state(admin, "t", p)) == zk_data.PartitionStateZnode(-1, 1, (2,), 1)
        last = broker1.update_metadata()[-1]
        assert [b.node_id for b in last.live_brokers] == [1]
        assert last.partition_states[1].offline_replicas == (2,)

        # It comes back: it leads its partitions again with a new leader epoch.
        zk2 = await ZkClient.connect(zk_hosts, SESSION_TIMEOUT_MS)
        await register_broker(zk2, 2, broker2.host, broker2.port)
        await wait_until(lambda: all_led(broker1, expected), "partitions 1 and 3 back on broker 2")
        await wait_until(
            lambda: broker2.latest_leader_and_isr() == {("t", 1): (2, 2), ("t", 3): (2, 2)},
            "broker 2 told to lead again at leader epoch 2",
        )
        assert (await read_state(admin, "t", 3)) == zk_data.PartitionStateZnode(2, 2, (2,), 1)

        # Deletion: StopReplica(delete) to the replicas, znodes gone, metadata says deleted.
        await admin.run(mark_topic_for_deletion("t"))

        def stopped(broker: FakeBroker, partitions: set[int]) -> bool:
            got = {
                (ts.topic_name, ps.partition_index, ps.delete_partition, ps.leader_epoch)
                for req in broker.stop_replica()
                for ts in req.topic_states
                for ps in ts.partition_states
            }
            return got == {("t", p, True, -2) for p in partitions}

        await wait_until(lambda: stopped(broker1, {0, 2}), "StopReplica to broker 1")
        await wait_until(lambda: stopped(broker2, {1, 3}), "StopReplica to broker 2")
        await wait_until(
            lambda: "t" in broker1.update_metadata()[-1].deleted_topics, "deleted_topics"
        )
        assert broker1.latest_metadata() == {}
        for path in (
            zk_data.topic_path("t"),
            zk_data.topic_config_path("t"),
            zk_data.delete_topic_path("t"),
        ):
            assert await admin.exists(path) is None, path
        await zk2.close()
        nursery.cancel_scope.cancel()


async def test_controller_resigns_on_session_loss_and_is_re_elected(zk_hosts: str) -> None:
    broker1 = FakeBroker(1)
    async with zk_session(zk_hosts) as zk, trio.open_nursery() as nursery:
        await nursery.start(broker1.serve)
        await nursery.start(maintain_registration, zk, 1, broker1.host, broker1.port)
        controller: Controller = await nursery.start(run_controller, zk, 1)
        await wait_until(lambda: controller.controller_epoch == 1, "the first election")
        await wait_until(lambda: bool(broker1.update_metadata()), "UpdateMetadata at epoch 1")

        await zk.force_session_expiry()  # /controller and /brokers/ids/1 vanish with it
        await wait_until(
            lambda: controller.is_active and controller.controller_epoch == 2,
            "resignation and re-election in the new session",
        )
        await wait_until(
            lambda: (
                broker1.update_metadata()[-1].controller_epoch == 2
                and [b.node_id for b in broker1.update_metadata()[-1].live_brokers] == [1]
            ),
            "UpdateMetadata from the new epoch listing the re-registered broker",
        )
        nursery.cancel_scope.cancel()
