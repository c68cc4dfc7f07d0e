"""The chaos workload's consumer group: members that process records, then commit them, and are
restarted now and then (at-least-once), while the runner samples the committed offsets.

Each incarnation of a member has a number of its own; it records what it owns (from its
rebalance listener), every record it processes and the time, for tests/chaos/group_checker.py.
A restart cancels the member (it leaves the group without committing), as a crash that still
says goodbye would; what it processed after its last commit is processed again by the next
owner.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import trio

from client.admin import Admin
from client.consumer import Consumer, RebalanceListener
from client.errors import HighwaterClientError
from tests.chaos.group_checker import CommittedSample, Ownership, OwnershipChange, Processed

__all__ = ["GROUP", "GroupHistory", "run_group", "sample_committed"]

GROUP = "chaos-group"


@dataclass
class GroupHistory:
    ownership: list[Ownership] = field(default_factory=list)
    processed: list[Processed] = field(default_factory=list)
    committed: list[CommittedSample] = field(default_factory=list)
    incarnations: int = 0
    restarts: int = 0
    commit_errors: int = 0


class _Recorder(RebalanceListener):
    def __init__(self, member: int, history: GroupHistory, consumer: Consumer) -> None:
        self.member = member
        self.history = history
        self.consumer = consumer
        self.owned: set[int] = set()

    def record(self, partitions: Iterable[int], change: OwnershipChange) -> None:
        now = trio.current_time()
        for p in list(partitions):
            self.history.ownership.append(Ownership(self.member, p, change, now))
            if change is OwnershipChange.ASSIGNED:
                self.owned.add(p)
            else:
                self.owned.discard(p)

    async def on_partitions_assigned(self, partitions: set[Any]) -> None:
        self.record((tp.partition for tp in partitions), OwnershipChange.ASSIGNED)

    async def on_partitions_revoked(self, partitions: set[Any]) -> None:
        try:  # what was processed is committed before the partitions go (Kafka's pattern)
            await self.consumer.commit(timeout_ms=5_000)
        except HighwaterClientError:
            self.history.commit_errors += 1
        self.record((tp.partition for tp in partitions), OwnershipChange.REVOKED)

    async def on_partitions_lost(self, partitions: set[Any]) -> None:
        self.record((tp.partition for tp in partitions), OwnershipChange.LOST)  # fenced: no commit


async def _member(bootstrap: str, topic: str, member: int, history: GroupHistory) -> None:
    """Poll, process (record), commit; until cancelled."""
    async with Consumer(
        bootstrap,
        group_id=GROUP,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=100,
        request_timeout_ms=5_000,
        metadata_max_age_ms=2_000,
        client_id=f"chaos-member-{member}",
    ) as consumer:
        recorder = _Recorder(member, history, consumer)
        consumer.subscribe([topic], listener=recorder)
        try:
            while True:
                try:
                    records = await consumer.poll(timeout_ms=200)
                except HighwaterClientError:
                    await trio.sleep(0.2)  # the cluster is having a fault: try again
                    continue
                now = trio.current_time()
                for r in records:
                    history.processed.append(Processed(member, r.partition, r.offset, now))
                if records:
                    try:
                        await consumer.commit(timeout_ms=5_000)
                    except HighwaterClientError:
                        history.commit_errors += 1
        finally:
            # Nothing is processed after this: the member's ownership ends here as far as the
            # checker is concerned (its leave reaches the coordinator after).
            recorder.record(recorder.owned, OwnershipChange.CLOSED)


async def run_group(
    bootstrap: str,
    topic: str,
    members: int,
    history: GroupHistory,
    restart_until: trio.Event,
    rng: random.Random,
    *,
    restart_every_s: tuple[float, float] = (4.0, 9.0),
) -> None:
    """`members` members until cancelled; until `restart_until` is set, one of them (picked
    by `rng`) is restarted every few seconds."""
    async with trio.open_nursery() as nursery:
        scopes: list[trio.CancelScope] = []

        async def incarnation(scope: trio.CancelScope) -> None:
            history.incarnations += 1
            with scope:
                await _member(bootstrap, topic, history.incarnations, history)

        for _ in range(members):
            scopes.append(trio.CancelScope())
            nursery.start_soon(incarnation, scopes[-1])
        while not restart_until.is_set():
            with trio.move_on_after(rng.uniform(*restart_every_s)):
                await restart_until.wait()
            if restart_until.is_set():
                break
            i = rng.randrange(members)
            scopes[i].cancel()
            history.restarts += 1
            scopes[i] = trio.CancelScope()
            nursery.start_soon(incarnation, scopes[i])
        await trio.sleep_forever()


async def sample_committed(
    bootstrap: str, topic: str, history: GroupHistory, every_s: float = 0.3
) -> None:
    """The group's committed offsets, again and again (until cancelled); failed reads skipped."""
    async with Admin(bootstrap, request_timeout_ms=3_000) as admin:
        while True:
            try:
                offsets = await admin.list_group_offsets(GROUP, high_watermarks=False)
            except HighwaterClientError:
                offsets = []
            now = trio.current_time()
            for o in offsets:
                if o.topic == topic and o.committed_offset is not None:
                    history.committed.append(CommittedSample(o.partition, o.committed_offset, now))
            await trio.sleep(every_s)
