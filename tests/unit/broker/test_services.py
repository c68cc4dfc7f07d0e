"""The stand-ins BrokerContext holds until broker/main.py starts each shell: they answer what
a broker answers a request that comes before that shell runs."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from broker.config.broker_config import BrokerConfig
from broker.context import BrokerContext
from broker.core.controller_requests import FollowerChange
from broker.core.group.coordinator import Decision
from broker.core.replica_manager import ReplicaManager
from broker.log.manager import LogManager
from broker.services import NO_ZOOKEEPER, NOT_FETCHING, NoGroups, NotController, no_producer_ids
from controller.zk_topics import list_topics
from controller.zk_types import SessionState, ZkError
from protocol.errors import ErrorCode
from protocol.messages.elect_leaders import ElectionType
from protocol.topic_partition import TopicPartition

TP = TopicPartition("t", 0)


def test_not_controller_is_never_active_and_answers_not_controller() -> None:
    controller = NotController(3)
    assert (controller.controller_id, controller.controller_epoch) == (-1, -1)
    assert not controller.is_active and not controller.context.active
    assert controller.list_reassignments() is None
    assert controller.stats.leader_elections == 0

    async def ask() -> None:
        shutdown = await controller.controlled_shutdown(3, 7)
        assert shutdown == (ErrorCode.NOT_CONTROLLER, [])
        elections = await controller.elect_leaders(ElectionType.PREFERRED, [TP], 100)
        assert elections == {TP: ErrorCode.NOT_CONTROLLER}
        moves = await controller.alter_reassignments({TP: (1, 2)}, 100)
        assert moves == {TP: ErrorCode.NOT_CONTROLLER}

    trio.run(ask)


def test_not_fetching_follows_nothing() -> None:
    NOT_FETCHING.apply(FollowerChange(TP))
    assert list(NOT_FETCHING.followed()) == []


def test_no_producer_ids_fails_as_zookeeper_does() -> None:
    async def ask() -> None:
        with pytest.raises(ZkError):
            await no_producer_ids().generate_producer_id()

    trio.run(ask)


def test_no_zookeeper_is_absent_lost_and_runs_no_script() -> None:
    assert NO_ZOOKEEPER.absent and NO_ZOOKEEPER.session_state is SessionState.LOST
    assert (NO_ZOOKEEPER.disconnects, NO_ZOOKEEPER.expirations, NO_ZOOKEEPER.reconnects) == (
        0,
        0,
        0,
    )

    async def ask() -> None:
        with pytest.raises(ZkError):
            await NO_ZOOKEEPER.run(list_topics())

    trio.run(ask)


def test_no_groups_is_inactive_and_coordinates_nothing() -> None:
    groups = NoGroups()
    assert not groups.active
    assert groups.core.check("g") == ErrorCode.NOT_COORDINATOR
    assert groups.topics() == {} and groups.classic_synced == {}
    groups.sync_partitions()
    assert groups.core.partitions == {}

    async def ask() -> None:
        await groups.ensure_offsets_topic()
        decision = Decision(0, "ok", lambda code: code.name)
        assert await groups.write(decision) == "COORDINATOR_NOT_AVAILABLE"

    trio.run(ask)


def test_an_in_process_context_holds_the_stand_ins(tmp_path: Path) -> None:
    config = BrokerConfig(broker_id=1, zookeeper_connect="zk:2181", log_dirs=(tmp_path,))
    ctx = BrokerContext(config, ReplicaManager(1, LogManager([tmp_path], config.log_config())))
    assert isinstance(ctx.controller, NotController)
    assert ctx.fetchers is NOT_FETCHING
    assert ctx.zk is NO_ZOOKEEPER and isinstance(ctx.group_coordinator, NoGroups)
