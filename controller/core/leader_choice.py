"""Partition leader election strategies: Kafka's PartitionLeaderElectionAlgorithms. Pure.

Each strategy returns the new leader's broker id, or None when no replica qualifies.
Assignment order decides between candidates, so the preferred replica (the head) wins when it
can. `elect_offline` adds what the controller writes: the new leader, ISR and leader epoch.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

__all__ = [
    "NO_LEADER",
    "LeaderAndIsr",
    "controlled_shutdown_leader",
    "elect_controlled_shutdown",
    "elect_offline",
    "offline_leader",
    "preferred_replica_leader",
    "reassign_leader",
    "remove_replicas_from_isr",
]

NO_LEADER = -1


@dataclass(frozen=True, slots=True)
class LeaderAndIsr:
    leader: int
    leader_epoch: int
    isr: tuple[int, ...]


def offline_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    *,
    unclean: bool = False,
) -> int | None:
    """New or offline partition: the first live ISR member in assignment order; with unclean
    election enabled (opt-in, may lose committed data) any live replica otherwise."""
    for replica in assignment:
        if replica in live and replica in isr:
            return replica
    if unclean:
        for replica in assignment:
            if replica in live:
                return replica
    return None


def reassign_leader(
    target_replicas: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """Reassignment: the first live ISR member of the target replica set."""
    for replica in target_replicas:
        if replica in live and replica in isr:
            return replica
    return None


def preferred_replica_leader(
    assignment: Sequence[int], isr: Collection[int], live: Collection[int]
) -> int | None:
    """Preferred election: the assignment's head, if it is live and in the ISR."""
    if assignment and assignment[0] in live and assignment[0] in isr:
        return assignment[0]
    return None


def controlled_shutdown_leader(
    assignment: Sequence[int],
    isr: Collection[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> int | None:
    """Controlled shutdown: the first live ISR member that is not shutting down."""
    for replica in assignment:
        if replica in live and replica in isr and replica not in shutting_down:
            return replica
    return None


def elect_offline(
    current: LeaderAndIsr,
    assignment: Sequence[int],
    live: Collection[int],
    *,
    unclean: bool = False,
) -> LeaderAndIsr:
    """The state after an offline election (Kafka's leaderForOffline + removal of dead
    replicas from the ISR). Without a candidate: leader -1, ISR shrunk but never emptied."""
    leader = offline_leader(assignment, current.isr, live, unclean=unclean)
    if leader is None:
        return remove_replicas_from_isr(current, [r for r in current.isr if r not in live])
    # Unclean: the new leader alone is in sync by definition.
    isr = tuple(r for r in current.isr if r in live) if leader in current.isr else (leader,)
    return LeaderAndIsr(leader, current.leader_epoch + 1, isr)


def elect_controlled_shutdown(
    current: LeaderAndIsr,
    assignment: Sequence[int],
    live: Collection[int],
    shutting_down: Collection[int],
) -> LeaderAndIsr | None:
    """Move leadership off shutting-down brokers (Kafka's ControlledShutdownPartition-
    LeaderElectionStrategy): the new leader and an ISR without them, or None when no other
    live ISR member exists (the current leader then keeps leading)."""
    leader = controlled_shutdown_leader(assignment, current.isr, live, shutting_down)
    if leader is None:
        return None
    isr = tuple(r for r in current.isr if r not in shutting_down)
    return LeaderAndIsr(leader, current.leader_epoch + 1, isr)


def remove_replicas_from_isr(current: LeaderAndIsr, replicas: Collection[int]) -> LeaderAndIsr:
    """Kafka's removeReplicasFromIsr: drop `replicas` from the ISR (a removed leader leaves
    the partition leaderless) and bump the leader epoch; the last ISR member is never
    removed, so the ISR remembers who has the data. No change -> `current` unchanged."""
    isr = list(current.isr)
    leader = current.leader
    changed = False
    for replica in replicas:
        if replica == leader:
            leader = NO_LEADER
            changed = True
        if replica in isr and len(isr) > 1:
            isr.remove(replica)
            changed = True
    if not changed:
        return current
    return LeaderAndIsr(leader, current.leader_epoch + 1, tuple(isr))
