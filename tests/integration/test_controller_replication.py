"""The controller's replication duties against a real ZooKeeper, with fake brokers on real
sockets: ISR change notifications, unclean leader election, resigning (controlled shutdown:
test_controller_shutdown.py).

The fake brokers only record what the controller sends; where a test needs a partition leader
to act (an ISR change), it does the leader's ZooKeeper writes itself with controller.zk_isr,
exactly as a broker would.
"""

from __future__ import annotations

import uuid

import pytest
import trio
from structlog.testing import capture_logs

from broker.registration import register_broker
from client.cli.zookeeper_server import ZooKeeperServer
from controller import zk_data
from controller.controller import Controller, run_controller
from controller.zk_client import SessionEvent, SessionState, ZkClient
from controller.zk_isr import (
    ISR_CHANGE_NOTIFICATION_PATH,
    ISR_CHANGE_PREFIX,
    publish_isr_changes,
    write_isr,
)
from controller.zk_topics import create_topic
from protocol.errors import ErrorCode
from tests.integration.controller_members import brokers, metadata_isr, start_controller
from tests.integration.test_controller_zk import (
    SESSION_TIMEOUT_MS,
    read_state,
    wait_until,
    zk_session,
)

pytestmark = pytest.mark.integration

UNCLEAN = "unclean.leader.election.enable"


@pytest.fixture
def zk_hosts(zookeeper: ZooKeeperServer) -> str:
    return f"{zookeeper.connect_string}/controller-replication-{uuid.uuid4().hex[:12]}"


async def notifications(zk: ZkClient) -> list[str]:
    return await zk.get_children(ISR_CHANGE_NOTIFICATION_PATH)


# --- ISR change notifications -----------------------------------------------------------------


async def test_isr_change_notification_sends_update_metadata_and_is_deleted(
    zk_hosts: str,
) -> None:
    async with (
        zk_session(zk_hosts) as admin,
        trio.open_nursery() as nursery,
        brokers(nursery, zk_hosts, (1, 2, 3)) as members,
    ):
        controller = await start_controller(nursery, members[1].zk, 1, {1, 2, 3})
        assert await admin.exists(ISR_CHANGE_NOTIFICATION_PATH) is not None
        await admin.run(create_topic("t", {0: (1, 2, 3), 1: (2, 3, 1)}, {}))
        await wait_until(
            lambda: metadata_isr(members[3].fake, ("t", 0)) == (1, 2, 3), "t-0 in metadata"
        )
        given = members[1].fake.latest_leader_and_isr_states()[("t", 0)]
        leader_and_isr_before = len(members[2].fake.leader_and_isr())

        # Leader 1 drops follower 3 from the ISR the way a broker does: CAS on the partition
        # epoch it was given, then a notification. A malformed notification comes first.
        new_epoch = await members[1].zk.run(
            write_isr(
                ("t", 0),
                zk_data.PartitionStateZnode(1, given.leader_epoch, (1, 2), given.controller_epoch),
                given.partition_epoch,
            )
        )
        assert new_epoch == given.partition_epoch + 1
        await admin.create(
            f"{ISR_CHANGE_NOTIFICATION_PATH}/{ISR_CHANGE_PREFIX}", b"{not json", sequence=True
        )
        await members[1].zk.run(publish_isr_changes([("t", 0)]))

        def everyone_knows() -> bool:
            for member in members.values():
                state = member.fake.latest_metadata()[("t", 0)]
                if (tuple(state.isr), state.partition_epoch) != ((1, 2), new_epoch):
                    return False
            return True

        await wait_until(everyone_knows, "UpdateMetadata with the new ISR to every broker")

        async def all_deleted() -> bool:
            return await notifications(admin) == []

        await wait_until(all_deleted, "the handled notifications (malformed too) deleted")
        assert controller.context.partition_states[("t", 0)].isr == (1, 2)
        assert controller.context.partition_states[("t", 0)].partition_epoch == new_epoch
        assert metadata_isr(members[1].fake, ("t", 1)) == (2, 3, 1)  # untouched
        # Nothing to tell replicas: the leader made the change itself.
        assert len(members[2].fake.leader_and_isr()) == leader_and_isr_before

        # The controller keeps working after the malformed node: a second change arrives.
        newer = await members[1].zk.run(
            write_isr(
                ("t", 0),
                zk_data.PartitionStateZnode(
                    1, given.leader_epoch, (1, 2, 3), given.controller_epoch
                ),
                new_epoch,
            )
        )
        await members[1].zk.run(publish_isr_changes([("t", 0)]))
        await wait_until(
            lambda: members[2].fake.latest_metadata()[("t", 0)].partition_epoch == newer,
            "the expanded ISR in metadata",
        )
        assert metadata_isr(members[2].fake, ("t", 0)) == (1, 2, 3)
        await wait_until(all_deleted, "the second notification deleted")
        nursery.cancel_scope.cancel()


