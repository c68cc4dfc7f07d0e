"""The broker settings a controller reads (KafkaConfig's controller keys), as one frozen value.

The controller never imports the broker: the broker builds this from its BrokerConfig, whose
attributes have the same names (`ControllerSettings.of(config)`). The defaults are the broker
table's (broker/config/settings.py); tests/unit/controller/test_settings.py keeps them equal.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Final

__all__ = ["DEFAULT_SETTINGS", "ControllerSettings"]


@dataclass(frozen=True, slots=True)
class ControllerSettings:
    request_timeout_ms: int = 30_000
    unclean_leader_election_enable: bool = False
    auto_leader_rebalance_enable: bool = True
    leader_imbalance_per_broker_percentage: int = 10
    leader_imbalance_check_interval_seconds: int = 300

    @classmethod
    def of(cls, config: object) -> ControllerSettings:
        """From any object with these attribute names (the broker's BrokerConfig)."""
        return cls(**{f.name: getattr(config, f.name) for f in dataclasses.fields(cls)})


DEFAULT_SETTINGS: Final = ControllerSettings()
