"""Fencing the controller's requests (BrokerState.admit_controller_request): only the
controller ZooKeeper names, at ZooKeeper's epoch, moves the epoch the broker remembers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from broker.config.log_config import LogConfig
from broker.core.isr import IsrCore, IsrSettings
from broker.core.replica_manager import ReplicaManager
from broker.core.state import BrokerState, ElectedController
from broker.log.manager import LogManager
from protocol.errors import ErrorCode

ME = 1
NOW = 1_000
CONTROLLER = 3
EPOCH = 5
INT32_MAX = 2**31 - 1


@pytest.fixture
def state(tmp_path: Path) -> Iterator[BrokerState]:
    manager = LogManager([tmp_path], LogConfig())
    manager.startup(NOW)
    isr = IsrCore(ME, IsrSettings(30_000, 5_000, 60_000), NOW)
    state = BrokerState(ReplicaManager(ME, manager), isr, min_insync_replicas=1)
    state.broker_epoch = 100
    yield state
    manager.shutdown(NOW)


def admit(state: BrokerState, controller_id: int, epoch: int, elected: ElectedController) -> int:
    return state.admit_controller_request(epoch, 100, controller_id=controller_id, elected=elected)


def test_only_the_elected_controller_at_zookeepers_epoch_is_admitted(state: BrokerState) -> None:
    elected = ElectedController(CONTROLLER, EPOCH)
    refused = [
        (CONTROLLER, INT32_MAX),  # above ZooKeeper's epoch: never adopted
        (CONTROLLER, EPOCH + 1),
        (CONTROLLER + 1, EPOCH),  # not the controller ZooKeeper names
        (CONTROLLER, EPOCH - 1),  # an older controller
    ]
    for controller_id, epoch in refused:
        assert admit(state, controller_id, epoch, elected) == ErrorCode.STALE_CONTROLLER_EPOCH
        assert state.controller_epoch == -1
    assert admit(state, CONTROLLER, EPOCH, ElectedController(-1, EPOCH)) == 11  # none elected
    assert admit(state, CONTROLLER, EPOCH, elected) == ErrorCode.NONE
    assert state.controller_epoch == EPOCH
    # The next controller is taken; then the previous one is stale, whatever ZooKeeper said.
    assert admit(state, 2, EPOCH + 1, ElectedController(2, EPOCH + 1)) == ErrorCode.NONE
    assert admit(state, CONTROLLER, EPOCH, elected) == ErrorCode.STALE_CONTROLLER_EPOCH
    assert state.controller_epoch == EPOCH + 1


def test_a_stale_broker_epoch_is_reported_first_and_no_zookeeper_checks_epochs_only(
    state: BrokerState,
) -> None:
    elected = ElectedController(CONTROLLER, EPOCH)
    stale = state.admit_controller_request(EPOCH, 99, controller_id=7, elected=elected)
    assert stale == ErrorCode.STALE_BROKER_EPOCH
    assert state.admit_controller_request(EPOCH, -1) == ErrorCode.NONE  # in-process brokers
    assert state.admit_controller_request(EPOCH - 1, -1) == ErrorCode.STALE_CONTROLLER_EPOCH
