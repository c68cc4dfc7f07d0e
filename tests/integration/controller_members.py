"""Fake brokers registered in ZooKeeper, and a controller started among them: the setting of
the controller's integration tests (test_controller_replication.py,
test_controller_shutdown.py)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass

import trio

from broker.registration import register_broker
from controller.controller import Controller, run_controller
from controller.settings import ControllerSettings
from controller.zk_client import ZkClient
from tests.integration.fake_broker import FakeBroker
from tests.integration.test_controller_zk import SESSION_TIMEOUT_MS, close_shielded, wait_until

__all__ = ["Member", "brokers", "metadata_isr", "start_controller"]


@dataclass
class Member:
    """A fake broker registered in its own ZooKeeper session."""

    fake: FakeBroker
    zk: ZkClient
    epoch: int


@asynccontextmanager
async def brokers(
    nursery: trio.Nursery, zk_hosts: str, ids: tuple[int, ...]
) -> AsyncIterator[dict[int, Member]]:
    members: dict[int, Member] = {}
    async with AsyncExitStack() as stack:
        for broker_id in ids:
            fake = FakeBroker(broker_id)
            await nursery.start(fake.serve)
            zk = await ZkClient.connect(zk_hosts, SESSION_TIMEOUT_MS)
            stack.push_async_callback(close_shielded, zk)  # closing twice is harmless
            epoch = await register_broker(zk, broker_id, fake.host, fake.port)
            members[broker_id] = Member(fake, zk, epoch)
        yield members


async def start_controller(
    nursery: trio.Nursery,
    zk: ZkClient,
    broker_id: int,
    live: set[int],
    *,
    unclean_leader_election_enable: bool = False,
) -> Controller:
    controller: Controller = await nursery.start(
        functools.partial(
            run_controller,
            zk,
            broker_id,
            ControllerSettings(unclean_leader_election_enable=unclean_leader_election_enable),
        )
    )
    await wait_until(
        lambda: controller.is_active and set(controller.context.live_brokers) == live,
        f"broker {broker_id} to be controller and see brokers {sorted(live)}",
    )
    return controller


def metadata_isr(broker: FakeBroker, tp: tuple[str, int]) -> tuple[int, ...] | None:
    state = broker.latest_metadata().get(tp)
    return None if state is None else tuple(state.isr)
