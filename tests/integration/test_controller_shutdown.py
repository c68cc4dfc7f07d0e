"""Controlled shutdown (Kafka's ControlledShutdown request) against a real ZooKeeper, through
the broker's handler, with fake brokers on real sockets."""

from __future__ import annotations

import uuid
from types import SimpleNamespace
from typing import TYPE_CHECKING, cast

import pytest
import trio

from broker.handlers.controlled_shutdown import handle_controlled_shutdown
from broker.services import NotController
from client.cli.zookeeper_server import ZooKeeperServer
from controller import zk_data
from controller.controller import Controller
from controller.zk_topics import create_topic
from protocol.apis import ApiKey
from protocol.codec import RequestHeader
from protocol.errors import ErrorCode
from protocol.messages.common import TopicPartitionRef
from protocol.messages.controlled_shutdown import ControlledShutdownRequest
from tests.integration.controller_members import brokers, start_controller
from tests.integration.test_controller_zk import read_state, wait_until, zk_session

if TYPE_CHECKING:
    from broker.context import BrokerContext

pytestmark = pytest.mark.integration


@pytest.fixture
def zk_hosts(zookeeper: ZooKeeperServer) -> str:
    return f"{zookeeper.connect_string}/controlled-shutdown-{uuid.uuid4().hex[:12]}"


def handler_context(controller: Controller | None) -> BrokerContext:
    """The handler only needs `ctx.controller`, the authorizer's word (brokers only: a
    broker without an authorizer allows every request, as here) and whether the request came
    in on the control-plane listener (it did: the controller's own channel)."""

    def authorize_cluster(operation: object, *, log_denied: bool = True) -> bool:
        return True

    def on_control_plane() -> bool:
        return True

    return cast(
        "BrokerContext",
        SimpleNamespace(
            controller=NotController() if controller is None else controller,
            authorize_cluster=authorize_cluster,
            on_control_plane=on_control_plane,
        ),
    )


async def ask_controlled_shutdown(
    controller: Controller | None, broker_id: int, broker_epoch: int
) -> tuple[ErrorCode, list[tuple[str, int]]]:
    """Through the broker's ControlledShutdown handler, as a request would."""
    header = RequestHeader(ApiKey.CONTROLLED_SHUTDOWN, 0, 1, "test")
    response = await handle_controlled_shutdown(
        handler_context(controller), header, ControlledShutdownRequest(broker_id, broker_epoch)
    )
    remaining = [(ref.topic, ref.partition) for ref in response.remaining_partitions]
    assert all(isinstance(ref, TopicPartitionRef) for ref in response.remaining_partitions)
    return ErrorCode(response.error_code), remaining


