"""A minimal shell around the pure group coordinator: decisions' records are "appended" to a
list per partition and replayed, as broker/group_coordinator.py does after a write."""

from __future__ import annotations

import itertools
from collections.abc import Iterable
from typing import TypeVar

from broker.core.group.coordinator import Decision, GroupCoordinatorCore, GroupSettings
from broker.core.group.records import CoordinatorRecord
from protocol.messages.consumer_group_heartbeat import (
    ConsumerGroupHeartbeatRequest,
    ConsumerGroupHeartbeatResponse,
    TopicPartitions,
)
from protocol.topic_partition import TopicPartition

R = TypeVar("R")
SETTINGS = GroupSettings(num_partitions=3, session_timeout_ms=45_000, heartbeat_interval_ms=5_000)


class Shell:
    def __init__(self, settings: GroupSettings = SETTINGS) -> None:
        ids = itertools.count(1)
        self.core = GroupCoordinatorCore(settings, lambda: f"m{next(ids)}")
        self.log: dict[int, list[CoordinatorRecord]] = {}
        self.topics: dict[str, int] = {}
        for p in range(settings.num_partitions):
            self.core.begin_load(p)
            self.core.finish_load(p, 0)

    def run(self, decision: Decision[R]) -> R:
        for key, value in decision.records:
            self.log.setdefault(decision.partition, []).append((key, value))
            self.core.replay(key, value)
        return decision.response

    def heartbeat(
        self,
        group: str,
        member_id: str,
        epoch: int,
        now_ms: int = 0,
        owned: Iterable[TopicPartition] | None = None,
        *,
        wall_ms: int | None = None,  # the wall clock; by default the same as now_ms
        **fields: object,
    ) -> ConsumerGroupHeartbeatResponse:
        if epoch == 0:
            fields.setdefault("rebalance_timeout_ms", 60_000)
            fields.setdefault("subscribed_topic_names", ("t",))
            owned = owned if owned is not None else ()
        request = ConsumerGroupHeartbeatRequest(
            group,
            member_id,
            epoch,
            topic_partitions=wire(owned),
            **fields,  # type: ignore[arg-type]
        )
        wall = now_ms if wall_ms is None else wall_ms
        return self.run(self.core.heartbeat(request, self.topics, now_ms, wall_ms=wall))

    def rebuilt(self) -> GroupCoordinatorCore:
        """A new coordinator loading every partition from the records written so far."""
        core = GroupCoordinatorCore(self.core.settings, lambda: "unused")
        for p in range(self.core.settings.num_partitions):
            core.begin_load(p)
            for key, value in self.log.get(p, []):
                core.replay(key, value)
            core.finish_load(p, 0)
        return core


def wire(partitions: Iterable[TopicPartition] | None) -> tuple[TopicPartitions, ...] | None:
    if partitions is None:
        return None
    by: dict[str, list[int]] = {}
    for tp in sorted(partitions):
        by.setdefault(tp.topic, []).append(tp.partition)
    return tuple(TopicPartitions(t, tuple(ps)) for t, ps in by.items())


def assigned(response: ConsumerGroupHeartbeatResponse) -> frozenset[TopicPartition] | None:
    if response.assignment is None:
        return None
    topics = response.assignment.topic_partitions
    return frozenset(TopicPartition(t.topic, p) for t in topics for p in t.partitions)
