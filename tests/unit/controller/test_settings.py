"""The controller's settings value keeps the broker table's names and defaults."""

from __future__ import annotations

import dataclasses

from broker.config.settings import default_of
from controller.settings import ControllerSettings


def test_defaults_are_the_broker_tables() -> None:
    for field in dataclasses.fields(ControllerSettings):
        key = field.name.replace("_", ".")
        assert field.default == default_of(key), key


def test_of_reads_the_same_attribute_names() -> None:
    class Config:
        request_timeout_ms = 1
        unclean_leader_election_enable = True
        auto_leader_rebalance_enable = False
        leader_imbalance_per_broker_percentage = 2
        leader_imbalance_check_interval_seconds = 3

    assert ControllerSettings.of(Config()) == ControllerSettings(1, True, False, 2, 3)