async def test_controlled_shutdown_moves_leadership_and_reports_what_remains(
    zk_hosts: str,
) -> None:
    async with (
        zk_session(zk_hosts) as admin,
        trio.open_nursery() as nursery,
        brokers(nursery, zk_hosts, (1, 2, 3)) as members,
    ):
        idle = Controller(members[2].zk, 2)  # a candidate that is not the controller
        assert await ask_controlled_shutdown(idle, 2, members[2].epoch) == (
            ErrorCode.NOT_CONTROLLER,
            [],
        )
        assert await ask_controlled_shutdown(None, 2, members[2].epoch) == (
            ErrorCode.NOT_CONTROLLER,
            [],
        )
        controller = await start_controller(nursery, members[1].zk, 1, {1, 2, 3})
        await admin.run(create_topic("t", {0: (2, 1, 3), 1: (1, 2, 3), 2: (2, 3, 1)}, {}))
        await admin.run(create_topic("solo", {0: (2,)}, {}))  # RF=1: cannot move
        await admin.run(create_topic("last", {0: (2, 4)}, {}))  # 4 never registers: ISR is (2,)
        expected_leaders = {("t", 0): 2, ("t", 1): 1, ("t", 2): 2, ("solo", 0): 2, ("last", 0): 2}
        await wait_until(
            lambda: (
                {
                    tp: s.leader
                    for tp, s in members[3].fake.latest_metadata().items()
                    if tp in expected_leaders
                }
                == expected_leaders
            ),
            "every partition led",
        )
        # Someone rewrote t-0's state behind the controller's back (same content, version + 1):
        # the controller's CAS fails, it re-loads, and the shutdown is retried and succeeds.
        path = zk_data.partition_state_path("t", 0)
        found = await admin.get(path)
        assert found is not None
        await admin.set(path, found[0], version=found[1].version)

        assert await ask_controlled_shutdown(controller, 9, 1) == (
            ErrorCode.BROKER_NOT_AVAILABLE,
            [],
        )
        assert await ask_controlled_shutdown(controller, 2, members[2].epoch - 1) == (
            ErrorCode.STALE_BROKER_EPOCH,
            [],
        )
        assert controller.context.shutting_down == frozenset()

        with trio.fail_after(15):
            code, remaining = await ask_controlled_shutdown(controller, 2, members[2].epoch)
        assert code == ErrorCode.NONE
        assert remaining == [("last", 0), ("solo", 0)]  # the last one keeps leading
        assert controller.context.shutting_down == frozenset({2})

        # ZooKeeper: leadership moved (first live ISR member not shutting down, assignment
        # order), broker 2 left every ISR it could, epochs bumped by one.
        assert await read_state(admin, "t", 0) == zk_data.PartitionStateZnode(1, 1, (1, 3), 1)
        assert await read_state(admin, "t", 1) == zk_data.PartitionStateZnode(1, 1, (1, 3), 1)
        assert await read_state(admin, "t", 2) == zk_data.PartitionStateZnode(3, 1, (3, 1), 1)
        assert await read_state(admin, "solo", 0) == zk_data.PartitionStateZnode(2, 0, (2,), 1)
        assert await read_state(admin, "last", 0) == zk_data.PartitionStateZnode(2, 0, (2,), 1)

        # The brokers hear it: the new leaders and epochs, broker 2 as a follower of what it
        # led; it is not told about t-1 but stops fetching it.
        await wait_until(
            lambda: (
                members[1].fake.latest_leader_and_isr().get(("t", 0)) == (1, 1)
                and members[1].fake.latest_leader_and_isr().get(("t", 1)) == (1, 1)
                and members[3].fake.latest_leader_and_isr().get(("t", 2)) == (3, 1)
                and members[3].fake.latest_leader_and_isr().get(("t", 1)) == (1, 1)
                and members[2].fake.latest_leader_and_isr().get(("t", 0)) == (1, 1)
                and members[2].fake.latest_leader_and_isr().get(("t", 2)) == (3, 1)
                and ("t", 1, False) in members[2].fake.stopped()
            ),
            "LeaderAndIsr with the new leaders and StopReplica for broker 2's followed partition",
        )
        states = members[3].fake.latest_leader_and_isr_states()
        assert tuple(states[("t", 1)].isr) == (1, 3)
        assert states[("t", 0)].partition_epoch == 2  # the outside write, then ours
        assert members[2].fake.latest_leader_and_isr()[("t", 1)] == (1, 0)  # from creation
        await wait_until(
            lambda: all(members[b].fake.latest_metadata()[("t", 2)].leader == 3 for b in (1, 2, 3)),
            "UpdateMetadata to every broker, the one shutting down included",
        )

        # Asking again (a broker retries) is harmless and gives the same answer.
        assert await ask_controlled_shutdown(controller, 2, members[2].epoch) == (
            ErrorCode.NONE,
            [("last", 0), ("solo", 0)],
        )
        # The broker stops: forgotten as shutting down.
        await members[2].zk.close()
        await wait_until(
            lambda: (
                controller.context.shutting_down == frozenset()
                and 2 not in controller.context.live_brokers
            ),
            "broker 2 gone and forgotten",
        )
        nursery.cancel_scope.cancel()
