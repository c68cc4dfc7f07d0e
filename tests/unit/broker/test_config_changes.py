"""The config change listener (broker/config/change_listener.py) over the simulator's in-memory
ZooKeeper: notifications reach the open logs, a reconnection reads everything, and broken
stored configs never stop the broker."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
import trio

from broker.config.broker_config import BrokerConfig
from broker.config.change_listener import ConfigChangeListener
from broker.context import BrokerContext
from broker.core.client_quotas import QuotaEntity, QuotaType
from broker.core.replica_manager import ReplicaManager
from broker.core.scram import make_credential
from broker.log.manager import LogManager
from controller import zk_data
from controller.zk_client import ZkClient
from controller.zk_configs import (
    BROKERS,
    CLIENTS,
    TOPICS,
    USERS,
    get_entity_config,
    set_entity_config,
)
from controller.zk_script import ZkScript, create
from controller.zk_types import SessionEvent, SessionState, WatchEvent, WatchKind, ZkEvent
from protocol.messages.leader_and_isr import LeaderAndIsrPartitionState
from protocol.topic_partition import TopicPartition
from tests.simulation.zk import SimZk

NOW = 1_700_000_000_000
T0 = TopicPartition("t", 0)
DEFAULT = zk_data.DEFAULT_BROKER_ENTITY
CHANGED = WatchEvent(WatchKind.CHILDREN, zk_data.CONFIG_CHANGES_PATH)


@dataclass
class SimZkClient:
    """What the listener uses of ZkClient, over SimZk; watch events are sent by the test."""

    zk: SimZk
    session: int = 0
    events: list[trio.MemorySendChannel[ZkEvent]] = field(default_factory=list)

    async def run(self, script: ZkScript[Any]) -> Any:
        await trio.lowlevel.checkpoint()
        return self.zk.run(self.session, script)

    def subscribe(self) -> trio.MemoryReceiveChannel[ZkEvent]:
        send, receive = trio.open_memory_channel[ZkEvent](math.inf)
        self.events.append(send)
        return receive

    def tell(self, event: ZkEvent) -> None:
        for channel in self.events:
            channel.send_nowait(event)


@pytest.fixture
def zk() -> SimZkClient:
    sim = SimZk()
    return SimZkClient(sim, sim.open_session(1))


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[BrokerContext]:
    config = BrokerConfig(broker_id=1, zookeeper_connect="zk:2181", log_dirs=(tmp_path,))
    manager = LogManager([tmp_path], config.log_config())
    manager.startup(NOW)
    ctx = BrokerContext(config, ReplicaManager(1, manager))
    state = LeaderAndIsrPartitionState("t", 0, 1, 1, 0, (1,), 0, (1,))
    ctx.replica_manager.become_leader_or_follower((state,), NOW, {"t": {}}, wall_ms=NOW)
    yield ctx
    manager.shutdown(NOW)


async def eventually(condition: Any, what: str) -> None:
    for _ in range(500):
        if condition():
            return
        await trio.sleep(0.01)
    raise AssertionError(f"timed out waiting for {what}")


def log_config(ctx: BrokerContext) -> Any:
    return ctx.replica_manager.log_manager.logs[T0].config


async def start(nursery: trio.Nursery, ctx: BrokerContext, zk: SimZkClient) -> None:
    await nursery.start(ConfigChangeListener(ctx, cast(ZkClient, zk)).run)


async def test_topic_changes_and_defaults_reach_the_open_logs(
    ctx: BrokerContext, zk: SimZkClient
) -> None:
    zk.zk.run(zk.session, set_entity_config(BROKERS, DEFAULT, {"min.insync.replicas": "2"}, -1))
    async with trio.open_nursery() as nursery:
        await start(nursery, ctx, zk)
        assert ctx.state.min_insync_replicas == 2  # read before the listener reports started
        zk.zk.run(zk.session, set_entity_config(TOPICS, "t", {"retention.ms": "1000"}, -1))
        zk.tell(CHANGED)
        await eventually(lambda: log_config(ctx).retention_ms == 1000, "the topic change")
        zk.zk.run(zk.session, set_entity_config(BROKERS, DEFAULT, {"log.segment.bytes": "4096"}, 0))
        zk.tell(CHANGED)
        await eventually(lambda: log_config(ctx).segment_bytes == 4096, "the default change")
        assert log_config(ctx).retention_ms == 1000  # the topic's override stays
        assert ctx.state.min_insync_replicas == ctx.config.min_insync_replicas  # deleted
        nursery.cancel_scope.cancel()


async def test_a_reconnection_reads_everything(ctx: BrokerContext, zk: SimZkClient) -> None:
    async with trio.open_nursery() as nursery:
        await start(nursery, ctx, zk)
        # A change whose notification was missed (the watch was gone while disconnected).
        zk.zk.run(zk.session, set_entity_config(TOPICS, "t", {"flush.messages": "7"}, -1))
        zk.tell(SessionEvent(SessionState.CONNECTED, 1))
        await eventually(lambda: log_config(ctx).flush_messages == 7, "the missed change")
        nursery.cancel_scope.cancel()


async def test_broken_stored_configs_never_stop_the_broker(
    ctx: BrokerContext, zk: SimZkClient
) -> None:
    zk.zk.run(zk.session, create(zk_data.broker_config_path(DEFAULT), b"not json", makepath=True))
    zk.zk.run(zk.session, create(zk_data.topic_config_path("t"), b"[]", makepath=True))
    async with trio.open_nursery() as nursery:
        await start(nursery, ctx, zk)  # started, with the static defaults
        assert log_config(ctx) == ctx.config.log_config()
        zk.zk.run(zk.session, set_entity_config(TOPICS, "u", {}, -1))
        zk.tell(CHANGED)
        await trio.sleep(0.1)
        nursery.cancel_scope.cancel()


async def test_deleted_and_changed_credentials_are_handed_on(
    ctx: BrokerContext, zk: SimZkClient
) -> None:
    def store(user: str, password: str, version: int, *mechanisms: str) -> None:
        config = {m: make_credential(m, password).encode() for m in mechanisms}
        zk.zk.run(zk.session, set_entity_config(USERS, user, config, version))

    sha512, sha256 = "SCRAM-SHA-512", "SCRAM-SHA-256"
    store("alice", "a", -1, sha512)
    store("bob", "b", -1, sha512)
    revoked: list[frozenset[str]] = []
    async with trio.open_nursery() as nursery:
        listener = ConfigChangeListener(
            ctx, cast(ZkClient, zk), on_credentials_revoked=revoked.append
        )
        await nursery.start(listener.run)
        assert ("alice", sha512) in ctx.credentials and revoked == []  # a first read: none
        store("alice", "a", 0)  # deleted
        zk.tell(CHANGED)
        await eventually(lambda: revoked == [{"alice"}], "alice revoked")
        store("bob", "b2", 0, sha512)  # a new password
        zk.tell(CHANGED)
        await eventually(lambda: revoked == [{"alice"}, {"bob"}], "bob revoked")
        store("carol", "c", -1, sha256)  # a new user
        zk.tell(CHANGED)
        await eventually(lambda: ("carol", sha256) in ctx.credentials, "carol's credential")
        zk.tell(SessionEvent(SessionState.CONNECTED, 1))  # everything read again: no change
        store("dave", "d", -1, sha512)
        zk.tell(CHANGED)
        await eventually(lambda: ("dave", sha512) in ctx.credentials, "dave's credential")
        assert revoked == [{"alice"}, {"bob"}]
        nursery.cancel_scope.cancel()


async def test_client_quotas_reach_the_quota_managers(ctx: BrokerContext, zk: SimZkClient) -> None:
    produce = ctx.client_quotas.managers[QuotaType.PRODUCE]
    zk.zk.run(zk.session, set_entity_config(CLIENTS, "app", {"producer_byte_rate": "100"}, -1))
    async with trio.open_nursery() as nursery:
        await start(nursery, ctx, zk)  # everything read before it reports started
        assert produce.quotas == {QuotaEntity(None, "app"): {"producer_byte_rate": 100.0}}
        nested = "alice/clients/a%2Fb"  # the client-id a/b, sanitized as Kafka stores it
        zk.zk.run(zk.session, set_entity_config(USERS, nested, {"producer_byte_rate": "7"}, -1))
        zk.tell(CHANGED)
        await eventually(lambda: QuotaEntity("alice", "a/b") in produce.quotas, "the new quota")
        assert produce.record("alice", "a/b", 1000, now_ms=0) > 0  # 1000 B / 10 s > 7 B/s
        zk.zk.run(zk.session, set_entity_config(CLIENTS, "app", {}, 0))
        zk.tell(CHANGED)
        await eventually(lambda: QuotaEntity(None, "app") not in produce.quotas, "the removal")
        # The user's parent znode, made empty on the way, is no user's broken credentials.
        assert (await zk.run(get_entity_config(USERS, "alice"))).config == {}
        nursery.cancel_scope.cancel()