async def test_isr_change_published_without_controller_is_handled_at_load(
    zk_hosts: str,
) -> None:
    async with (
        zk_session(zk_hosts) as admin,
        trio.open_nursery() as nursery,
        brokers(nursery, zk_hosts, (1, 2, 3)) as members,
    ):
        first_zk = await ZkClient.connect(zk_hosts, SESSION_TIMEOUT_MS)
        await start_controller(nursery, first_zk, 1, {1, 2, 3})
        await admin.run(create_topic("t", {0: (2, 1, 3)}, {}))
        await wait_until(
            lambda: metadata_isr(members[3].fake, ("t", 0)) == (2, 1, 3), "t-0 in metadata"
        )
        given = members[2].fake.latest_leader_and_isr_states()[("t", 0)]
        await first_zk.close()  # no controller now

        new_epoch = await members[2].zk.run(
            write_isr(
                ("t", 0),
                zk_data.PartitionStateZnode(2, given.leader_epoch, (2, 3), given.controller_epoch),
                given.partition_epoch,
            )
        )
        assert new_epoch is not None
        await members[2].zk.run(publish_isr_changes([("t", 0)]))
        assert len(await notifications(admin)) == 1

        controller = await start_controller(nursery, members[3].zk, 3, {1, 2, 3})
        assert controller.controller_epoch == 2

        async def all_deleted() -> bool:
            return await notifications(admin) == []

        await wait_until(all_deleted, "the notification found at load deleted")
        await wait_until(
            lambda: (
                members[1].fake.update_metadata()[-1].controller_epoch == 2
                and metadata_isr(members[1].fake, ("t", 0)) == (2, 3)
            ),
            "the new controller's UpdateMetadata with the changed ISR",
        )
        nursery.cancel_scope.cancel()


# --- restarts no controller saw ---------------------------------------------------------------


async def test_new_controller_moves_leadership_off_a_leader_registered_after_the_state(
    zk_hosts: str,
) -> None:
    """The leader restarts while there is no controller (it may have lost unflushed data):
    its new registration's czxid is above the state znode's mzxid, so the next controller
    elects another ISR member in a new leader epoch, and the restarted broker follows."""
    async with (
        zk_session(zk_hosts) as admin,
        trio.open_nursery() as nursery,
        brokers(nursery, zk_hosts, (1, 2, 3)) as members,
    ):
        first_zk = await ZkClient.connect(zk_hosts, SESSION_TIMEOUT_MS)
        await start_controller(nursery, first_zk, 1, {1, 2, 3})
        await admin.run(create_topic("t", {0: (2, 1, 3)}, {}))
        await wait_until(
            lambda: metadata_isr(members[3].fake, ("t", 0)) == (2, 1, 3), "t-0 in metadata"
        )
        before = await read_state(admin, "t", 0)
        await first_zk.close()  # no controller now

        await members[2].zk.close()  # broker 2 restarts: a new registration, a new epoch
        async with zk_session(zk_hosts) as restarted:
            epoch = await register_broker(restarted, 2, members[2].fake.host, members[2].fake.port)
            assert epoch > members[2].epoch
            controller = await start_controller(nursery, members[3].zk, 3, {1, 2, 3})
            assert controller.context.live_brokers[2].epoch == epoch

            after = zk_data.PartitionStateZnode(1, before.leader_epoch + 1, (1, 3), 2)
            assert await read_state(admin, "t", 0) == after

            def told_to_follow() -> bool:
                state = members[2].fake.latest_leader_and_isr_states().get(("t", 0))
                return state is not None and (state.leader, state.leader_epoch) == (
                    after.leader,
                    after.leader_epoch,
                )

            await wait_until(told_to_follow, "the restarted broker told to follow broker 1")
            nursery.cancel_scope.cancel()


async def test_new_controller_keeps_a_follower_that_only_re_registered(zk_hosts: str) -> None:
    """A follower's session expires while there is no controller, but its process lives on
    (its log intact): it re-registers with a new broker epoch and its first registration's
    czxid as incarnation. The next controller finds that incarnation older than the state
    znode: no restart, the ISR and leader epoch stay, and the follower hears its partition
    in a LeaderAndIsr carrying its new broker epoch."""
    async with (
        zk_session(zk_hosts) as admin,
        trio.open_nursery() as nursery,
        brokers(nursery, zk_hosts, (1, 2, 3)) as members,
    ):
        first_zk = await ZkClient.connect(zk_hosts, SESSION_TIMEOUT_MS)
        await start_controller(nursery, first_zk, 1, {1, 2, 3})
        await admin.run(create_topic("t", {0: (2, 1, 3)}, {}))
        await wait_until(
            lambda: metadata_isr(members[3].fake, ("t", 0)) == (2, 1, 3), "t-0 in metadata"
        )
        before = await read_state(admin, "t", 0)
        await first_zk.close()  # no controller now

        follower = members[3]
        old_session = follower.zk.session_id
        await follower.zk.force_session_expiry()
        await wait_until(
            lambda: follower.zk.connected and follower.zk.session_id != old_session,
            "broker 3's new session",
        )
        epoch = await register_broker(
            follower.zk, 3, follower.fake.host, follower.fake.port, incarnation=follower.epoch
        )
        assert epoch > follower.epoch
        controller = await start_controller(nursery, members[1].zk, 1, {1, 2, 3})
        known = controller.context.live_brokers[3]
        assert (known.epoch, known.incarnation) == (epoch, follower.epoch)
        assert await read_state(admin, "t", 0) == before

        def told_with_new_epoch() -> bool:
            return any(
                request.broker_epoch == epoch
                and any(
                    (s.topic_name, s.partition_index, s.leader, s.leader_epoch, tuple(s.isr))
                    == ("t", 0, before.leader, before.leader_epoch, before.isr)
                    for s in request.partition_states
                )
                for request in follower.fake.leader_and_isr()
            )

        await wait_until(told_with_new_epoch, "LeaderAndIsr for t-0 with the new broker epoch")
        assert await read_state(admin, "t", 0) == before
        nursery.cancel_scope.cancel()


