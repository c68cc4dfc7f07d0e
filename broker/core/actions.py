"""What a core step asks its shell to do, as one value, so that each driver (the trio broker
and the simulator) carries it out in one place (BrokerContext.apply, SimBrokerUpkeep.apply in
tests/simulation/broker_upkeep.py): the cores decide, the drivers only start and wake things."""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from broker.core.controller_requests import FollowerChange
    from broker.core.isr import IsrWrite

__all__ = ["NO_ACTIONS", "Actions"]


@dataclass(frozen=True, slots=True)
class Actions:
    """`follower_changes`: fetchers to start or stop (leadership changed); `complete_keys`:
    wake the requests parked on them (appended to, HW moved, leadership or metadata changed);
    `isr_writes`: ISR changes to write (Kafka's AlterPartition; here the ZooKeeper CAS);
    `group_resync`: the group coordinator follows the offsets partitions it now leads. Carried
    out in that order."""

    complete_keys: Sequence[Hashable] = ()
    isr_writes: Sequence[IsrWrite] = ()
    follower_changes: Sequence[FollowerChange] = ()
    group_resync: bool = False


NO_ACTIONS = Actions()