# --- unclean leader election ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("default", "unclean_config", "clean_config"),
    [
        pytest.param(False, {UNCLEAN: "true"}, {}, id="topic-override"),
        pytest.param(True, {}, {UNCLEAN: "false"}, id="broker-default"),
    ],
)
async def test_unclean_leader_election(
    zk_hosts: str, default: bool, unclean_config: dict[str, str], clean_config: dict[str, str]
) -> None:
    async with (
        zk_session(zk_hosts) as admin,
        trio.open_nursery() as nursery,
        brokers(nursery, zk_hosts, (1, 2)) as members,
    ):
        controller = await start_controller(
            nursery, members[1].zk, 1, {1, 2}, unclean_leader_election_enable=default
        )
        # Broker 3 is not there yet: both partitions start with ISR (2,) only.
        await admin.run(create_topic("dirty", {0: (2, 3)}, unclean_config))
        await admin.run(create_topic("clean", {0: (2, 3)}, clean_config))
        await wait_until(
            lambda: (
                {tp: s.leader for tp, s in members[1].fake.latest_metadata().items()}
                == {("dirty", 0): 2, ("clean", 0): 2}
            ),
            "both led by broker 2",
        )
        async with brokers(nursery, zk_hosts, (3,)) as late:
            await wait_until(
                lambda: 3 in controller.context.live_brokers, "broker 3 seen by the controller"
            )
            assert controller.unclean_leader_elections == 0
            await members[2].zk.close()  # the only ISR member dies; 3 is live but out of sync

            await wait_until(
                lambda: late[3].fake.latest_leader_and_isr().get(("dirty", 0)) == (3, 1),
                "broker 3 told to lead dirty-0 at leader epoch 1",
            )
            assert await read_state(admin, "dirty", 0) == zk_data.PartitionStateZnode(3, 1, (3,), 1)
            await wait_until(
                lambda: members[1].fake.latest_metadata()[("clean", 0)].leader == -1,
                "clean-0 offline",
            )
            # Without unclean election: no leader, epoch bumped, ISR keeps its last member.
            assert await read_state(admin, "clean", 0) == zk_data.PartitionStateZnode(
                -1, 1, (2,), 1
            )
            assert controller.unclean_leader_elections == 1
            nursery.cancel_scope.cancel()


# --- resigning --------------------------------------------------------------------------------


async def test_controller_resigns_at_once_when_its_session_is_lost(zk_hosts: str) -> None:
    """ZooKeeper cannot tell a controller cut off from it that its session ended (the other
    candidate may well win first: writes are fenced by the epoch's zkVersion), but the moment
    it learns, it stops acting as controller, without waiting for anything else."""
    async with (
        zk_session(zk_hosts) as zk1,
        zk_session(zk_hosts) as zk2,
        trio.open_nursery() as nursery,
    ):
        with capture_logs() as logs:
            first: Controller = await nursery.start(run_controller, zk1, 1)
            await wait_until(lambda: first.is_active, "broker 1 to be controller")
            second: Controller = await nursery.start(run_controller, zk2, 2)
            await wait_until(lambda: second.controller_id == 1, "broker 2 to follow broker 1")

            session_events = zk1.subscribe()
            await zk1.force_session_expiry()
            with trio.fail_after(15):
                while True:
                    event = await session_events.receive()
                    if isinstance(event, SessionEvent) and event.state is SessionState.LOST:
                        break
            await wait_until(
                lambda: not (first.is_active and first.controller_epoch == 1),
                "broker 1 to resign as soon as it learns",
                timeout_s=1.0,
            )
            await wait_until(
                lambda: (
                    (first.is_active or second.is_active)
                    and first.controller_epoch == second.controller_epoch == 2
                ),
                "one controller at epoch 2",
            )
            # A request to the candidate that is not controller is refused, never acted on.
            other = first if second.is_active else second
            assert await other.controlled_shutdown(1, -1) == (ErrorCode.NOT_CONTROLLER, [])
        resignations = [
            (e.get("broker_id"), e.get("controller_epoch"))
            for e in logs
            if e["event"] == "controller resigned"
        ]
        assert (1, 1) in resignations
        nursery.cancel_scope.cancel()
